"""What keeps generated code away from the orchestrator: its key, environment, memory, files and runs.

Three measures, shared by the local backends (subprocess, bwrap):

- :func:`harden_orchestrator` makes the orchestrator non-dumpable (``PR_SET_DUMPABLE 0``)
  before it runs any command: even a process with its uid cannot read its
  ``/proc/PID/environ`` or ``/proc/PID/mem`` nor ptrace it. The key stays in the
  orchestrator's *initial* environment block (``/proc/PID/environ`` would show it even after
  a scrub or re-exec), so the guarantee is that a sandbox never sees that process at all.
- :class:`MountPlan`: every command starts in a new mount namespace, set up in the forked
  child before ``exec`` (no extra program, a few syscalls): private tmpfs over ``/tmp``
  ``/var/tmp`` ``/dev/shm`` ``/run/lock``; every ancestor of the workspace that the
  command's fresh uid cannot enter (a repository under ``/root``, ``mktemp -d``, the run
  directory itself, which is 0700) is covered by an empty tmpfs, and the workspace, the
  install prefix, the resources and the interpreter are bind-mounted back at their own
  paths. So the uid drop works wherever the output lives, and the rest of the run
  directory and every other run stay invisible. A fresh ``/proc`` follows in the new pid
  namespace (mounted by the plan when the child is the namespace's init, see
  :func:`pid_namespace_for_next_child`; else ``unshare --mount-proc``), and
  :func:`drop_to_uid` leaves the command a fresh uid and no capability.
- :class:`UnsafeSandbox`: a backend that cannot give these guarantees here refuses to
  start (exit 2, with the reason and the fix) unless ``exec.allow_unsafe_sandbox: true``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..base.errors import ConfigError
from .base import SandboxError

# the child-side set-up lives in the fork server's module (stdlib only, run as the server)
from .forkserver import (  # noqa: F401 - re-exported: the backends and netns import them from here
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RELATIME,
    PR_SET_DUMPABLE,
    Bind,
    MountPlan,
    _check,
    _libc,
    drop_to_uid,
    orchestrator_pidfd,
    pid_namespace_for_next_child,
)

# Directories every user may write on a typical host: each gets a private tmpfs.
PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
UNSAFE_KEY = "exec.allow_unsafe_sandbox"

# statvfs f_flag bits -> the mount flags a read-only remount must keep (locked in a user namespace)
_KEEP = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME),
         (4096, MS_RELATIME))  # fmt: skip
_hardened = False


class SandboxUnavailable(SandboxError, ConfigError):
    """No configured sandbox can run here: a set-up problem the user must fix (CLI exit 2)."""


class UnsafeSandbox(SandboxUnavailable):
    """The backend cannot keep generated code away from the orchestrator here (exit 2)."""


def refuse(backend: str, problem: str, fix: str) -> UnsafeSandbox:
    """The error a backend raises instead of running unisolated (the message says how to fix it)."""
    return UnsafeSandbox(
        f"exec.backend={backend} cannot isolate generated code here: {problem}. Fix: {fix}; "
        f"or accept the risk with `{UNSAFE_KEY}: true` (generated code may then read this user's files)"
    )


def harden_orchestrator() -> bool:
    """Make this process non-dumpable (once): no process of its uid can read its memory or environ.

    Returns whether it is set. Children are unaffected (``execve`` resets the flag)."""
    global _hardened
    if not _hardened:
        _hardened = _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    return _hardened


def _kept_flags(path: str) -> int:
    try:
        f_flag = os.statvfs(path).f_flag
    except OSError:
        return MS_NOSUID | MS_NODEV
    return MS_NOSUID | MS_NODEV | sum(ms for st, ms in _KEEP if f_flag & st)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _cover_of(path: str, tmpfs: tuple[str, ...], drop_uid: bool) -> str | None:
    """The topmost ancestor of ``path`` that hides it from the command (a private tmp dir, or a
    directory others cannot enter when the command runs under a fresh uid), if any."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        anc = str(Path(*parts[:i]))
        if anc in tmpfs:
            return anc
        if drop_uid:
            try:
                mode = os.stat(anc).st_mode
            except OSError:
                return anc
            if not mode & stat.S_IXOTH:
                if anc == "/":
                    raise SandboxError("/ is not enterable by other users (mode lacks o+x)")
                return anc
    return None


def interpreter_root(python: str) -> Path | None:
    """The installation a sandbox interpreter comes from (``.../bin/python3`` -> ``...``), resolved."""
    try:
        real = Path(python).resolve(strict=True)
    except OSError:
        return None
    return real.parent.parent if real.parent.name == "bin" else real.parent


def plan_mounts(
    needed: list[tuple[Path, str]],
    *,
    workdir: Path,
    drop_uid: bool,
    private_tmp: bool = True,
    user_ns: tuple[int, int] | None = None,
    tmp_size_mb: int = 1024,
    hidden: tuple[str, ...] = (),
    mounts: tuple[tuple[Path, Path], ...] = (),
) -> MountPlan:
    """The mount namespace for a command needing ``needed`` = [(host path, access)].

    ``access`` is ``rw``, ``ro`` (always bound read-only) or ``reach`` (bound read-only only
    when hidden, e.g. an interpreter under ``/root``). A path hidden by a private tmp dir or,
    with ``drop_uid``, below a directory other users cannot enter is bound back at its own
    path; everything else under such a directory disappears. Missing paths are skipped.

    ``hidden``: directories covered by an empty tmpfs whoever may read them (a grader's
    directory: its hidden data). ``mounts``: ``(target, source)`` pairs, ``source`` bound
    read-only at ``target`` (a grader's ``submission/`` and ``grader/``; the handle is opened
    before any cover, so a hidden source still binds).
    """
    tmpfs: list[str] = []
    if private_tmp:
        for d in PRIVATE_TMP_DIRS:
            real = os.path.realpath(d)
            if os.path.isdir(real) and real not in tmpfs:
                tmpfs.append(real)
    tmp = tuple(tmpfs)
    covers: set[str] = set()
    binds: dict[str, Bind] = {}
    for path, access in needed:
        p = os.path.realpath(path)
        if not os.path.exists(p):
            continue
        cover = _cover_of(p, tmp, drop_uid)
        if cover is not None and cover not in tmp:
            covers.add(cover)
        if cover is not None or access == "ro":
            prev = binds.get(p)
            ro = access != "rw" and (prev is None or prev.read_only)
            binds[p] = Bind(p, ro, _kept_flags(p) if ro else 0)
    for h in hidden:
        real = os.path.realpath(h)
        if os.path.isdir(real) and not any(_under(real, t) for t in tmp):
            covers.add(real)
    for target, source in mounts:
        src = os.path.realpath(source)
        if os.path.exists(src):
            binds[str(target)] = Bind(str(target), True, _kept_flags(src), src)
    # only the topmost covers: a cover inside another (or inside a private tmp dir) is already hidden
    top = sorted(c for c in covers if not any(_under(c, o) and c != o for o in [*covers, *tmp]))
    ordered = tuple(sorted(binds.values(), key=lambda b: (b.path.count("/"), b.path)))
    return MountPlan(tmp, tuple(top), ordered, str(Path(workdir).resolve()), user_ns, tmp_size_mb)
