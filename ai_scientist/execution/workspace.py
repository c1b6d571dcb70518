"""Safe writer for files an LLM proposes into a node's workspace.

Every file list is validated completely before anything is written (all or
nothing). Rejected: absolute paths, ``..``, empty paths and components, NUL or
control characters, over-long names, paths through a symlink that leads out of
the workspace (judged where a chain of symlinks finally lands) or to no directory, targets that are directories or special files (devices, FIFOs,
sockets), oversize files (``exec.max_file_bytes``), too many files
(``exec.max_files``), duplicate paths, bad encodings or base64, and modes with
setuid / setgid / sticky bits. Each problem is a :class:`FileRejection` value
naming the path and the rule. ``validate_files`` returns the rejections as values;
``write_files`` raises one :class:`WorkspaceError` carrying all of them (its
message lists every path and rule), which the pipeline records on the node.
Files are written atomically (temp file + rename; an existing symlink at the
target is replaced, never followed).
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

MAX_COMPONENT = 255
MAX_PATH = 1024
DEFAULT_MODE = 0o644


@dataclass(frozen=True)
class FileRejection:
    """One rejected file: ``path`` as proposed, ``rule`` a short id, ``message`` for humans."""

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path!r}: {self.message} [{self.rule}]"


class WorkspaceError(ValueError):
    """The proposed file list was rejected; ``rejections`` holds every problem, nothing was written."""

    def __init__(self, rejections: list[FileRejection]):
        self.rejections = list(rejections)
        super().__init__("; ".join(str(r) for r in self.rejections))

    @property
    def rules(self) -> set[str]:
        return {r.rule for r in self.rejections}


@dataclass
class FileSpec:
    """One proposed file as the model wrote it: ``path`` and ``content`` are checked by
    :func:`validate_files`, so they may hold anything a model answer can (a number, null)."""

    path: Any
    content: Any
    encoding: str = "utf-8"
    mode: int | str | None = None

    @classmethod
    def coerce(cls, item: Any) -> FileSpec:
        if isinstance(item, FileSpec):
            return item
        if not isinstance(item, dict):
            raise TypeError(f"expected a mapping with path/content, got {type(item).__name__}")
        return cls(
            path=item.get("path"),
            content=item.get("content"),
            encoding=item.get("encoding") or "utf-8",
            mode=item.get("mode"),
        )


@dataclass
class WriteReport:
    """Relative paths written, in the order proposed."""

    written: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.written}


def _check_path(raw: Any) -> tuple[PurePosixPath | None, FileRejection | None]:
    shown = raw if isinstance(raw, str) else repr(raw)
    if not isinstance(raw, str) or not raw.strip():
        return None, FileRejection(shown, "empty_path", "path must be a non-empty string")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        return None, FileRejection(raw, "control_char", "path contains NUL or control characters")
    if len(raw) > MAX_PATH:
        return None, FileRejection(raw[:80] + "...", "too_long", f"path longer than {MAX_PATH} characters")
    if raw.startswith("/") or raw.startswith("\\") or (len(raw) > 1 and raw[1] == ":"):
        return None, FileRejection(
            raw, "absolute", "absolute paths are not allowed; use a path relative to the workspace"
        )
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts:
        return None, FileRejection(raw, "empty_path", "path names no file")
    if ".." in parts:
        return None, FileRejection(raw, "parent_ref", "'..' is not allowed in workspace paths")
    if any(len(p.encode()) > MAX_COMPONENT for p in parts):
        return None, FileRejection(raw, "too_long", f"a path component is longer than {MAX_COMPONENT} bytes")
    return PurePosixPath(*parts), None


def _inside(ws: Path, path: str) -> bool:
    return os.path.commonpath([path, str(ws)]) == str(ws)


def _check_target(ws: Path, rel: PurePosixPath, raw: str) -> FileRejection | None:
    """Walk the existing components: no symlink may lead out, no special file or directory at the end.

    Each symlink on the way is judged by where it finally lands (``realpath`` follows a chain
    of any length), so a link to a link that leaves the workspace is rejected here, before
    anything is written; ``write_files`` re-checks each parent only against concurrent changes.
    """
    cur = ws
    for i, part in enumerate(rel.parts):
        cur = cur / part
        last = i == len(rel.parts) - 1
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return FileRejection(raw, "unreadable", f"cannot inspect {cur}: {exc}")
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(cur)
            if not last and not _inside(ws, target):
                return FileRejection(
                    raw, "symlink_escape", f"'{part}' is a symlink leading outside the workspace"
                )
            if not last and not os.path.isdir(target):  # dangling: mkdir would fail at write time
                return FileRejection(raw, "not_a_directory", f"'{part}' is a symlink to no directory")
            if not last:
                continue
            return None  # replaced by rename, never followed
        if not last and not stat.S_ISDIR(st.st_mode):
            return FileRejection(raw, "not_a_directory", f"'{part}' exists and is not a directory")
        if last and stat.S_ISDIR(st.st_mode):
            return FileRejection(raw, "is_directory", "target exists and is a directory")
        if last and not stat.S_ISREG(st.st_mode):
            return FileRejection(raw, "special_file", "target exists and is a device, FIFO or socket")
    return None


def _decode(spec: FileSpec, raw: str) -> tuple[bytes | None, FileRejection | None]:
    if not isinstance(spec.content, str):
        return None, FileRejection(raw, "bad_content", "content must be a string")
    if spec.encoding == "utf-8":
        try:
            return spec.content.encode("utf-8"), None
        except UnicodeEncodeError:
            return None, FileRejection(
                raw, "bad_content", "content is not encodable as UTF-8 (lone surrogates)"
            )
    if spec.encoding == "base64":
        try:
            return base64.b64decode(spec.content, validate=True), None
        except (binascii.Error, ValueError):
            return None, FileRejection(raw, "bad_base64", "content is not valid base64")
    return None, FileRejection(
        raw, "bad_encoding", f"encoding must be utf-8 or base64, got {spec.encoding!r}"
    )


def _mode(spec: FileSpec, raw: str) -> tuple[int | None, FileRejection | None]:
    mode = spec.mode
    if mode is None:
        return DEFAULT_MODE, None
    try:
        value = int(mode, 8) if isinstance(mode, str) else int(mode)
    except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's Infinity
        return None, FileRejection(raw, "bad_mode", f"mode must be octal like '0644', got {mode!r}")
    if isinstance(mode, bool) or value < 0 or value > 0o7777:
        return None, FileRejection(raw, "bad_mode", f"mode out of range: {mode!r}")
    if value & 0o7000:
        return None, FileRejection(
            raw, "dangerous_mode", f"setuid/setgid/sticky bits are not allowed (mode {value:o})"
        )
    return value, None


def validate_files(workspace: Path, files: list[Any], *, max_files: int, max_file_bytes: int):
    """([(relative path, bytes, mode)], [errors]); nothing is written."""
    ws = Path(workspace).resolve()
    errors: list[FileRejection] = []
    if len(files) > max_files:
        return [], [
            FileRejection(
                "*",
                "too_many_files",
                f"{len(files)} files proposed; the limit is {max_files} (exec.max_files)",
            )
        ]
    plan, seen = [], set()
    for item in files:
        try:
            spec = FileSpec.coerce(item)
        except TypeError as exc:
            errors.append(FileRejection(repr(item)[:80], "bad_entry", str(exc)))
            continue
        rel, err = _check_path(spec.path)
        raw = spec.path if isinstance(spec.path, str) else repr(spec.path)
        if rel is None or err is not None:
            errors.append(err or FileRejection(raw, "empty_path", "path names no file"))
            continue
        if str(rel) in seen:
            errors.append(FileRejection(raw, "duplicate", "the same path is proposed twice"))
            continue
        err = _check_target(ws, rel, raw)
        data, derr = (None, None) if err else _decode(spec, raw)
        mode, merr = (None, None) if err or derr else _mode(spec, raw)
        err = err or derr or merr
        if err is None and data is not None and len(data) > max_file_bytes:
            err = FileRejection(
                raw,
                "too_large",
                f"{len(data)} bytes exceeds the limit of {max_file_bytes} (exec.max_file_bytes)",
            )
        if err or data is None:
            errors.append(err or FileRejection(raw, "bad_content", "content must be a string"))
            continue
        seen.add(str(rel))
        plan.append((rel, data, mode))
    return plan, errors


def write_files(
    workspace: Path, files: list[Any], *, max_files: int = 200, max_file_bytes: int = 5_000_000
) -> WriteReport:
    """Validate every proposed file, then write all of them; raises :class:`WorkspaceError` (nothing written)."""
    ws = Path(workspace).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    if not isinstance(files, list):
        raise WorkspaceError(
            [FileRejection("*", "bad_entry", f"files must be a list, got {type(files).__name__}")]
        )
    plan, errors = validate_files(ws, files, max_files=max_files, max_file_bytes=max_file_bytes)
    if errors:
        raise WorkspaceError(errors)
    report = WriteReport()
    for rel, data, mode in plan:
        target = ws / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # Re-check after mkdir: a directory created concurrently must still be inside the workspace.
        if not _inside(ws, os.path.realpath(target.parent)):
            raise WorkspaceError(
                [FileRejection(str(rel), "symlink_escape", "parent resolves outside the workspace")]
            )
        fd, tmp = tempfile.mkstemp(prefix=".write.", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        report.written.append(str(rel))
    return report
