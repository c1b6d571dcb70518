"""One orchestrator per run directory: an exclusive ``flock`` on ``RUN/run.lock``.

The lock is held for the life of the process that runs (or resumes, or re-reports) the run and
is released by the kernel when that process ends, however it ends (``kill -9`` included), so
a stale lock never needs cleaning. The holder writes its pid and command into the file so the
refused process can name it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from .errors import UsageError
from .paths import RunPaths


class RunLocked(UsageError):
    """Another live process holds the run (CLI exit 2, naming its pid)."""


class RunLock:
    """An acquired lock; :meth:`release` (or process exit) frees it."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: str | Path, purpose: str = "") -> RunLock:
        """Take the run's lock without waiting, or raise :class:`RunLocked` naming the holder."""
        path = RunPaths(run_dir).lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            for _ in range(10):  # the holder may be between taking the lock and writing its pid
                if holder != "pid unknown":
                    break
                time.sleep(0.05)
                holder = _read_holder(fd)
            os.close(fd)
            raise RunLocked(
                f"{run_dir}: the run is in use by another process ({holder}); wait for it to end or "
                "stop it (Ctrl-C or kill that pid), then try again"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # the holder's identity, for the message of whoever is refused next
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        what = purpose or " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:3]))
        os.pwrite(fd, f"pid {os.getpid()}, {what}, since {stamp}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor drops the flock

    def __del__(self) -> None:  # a dropped handle must not keep the run locked in a long process
        self.release()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "pid unknown"
