"""Crash-safe file writes: every JSON a later process reads is written atomically.

``atomic_write_*`` write a temp file in the same directory, fsync it, rename it
over the target and fsync the directory, so a reader (or a resume after
kill -9) sees either the old or the new content, never a torn file.
``append_jsonl`` appends one line and returns once it is fsync'd; concurrent appenders to
one file share their fsyncs (group commit, :class:`_GroupLog`). ``read_jsonl`` skips a torn
last line (the only damage an interrupted append can leave).

Every file these helpers create is private to its owner (0600, whatever the umask): a run's
journal, events, memory and logs are readable by no other user (see docs/execution.md).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
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


class _GroupLog:
    """Group commit for one JSONL file: each record is written at once (one ``write`` under a
    lock, so file order is call order and kill -9 can no longer lose it: the bytes are in the
    kernel), and its fsync is shared. A caller waiting for durability either becomes the
    *leader*, fsyncing every record written so far, or waits for the leader whose fsync covers
    its record; records written while an fsync runs are covered by the next one. Concurrent
    workers thus pay one fsync per batch, and a single writer pays exactly what it paid before.
    """

    def __init__(self) -> None:
        self.write_lock = threading.Lock()
        self.cond = threading.Condition(threading.Lock())
        self.written = 0  # tickets handed out (records written)
        self.synced = 0  # every ticket <= synced is on disk
        self.syncing = False
        self.fsyncs = 0  # for tests and benchmarks: fsyncs issued

    def write(self, path: Path, line: bytes, failpoint: str | None) -> int:
        with self.write_lock:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                if failpoint is not None and failpoints.armed(failpoint):
                    os.write(fd, line[: len(line) // 2])  # a torn record, as a crash mid-write leaves it
                    os.fsync(fd)
                    failpoints.hit(failpoint)
                os.write(fd, line)
            finally:
                os.close(fd)
            with self.cond:
                self.written += 1
                return self.written

    def wait_durable(self, path: Path, ticket: int) -> None:
        with self.cond:
            while self.synced < ticket:
                if self.syncing:
                    self.cond.wait()
                    continue
                self.syncing = True
                upto = self.written  # every record written so far: this fsync covers them all
                self.cond.release()
                try:
                    _fsync_file(path)
                finally:
                    self.cond.acquire()
                    self.syncing = False
                    self.fsyncs += 1
                    self.synced = max(self.synced, upto)
                    self.cond.notify_all()


_GROUP_LOGS: dict[str, _GroupLog] = {}
_GROUP_LOGS_LOCK = threading.Lock()


def _group_log(path: Path) -> _GroupLog:
    key = os.path.abspath(path)
    with _GROUP_LOGS_LOCK:
        log = _GROUP_LOGS.get(key)
        if log is None:
            log = _GROUP_LOGS[key] = _GroupLog()
        return log


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # fsync is per file: it flushes what any descriptor wrote
    finally:
        os.close(fd)


def append_jsonl_nowait(path: str | Path, record: Any) -> int:
    """Append one JSON line now (O_APPEND, one write: concurrent writers never interleave a line;
    a kill -9 after this returns cannot lose it) and return a ticket for :func:`wait_durable`.

    Lets a caller that must keep records in order under its own lock (the journal) write under
    the lock and wait for the shared fsync after releasing it, so concurrent writers batch."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False, default=_default) + "\n").encode("utf-8")
    fp = f"torn_append:{path.name}:{record.get('seq')}" if isinstance(record, dict) else None
    return _group_log(path).write(path, line, fp)


def wait_durable(path: str | Path, ticket: int) -> None:
    """Return once the record with ``ticket`` (and every record written before it) is fsync'd."""
    _group_log(Path(path)).wait_durable(Path(path), ticket)


def fsync_count(path: str | Path) -> int:
    """How many group fsyncs this process issued for ``path`` (tests and benchmarks)."""
    return _group_log(Path(path)).fsyncs


def append_jsonl(path: str | Path, record: Any) -> None:
    """Append one JSON line and return once it is durable (fsync'd), group-committed with the
    records other threads append to the same file meanwhile (see :class:`_GroupLog`)."""
    wait_durable(path, append_jsonl_nowait(path, record))


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
