"""The fork server: a small process that forks the sandboxed commands, and what a child sets up.

Why: a command's child must be set up between ``fork`` and ``exec`` (mount namespace, uid drop,
rlimits, death signal), so CPython's ``subprocess`` cannot use ``vfork`` and copies the whole
orchestrator's page tables for every command: 2.7 ms in a 75 MB process and growing with its
size (an orchestrator holding a local model or a 2,000-node tree is hundreds of MB). The fork
server is a second interpreter started once, early and small (``python -I -S -X utf8`` running
this file, an empty environment, stdlib only, about 10 MB); the orchestrator sends it each
command (argv, environment, working directory and a :class:`ChildSpec`) over a private
``SOCK_SEQPACKET`` socket pair, with the output pipes' write ends and the node's network
namespace passed as descriptors (``SCM_RIGHTS``), and gets the pid back once the command has
been set up and ``exec``'d. The orchestrator then supervises it exactly as its own child
(:mod:`.process`: a pidfd, the pipes, the tree walk); only the reaping is the server's, done
when the orchestrator asks (``reap``) so a pid is never reused while a kill may still reach it.

What it keeps: the child-side code below is the same whether the server or the orchestrator
forks (:func:`prepare_child`); the server holds no secret (empty environment, no API key in its
memory), is non-dumpable, lives in its own session (a Ctrl-C at the terminal does not reach it)
and dies with the orchestrator: its death signal is tied to a thread that lives as long as the
orchestrator, and it exits when its socket closes. Its commands' death signal is tied to the
server, so a kill -9 of the orchestrator still takes every command with it. When the server
cannot start or dies, or a request does not fit in one message, commands are forked by the
orchestrator as before (same set-up, same guarantees, only slower); ``exec.fork_server: false``
turns it off.

This module must import nothing outside the standard library: the server runs it as a script.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
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


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ---------------------------------------------------------------- what a child sets up


@dataclass(frozen=True)
class Bind:
    """A host path the command needs, mounted back at its own path (read-only if ``read_only``);
    with ``source``, that host path is mounted at ``path`` instead (a grader's ``submission/``)."""

    path: str
    read_only: bool
    flags: int = 0  # mount flags of the source that a read-only remount must keep
    source: str | None = None


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
        """Run in the forked child before exec: raises OSError if a step fails."""
        if self.user_ns is not None:
            # a non-dumpable process's /proc/self files belong to root: dumpable only while the
            # maps are written (this forked child is in no sandbox's pid namespace yet)
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
        fds = [os.open(b.source or b.path, os.O_PATH | os.O_CLOEXEC) for b in self.binds]
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

    @classmethod
    def from_json(cls, d: dict) -> MountPlan:
        return cls(
            tuple(d["tmpfs"]),
            tuple(d["covers"]),
            tuple(Bind(**b) for b in d["binds"]),
            d["chdir"],
            tuple(d["user_ns"]) if d["user_ns"] is not None else None,
            d["tmp_size_mb"],
            d["namespaces"],
            d["proc"],
        )


def _mkdirs(path: str) -> None:
    """Create ``path`` and its missing parents enterable by all (0755 whatever the umask)."""
    if os.path.isdir(path):
        return
    _mkdirs(os.path.dirname(path))
    os.mkdir(path)
    os.chmod(path, 0o755)


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG(SIGKILL): if the process that forked this one dies, this one does too."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def apply_rlimits(values: tuple[tuple[int, int], ...]) -> None:
    """Set each (resource, value) as soft and hard limit; one the host refuses is skipped."""
    for res, value in values:
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass  # not permitted here; the supervisor's sampler still enforces memory / pids


def orchestrator_pidfd() -> int:
    """A pidfd of this process (opened once, close-on-exec): a child checks with it, after
    setting its death signal, that its parent did not die before (the signal would be lost)."""
    key = f"self-{os.getpid()}"  # a forked copy checks on itself
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
    dies with its parent (the death signal is set after the uid change, which clears it).
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
    if parent_pidfd >= 0 and _readable(parent_pidfd):
        os._exit(137)  # the parent died before the death signal was set


def _readable(fd: int) -> bool:
    """``fd`` is readable now (a pidfd: its process has exited); ``poll``, any descriptor number."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


@contextlib.contextmanager
def pid_namespace_for_next_child() -> Iterator[None]:
    """The next process this thread forks starts a new pid namespace (as its init, pid 1).

    ``unshare(CLONE_NEWPID)`` changes only the namespace this thread's *children* are born in
    (the thread itself stays where it is; other threads are unaffected); on leaving, ``setns``
    puts it back, so each command gets a namespace of its own. Needs CAP_SYS_ADMIN. Saves the
    ``unshare --pid --fork`` process and its two execs."""
    if "pidns" not in _own:
        _own["pidns"] = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.unshare(CLONE_NEWPID), "unshare(pid)")
    try:
        yield
    finally:
        _check(_libc.setns(_own["pidns"], CLONE_NEWPID), "setns(pid)")


@contextlib.contextmanager
def network_namespace_for_next_child(netns_fd: int) -> Iterator[None]:
    """The calling thread is in the network namespace ``netns_fd`` inside the block (a process
    it forks there is born in it), and back in its own after (an error going back is raised:
    a thread left in a command's namespace would lose the network)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(netns_fd, CLONE_NEWNET), "setns(net) into the node's namespace")
        try:
            yield
        finally:
            _check(_libc.setns(home, CLONE_NEWNET), "setns(net) back to this thread's namespace")
    finally:
        os.close(home)


@dataclass(frozen=True)
class ChildSpec:
    """Everything a command's child does between fork and exec, as data (sent to the server).

    ``netns_fd`` (a network namespace the child is born in) is a descriptor the caller keeps
    open until the command has started; ``new_pid_ns``: the child is the init of a new pid
    namespace (needs CAP_SYS_ADMIN)."""

    plan: MountPlan | None = None
    uid: int | None = None
    capabilities: bool = True  # with ``uid``: drop every capability too (see drop_to_uid)
    rlimits: tuple[tuple[int, int], ...] = ()
    new_pid_ns: bool = False
    netns_fd: int = -1

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("netns_fd")  # travels as a descriptor
        return d

    @classmethod
    def from_json(cls, d: dict, netns_fd: int = -1) -> ChildSpec:
        return cls(
            MountPlan.from_json(d["plan"]) if d["plan"] is not None else None,
            d["uid"],
            d["capabilities"],
            tuple((int(r), int(v)) for r, v in d["rlimits"]),
            d["new_pid_ns"],
            netns_fd,
        )


def prepare_child(spec: ChildSpec, parent_pidfd: int) -> None:
    """In the forked child, before exec: death signal, mount plan, uid drop, rlimits (last: the
    address-space limit may be below the size of this forked copy)."""
    die_with_parent()
    if spec.plan is not None:
        spec.plan.apply()
    if spec.uid is not None:
        drop_to_uid(spec.uid, parent_pidfd, capabilities=spec.capabilities)
    apply_rlimits(spec.rlimits)


@contextlib.contextmanager
def born_in(spec: ChildSpec) -> Iterator[None]:
    """What the forking thread enters around the fork: the spec's network and pid namespaces."""
    with contextlib.ExitStack() as stack:
        if spec.netns_fd >= 0:
            stack.enter_context(network_namespace_for_next_child(spec.netns_fd))
        if spec.new_pid_ns:
            stack.enter_context(pid_namespace_for_next_child())
        yield


# ---------------------------------------------------------------- the server (runs this file)

MAX_REQUEST = 160_000  # bytes of one request (a socket buffer); a larger one is forked in-process
_RESTORED = (signal.SIGPIPE, getattr(signal, "SIGXFZ", None), signal.SIGXFSZ)


def _child(req: dict, spec: ChildSpec, out_fd: int, err_fd: int, report: int, me: int) -> None:
    """The forked child in the server: set up, exec; a failure is written to ``report``. Never returns."""
    stage = "setup"
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.chdir(req["cwd"])
        for sig in _RESTORED:  # as subprocess's restore_signals: Python ignores these
            if sig is not None:
                signal.signal(sig, signal.SIG_DFL)
        prepare_child(spec, me)
        os.closerange(3, report)
        os.closerange(report + 1, 1 << 20)
        stage = "exec"
        os.execvpe(req["argv"][0], req["argv"], req["env"])
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the orchestrator
        code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        # exec: as subprocess words it (the client adds the program as named); set-up: all of it
        message = exc.strerror or str(exc) if stage == "exec" and isinstance(exc, OSError) else str(exc)
        with contextlib.suppress(OSError):
            os.write(report, json.dumps({"stage": stage, "errno": code, "message": message}).encode())
    finally:
        os._exit(255)


def _spawn(req: dict, fds: list[int], me: int, children: set[int]) -> dict:
    out_fd, err_fd = fds[0], fds[1]
    spec = ChildSpec.from_json(req["spec"], fds[2] if req.get("netns") and len(fds) > 2 else -1)
    r, w = os.pipe()  # close-on-exec: EOF at the exec, or the failure
    failed: OSError | None = None
    try:
        with born_in(spec):
            try:
                pid = os.fork()
            except OSError as exc:  # EAGAIN, ENOMEM: the command could not start (as with Popen)
                failed = exc
            else:
                if pid == 0:
                    _child(req, spec, out_fd, err_fd, w, me)
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    if failed is not None:
        os.close(r)
        return {"error": "fork", "errno": failed.errno or 0, "message": failed.strerror or str(failed)}
    try:
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
    finally:
        os.close(r)
    if chunks:
        os.waitpid(pid, 0)
        failure = json.loads(b"".join(chunks))
        return {"error": failure["stage"], "errno": failure["errno"], "message": failure["message"]}
    children.add(pid)
    return {"pid": pid}


def serve(sock_fd: int, parent: int) -> None:
    """The server's loop: one request at a time until the orchestrator's end of the socket closes."""
    die_with_parent()
    if os.getppid() != parent:
        return  # the orchestrator died before the death signal was set
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    sock = socket.socket(fileno=sock_fd)
    me = orchestrator_pidfd()
    children: set[int] = set()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST + 1024, 4)
        except OSError:
            return
        if not data:
            return  # the orchestrator is gone: our commands die with us (their death signal)
        try:
            req = json.loads(data)
            if req["op"] == "spawn":
                reply = _spawn(req, fds, me, children)
            elif req["op"] == "reap" and req["pid"] in children:
                children.discard(req["pid"])
                # wait4: the kernel's CPU time of the command and every process reaped in its tree
                _, status, ru = os.wait4(req["pid"], 0)
                reply = {"status": status, "cpu_s": ru.ru_utime + ru.ru_stime}
            elif req["op"] == "ping":
                reply = {"pid": os.getpid()}
            else:
                reply = {"error": "request", "errno": 0, "message": f"unknown request {req!r:.200}"}
        except Exception as exc:  # noqa: BLE001 - the server answers and goes on
            reply = {"error": "server", "errno": getattr(exc, "errno", 0) or 0, "message": repr(exc)}
        finally:
            for fd in fds:
                os.close(fd)
        try:
            sock.send(json.dumps(reply).encode())
        except OSError:
            return


# ---------------------------------------------------------------- the orchestrator's side


class ServerGone(RuntimeError):
    """The fork server stopped answering (it is not used again)."""


class SetupFailed(RuntimeError):
    """The child's set-up failed before exec (a sandbox that cannot be set up here)."""


class ForkServer:
    """The orchestrator's handle on its fork server: one request and answer at a time."""

    START_TIMEOUT_S = 20.0
    ANSWER_TIMEOUT_S = 120.0  # a child's set-up (mounts) is milliseconds; a stuck one ends the server

    def __init__(self) -> None:
        import subprocess

        self._lock = threading.Lock()
        self.dead = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        started = threading.Event()
        box: dict = {}

        def park() -> None:
            # the server's death signal fires when the *thread* that started it ends: this one
            # lives until the server is gone
            try:
                box["proc"] = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        "-S",
                        "-X",
                        "utf8",
                        os.path.abspath(__file__),
                        str(theirs.fileno()),
                        str(os.getpid()),
                    ],  # fmt: skip
                    env={},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    pass_fds=[theirs.fileno()],
                    start_new_session=True,
                )
            except OSError as exc:
                box["error"] = exc
            finally:
                theirs.close()
                started.set()
            if "proc" in box:
                box["proc"].wait()
                self.dead = True

        threading.Thread(target=park, daemon=True, name="fork-server").start()
        started.wait()
        if "error" in box:
            raise ServerGone(f"the fork server could not start: {box['error']}")
        self.proc = box["proc"]
        self.pid = self.proc.pid
        self._sock.settimeout(self.START_TIMEOUT_S)
        if self._ask({"op": "ping"}).get("pid") != self.pid:
            self.close()
            raise ServerGone("the fork server did not answer")
        self._sock.settimeout(self.ANSWER_TIMEOUT_S)

    def _ask(self, req: dict, fds: tuple[int, ...] = ()) -> dict:
        data = json.dumps(req).encode()
        with self._lock:
            if self.dead:
                raise ServerGone("the fork server has stopped")
            try:
                socket.send_fds(self._sock, [data], list(fds)) if fds else self._sock.send(data)
                answer = self._sock.recv(65536)
            except OSError as exc:  # a timeout too: the server is stuck, it is let go
                self._gone()
                raise ServerGone(f"the fork server stopped answering: {exc}") from None
            if not answer:
                self._gone()
                raise ServerGone("the fork server has stopped")
        return json.loads(answer)

    def _gone(self) -> None:
        self.dead = True
        with contextlib.suppress(OSError):
            self.proc.kill()  # its commands die with it (their death signal)

    def fits(self, argv: list[str], env: dict[str, str]) -> bool:
        """Whether the request fits in one message (else the caller forks in-process)."""
        return sum(len(a) + 1 for a in argv) + sum(len(k) + len(v) + 6 for k, v in env.items()) < (
            MAX_REQUEST - 40_000  # the spec, the cwd and JSON escaping
        )

    def spawn(
        self, argv: list[str], cwd: str, env: dict[str, str], spec: ChildSpec, out_fd: int, err_fd: int
    ) -> int:
        """Start ``argv`` set up by ``spec``; its pid once it has exec'd. Raises OSError when the
        program cannot be executed, :class:`SetupFailed` when the set-up failed, ServerGone."""
        req = {
            "op": "spawn",
            "argv": list(argv),
            "cwd": cwd,
            "env": env,
            "spec": spec.to_json(),
            "netns": spec.netns_fd >= 0,
        }
        fds = (out_fd, err_fd, *((spec.netns_fd,) if spec.netns_fd >= 0 else ()))
        answer = self._ask(req, fds)
        if "pid" in answer:
            return int(answer["pid"])
        if answer["error"] == "exec":  # as subprocess reports it: the program as named
            raise OSError(answer["errno"], answer["message"], argv[0])
        if answer["error"] == "fork":
            raise OSError(answer["errno"], answer["message"])
        raise SetupFailed(f"{answer['error']} failed: {answer['message']}")

    def reap(self, pid: int) -> tuple[int, float | None]:
        """The exit code (as ``Popen.returncode``) of ``pid``, which has exited, and the CPU
        seconds (user + system) of it and its reaped descendants; reaped now."""
        status = self._ask({"op": "reap", "pid": pid})
        if "status" not in status:
            raise ServerGone(f"the fork server could not reap {pid}: {status.get('message')}")
        cpu = status.get("cpu_s")
        return os.waitstatus_to_exitcode(status["status"]), (float(cpu) if cpu is not None else None)

    def close(self) -> None:
        """Stop the server (its socket closes; it exits)."""
        self.dead = True
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)


_shared: dict[str, ForkServer | None] = {}
_shared_lock = threading.Lock()


def shared() -> ForkServer | None:
    """This process's fork server, started on first use; None when unavailable (no pidfd to
    watch its children, it could not start) or stopped."""
    with _shared_lock:
        key = str(os.getpid())  # a forked copy of the orchestrator starts its own
        if key not in _shared:
            try:
                os.close(os.pidfd_open(os.getpid()))
                _shared[key] = ForkServer()
            except (OSError, ServerGone):
                _shared[key] = None
        server = _shared[key]
    return None if server is None or server.dead else server


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
