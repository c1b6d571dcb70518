"""Crash-safe file writes: every JSON a later process reads is written atomically.

``atomic_write_*`` write a temp file in the same directory, fsync it, rename it
over the target and fsync the directory, so a reader (or a resume after
kill -9) sees either the old or the new content, never a torn file.
``append_jsonl`` appends one line and fsyncs; ``read_jsonl`` skips a torn last
line (the only damage an interrupted append can leave).

Every file these helpers create is private to its owner (0600, whatever the umask): a run's
journal, events, memory and logs are readable by no other user (see docs/execution.md).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import failpoints

PRIVATE_FILE_MODE = 0o600


def create_private(path: str | Path) -> Path:
    """Create ``path`` empty with mode 0600 if it does not exist (e.g. before SQLite opens it:
    SQLite would create it 0644, and gives its -wal / -shm files the database file's mode)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE))
    return path


def regular_file_inside(root: str | Path, path: str | Path) -> bool:
    """True if ``path`` is a regular file whose real location is inside ``root``.

    Workspaces are written by generated code: a symlink it planted (``metrics.json ->
    /proc/self/environ``, ``notes.py -> ~/.ssh/id_rsa``, another run's journal) or a FIFO /
    device must never make the orchestrator read, copy or show something else."""
    try:
        base = os.path.realpath(root)
        real = os.path.realpath(path)
        inside = real == base or real.startswith(base.rstrip("/") + "/")
        return inside and stat.S_ISREG(os.stat(real).st_mode)
    except (OSError, ValueError):
        return False


def read_file_inside(root: str | Path, path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a workspace file, or ValueError naming why not: not a regular file inside
    ``root`` (see :func:`regular_file_inside`) or larger than ``max_bytes``."""
    if not regular_file_inside(root, path):
        raise ValueError("not a regular file inside the workspace (symlink out, FIFO, device or missing)")
    with open(os.path.realpath(path), "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    return data


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename).

    The rename alone makes the write safe against a killed process (kill -9 cannot tear it);
    ``durable`` adds the fsyncs that also survive a power loss. Files that can be recreated
    (prompt logs, exec records, node artifacts whose phase is redone when missing) skip them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable)


def dumps(obj: Any) -> str:
    """Canonical JSON used for files: UTF-8, indented, keys in insertion order."""
    return json.dumps(obj, indent=2, ensure_ascii=False, default=_default)


def _default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    if hasattr(o, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_write_json(path: str | Path, obj: Any, *, durable: bool = True, compact: bool = False) -> Path:
    """``compact`` skips indentation (json's C encoder: much faster for large files)."""
    text = json.dumps(obj, ensure_ascii=False, default=_default) if compact else dumps(obj)
    return atomic_write_text(path, text + "\n", durable)


def read_json(path: str | Path, default: Any = None) -> Any:
    path = Path(path)
    if not path.exists():
        return default
    return json.loads(path.read_text(encoding="utf-8"))


def append_jsonl(path: str | Path, record: Any) -> None:
    """Append one JSON line and fsync it (O_APPEND: concurrent writers never interleave a line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False, default=_default) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        if isinstance(record, dict) and failpoints.armed(f"torn_append:{path.name}:{record.get('seq')}"):
            os.write(fd, line[: len(line) // 2])  # a torn record, as a crash mid-write leaves it
            os.fsync(fd)
            failpoints.hit(f"torn_append:{path.name}:{record.get('seq')}")
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file; a torn final line (kill -9 mid-append) is skipped."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # torn tail of an interrupted append
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError:
                continue
