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

import contextlib
import ctypes
import errno
import os
import select
import signal
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..base.config import ConfigError
from .base import SandboxError

# Directories every user may write on a typical host: each gets a private tmpfs.
PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
UNSAFE_KEY = "exec.allow_unsafe_sandbox"

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs f_flag bits -> the mount flags a read-only remount must keep (locked in a user namespace)
_KEEP = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME),
         (4096, MS_RELATIME))  # fmt: skip
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_hardened = False
_own: dict[str, int] = {}  # descriptors opened once: this process's pid namespace, a pidfd of itself


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 63  # dropping a capability the kernel does not know is refused, and skipped


_CAP_LAST = _cap_last()


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


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


@dataclass(frozen=True)
class Bind:
    """A host path the command needs, mounted back at its own path (read-only if ``read_only``)."""

    path: str
    read_only: bool
    flags: int = 0  # mount flags of the source that a read-only remount must keep


@dataclass(frozen=True)
class MountPlan:
    """The mount namespace one command starts in; built in the parent, applied in the child."""

    tmpfs: tuple[str, ...]  # private, empty, mode 1777
    covers: tuple[str, ...]  # ancestors the command's uid cannot enter: an empty tmpfs (0755)
    binds: tuple[Bind, ...]  # mounted back at their own path, shallowest first
    chdir: str  # the command's working directory, entered again through its bind
    user_ns: tuple[int, int] | None = None  # (uid, gid) mapped to 0 when the orchestrator is not root
    tmp_size_mb: int = 1024
    namespaces: int = 0  # more namespaces unshared with the mount namespace (CLONE_NEWIPC, CLONE_NEWNET)
    proc: bool = False  # mount a fresh /proc (the child is the init of a new pid namespace)

    @property
    def empty(self) -> bool:
        """Nothing to hide, bind back or mount: the command needs no mount namespace of its own."""
        return not (self.tmpfs or self.covers or self.binds or self.namespaces or self.proc)

    def apply(self) -> None:
        """Run in the forked child before exec (``preexec_fn``): raises OSError if a step fails."""
        if self.user_ns is not None:
            # a non-dumpable process's /proc/self files belong to root: dumpable only while the
            # maps are written (this fork of the orchestrator is in no sandbox's pid namespace)
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | self.namespaces), "unshare(user, mount)")
            uid, gid = self.user_ns
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
            _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        else:
            _check(_libc.unshare(CLONE_NEWNS | self.namespaces), "unshare(mount)")
        _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        # handles first: a cover may hide the path, /proc/self/fd/N still reaches it
        fds = [os.open(b.path, os.O_PATH | os.O_CLOEXEC) for b in self.binds]
        size = f"size={self.tmp_size_mb}m".encode()
        for d in self.tmpfs:
            opts = b"mode=1777," + size
            _check(_libc.mount(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts), f"tmpfs {d}")
        for d in self.covers:
            opts = b"mode=0755,size=1m"
            _check(_libc.mount(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts), f"cover {d}")
        for bind, fd in zip(self.binds, fds, strict=True):
            target = bind.path.encode()
            if not os.path.exists(bind.path):
                is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
                _mkdirs(bind.path if is_dir else os.path.dirname(bind.path))
                if not is_dir:
                    os.close(os.open(bind.path, os.O_CREAT | os.O_WRONLY, 0o644))
            src = f"/proc/self/fd/{fd}".encode()
            _check(_libc.mount(src, target, None, MS_BIND | MS_REC, None), f"bind {bind.path}")
            if bind.read_only:
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY | bind.flags
                _check(_libc.mount(None, target, None, flags, None), f"read-only {bind.path}")
            os.close(fd)
        if self.proc:
            flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
            _check(_libc.mount(b"proc", b"/proc", b"proc", flags, None), "mount /proc")
        os.chdir(self.chdir)


@contextlib.contextmanager
def pid_namespace_for_next_child() -> Iterator[None]:
    """The next process this thread forks starts a new pid namespace (as its init, pid 1).

    ``unshare(CLONE_NEWPID)`` changes only the namespace this thread's *children* are born in
    (the orchestrator itself stays where it is; other threads are unaffected); on leaving,
    ``setns`` puts it back, so each command gets a namespace of its own. Needs CAP_SYS_ADMIN
    (a root orchestrator). Saves the ``unshare --pid --fork`` process and its two execs."""
    if "pidns" not in _own:
        _own["pidns"] = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.unshare(CLONE_NEWPID), "unshare(pid)")
    try:
        yield
    finally:
        _check(_libc.setns(_own["pidns"], CLONE_NEWPID), "setns(pid)")


def orchestrator_pidfd() -> int:
    """A pidfd of this process (opened once, close-on-exec): a child checks with it, after
    setting its death signal, that the orchestrator did not die before (the signal would be lost)."""
    key = f"self-{os.getpid()}"  # a forked copy of the orchestrator checks on itself
    if key not in _own:
        try:
            _own[key] = os.pidfd_open(os.getpid())
        except OSError:  # before Linux 5.3: no check (the death signal still holds once set)
            _own[key] = -1
    return _own[key]


def drop_to_uid(uid: int, parent_pidfd: int, *, capabilities: bool = True) -> None:
    """In the forked child, before exec: what ``setpriv --reuid --regid --clear-groups
    --inh-caps=-all --bounding-set=-all --no-new-privs --pdeathsig KILL`` does, without the
    extra program. The child keeps no capability (bounding, ambient, inheritable, permitted
    and effective sets empty), cannot gain privileges by exec (setuid binaries, file caps) and
    dies with the orchestrator (the death signal is set after the uid change, which clears it).
    ``capabilities=False`` only changes the uid, groups and death signal (``setpriv --reuid
    --regid --clear-groups``, as for bwrap, which drops the rest itself)."""
    if capabilities:
        for cap in range(_CAP_LAST + 1):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
                _check(-1, f"drop capability {cap}")  # EINVAL: a capability this kernel does not have
        _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears the permitted and effective sets
    if capabilities:
        header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
        _check(_libc.capset(ctypes.byref(header), data), "clear capabilities")
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "death signal")
    if parent_pidfd >= 0 and select.select([parent_pidfd], [], [], 0)[0]:
        os._exit(137)  # the orchestrator died before the death signal was set


def _mkdirs(path: str) -> None:
    """Create ``path`` and its missing parents enterable by all (0755 whatever the umask)."""
    if os.path.isdir(path):
        return
    _mkdirs(os.path.dirname(path))
    os.mkdir(path)
    os.chmod(path, 0o755)


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
) -> MountPlan:
    """The mount namespace for a command needing ``needed`` = [(host path, access)].

    ``access`` is ``rw``, ``ro`` (always bound read-only) or ``reach`` (bound read-only only
    when hidden, e.g. an interpreter under ``/root``). A path hidden by a private tmp dir or,
    with ``drop_uid``, below a directory other users cannot enter is bound back at its own
    path; everything else under such a directory disappears. Missing paths are skipped.
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
    # only the topmost covers: a cover inside another (or inside a private tmp dir) is already hidden
    top = sorted(c for c in covers if not any(_under(c, o) and c != o for o in [*covers, *tmp]))
    ordered = tuple(sorted(binds.values(), key=lambda b: (b.path.count("/"), b.path)))
    return MountPlan(tmp, tuple(top), ordered, str(Path(workdir).resolve()), user_ns, tmp_size_mb)
