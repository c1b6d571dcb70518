"""``subprocess`` backend: a local child process with limits, namespaces and no host secrets.

What it enforces (``capabilities()`` checks each on this host; where isolation cannot be had
the executor refuses to start, see :mod:`.isolation`):
- own session / process group; timeout -> SIGTERM then SIGKILL to the whole group
  and every descendant seen, including ones that escaped with ``setsid``;
- a new mount namespace prepared before exec (:class:`~.isolation.MountPlan`): private
  tmpfs over ``/tmp`` ``/var/tmp`` ``/dev/shm`` ``/run/lock``; directories the command's uid
  cannot enter (the 0700 run directory, ``/root``...) covered by an empty tmpfs, with the
  workspace, install prefix, resources (read-only) and interpreter (read-only) bound back;
- its own pid namespace with a fresh ``/proc`` (no host process, environment or command
  line is visible), own IPC, and its own network namespace when the network is off (only a
  private loopback exists; as root, a node's commands share one, made once: :mod:`.netns`). As root the command itself is the namespace's init and the
  forked child sets everything up before ``exec`` (:func:`~.isolation.pid_namespace_for_next_child`,
  :func:`~.isolation.drop_to_uid`); not root, ``unshare --pid --fork --kill-child --mount-proc
  --ipc [--net]`` and ``setpriv`` do it;
- when the orchestrator is root, the command runs under a fresh unprivileged uid (one per
  node workspace, :class:`WorkspaceOwners`; no capabilities, ``no_new_privs``): RLIMIT_NPROC
  then holds, the host filesystem is read-only to it except the workspace, and a kill sweeps
  every process of that uid. Not root: the command would run as the orchestrator's user and
  could read its files, so the backend refuses unless ``exec.allow_unsafe_sandbox`` (it
  then still gets a user namespace, the fresh ``/proc``, private tmp and no capabilities);
- rlimits: address space, CPU seconds, file size, processes;
- allow-listed environment, HOME and TMPDIR inside the workspace;
- output capped while streaming; a flood past the hard cap is killed.
Host files that every user may read stay readable: use ``bwrap`` or ``docker`` to hide them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .base import ExecResult, Limits, SandboxError
from .forkserver import ChildSpec
from .isolation import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    MountPlan,
    drop_to_uid,
    harden_orchestrator,
    interpreter_root,
    orchestrator_pidfd,
    pid_namespace_for_next_child,
    plan_mounts,
    refuse,
)
from .netns import NodeNetworks
from .process import rlimit_values
from .resource_binds import bind_sources
from .run_setup import RunSetup, SandboxBackend
from .sandbox_env import ensure_dir

UID_BASE = 1_500_000_000
_uid_counter = itertools.count()
_NS_FLAGS = ["--pid", "--fork", "--kill-child", "--mount-proc", "--ipc"]


# checks of this host a caller already ran (assume_host_checks): a Slurm job's runner, one fresh
# process per command, takes them from the previous job on its node instead of running them again
_ASSUMED: dict[str, bool] = {}


def host_checks() -> dict[str, bool]:
    """Every isolation check of this host: :func:`capabilities` and the direct start."""
    return {**capabilities(), "direct": _direct_works()}


def assume_host_checks(facts: dict[str, bool]) -> None:
    """Use ``facts`` (:func:`host_checks` of this very host, since its last boot) instead of
    running the checks in this process."""
    _ASSUMED.clear()
    _ASSUMED.update(facts)


@functools.cache
def _works(*argv: str) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def _mount_namespace_works(root: bool) -> bool:
    """A child can enter a fresh mount namespace with a private tmpfs (as root, or in a user ns)."""
    ids = None if root else (os.getuid(), os.getgid())
    harden_orchestrator()  # checked as commands will run: from a non-dumpable orchestrator
    with tempfile.TemporaryDirectory(prefix="ai-sci-nscheck-") as tmp:
        plan = plan_mounts([(Path(tmp), "rw")], workdir=Path("/"), drop_uid=root, user_ns=ids)
        try:
            return subprocess.run(["true"], preexec_fn=plan.apply, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


@functools.cache
def _direct_works() -> bool:
    """A root orchestrator can start a command as the init of its own pid namespace, with its
    mount, IPC and network namespaces and the uid drop done in the forked child (no extra program)."""
    if os.geteuid() != 0:
        return False
    if "direct" in _ASSUMED:
        return _ASSUMED["direct"]
    harden_orchestrator()
    with tempfile.TemporaryDirectory(prefix="ai-sci-nscheck-") as tmp:
        os.chmod(tmp, 0o755)
        plan = plan_mounts([(Path(tmp), "rw")], workdir=Path(tmp), drop_uid=True)
        plan = dataclasses.replace(plan, namespaces=CLONE_NEWIPC | CLONE_NEWNET, proc=True)
        parent = orchestrator_pidfd()
        uid = _next_uid()

        def preexec() -> None:
            plan.apply()
            drop_to_uid(uid, parent)

        # pid 1 of a fresh namespace, under the fresh uid, seeing only its own /proc
        probe = f"test $$ = 1 && test $(id -u) = {uid} && test $(ls /proc | grep -c '^[0-9]') -lt 10"
        try:
            with pid_namespace_for_next_child():
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", probe], preexec_fn=preexec, stdout=subprocess.DEVNULL
                )
            return proc.wait(timeout=10) == 0
        except (OSError, subprocess.SubprocessError):
            return False


def capabilities() -> dict[str, bool]:
    """What this host lets the subprocess backend do (each checked by running it once)."""
    if _ASSUMED:
        return {k: v for k, v in _ASSUMED.items() if k != "direct"}
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    setpriv = shutil.which("setpriv")
    userns = bool(unshare) and _works("unshare", "-r", *_NS_FLAGS, "--net", "true")
    rootns = root and bool(unshare) and _works("unshare", *_NS_FLAGS, "--net", "true")
    drop = (
        root
        and bool(setpriv)
        and _works("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true")
    )
    return {
        "pid_namespace": rootns or userns,
        "net_namespace": rootns or userns,
        "mount_namespace": (rootns or userns) and _mount_namespace_works(root),
        "drop_uid": drop,
        "root": root,
        "user_namespace": userns,
    }


def isolation_gap(caps: dict[str, bool]) -> tuple[str, str] | None:
    """(what is missing, how to fix it) when the backend cannot isolate commands here, else None."""
    if not caps["root"]:
        return (
            "the orchestrator is not root, so commands would run under its own uid and could read "
            "every file it can (other runs, ~/.ssh, shell history)",
            "use exec.backend: bwrap (apt-get install bubblewrap) or docker, or run as root",
        )
    missing = [k for k in ("pid_namespace", "mount_namespace", "drop_uid") if not caps[k]]
    if missing:
        return (
            f"this host refuses {', '.join(missing)} (util-linux unshare / setpriv, namespaces)",
            "run where namespaces are allowed (a container needs --privileged or CAP_SYS_ADMIN), "
            "or use exec.backend: docker",
        )
    return None


def _next_uid() -> int:
    return UID_BASE + (os.getpid() % 100_000) * 1000 + next(_uid_counter) % 1000


def _chown_tree(
    path: Path, uid: int, since_ns: int | None = None, subdirs: dict[str, list[str]] | None = None
) -> None:
    """Give ``path`` and everything below it to ``uid`` (lchown: never follows a symlink out).

    ``since_ns``: the tree was given to ``uid`` completely at that time (minus a margin), so only
    the entries of directories changed since then (new names: the orchestrator's files, a new
    ``resources`` link) are looked at. ``subdirs`` (directory -> its subdirectories, kept by the
    caller between calls) spares listing a directory that did not change. Runs while no process
    of ``uid`` exists (between a node's commands)."""
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != (uid, uid):
        os.lchown(path, uid, uid)
    known = {} if subdirs is None else subdirs
    stack = [os.fspath(path)]
    while stack:
        d = stack.pop()
        try:
            # a new name changes the directory's mtime (a chown changes only its ctime)
            changed = since_ns is None or os.lstat(d).st_mtime_ns >= since_ns
            if not changed and d in known:
                stack.extend(known[d])
                continue
            found = []
            with os.scandir(d) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        found.append(e.path)
                    if changed:
                        est = e.stat(follow_symlinks=False)
                        if (est.st_uid, est.st_gid) != (uid, uid):
                            os.lchown(e.path, uid, uid)
            known[d] = found
            stack.extend(found)
        except OSError:
            known.pop(d, None)
            continue


class WorkspaceOwners:
    """The set-up a node's commands share: one fresh uid per workspace, reused by its later
    commands, and the ownership of the workspace and install prefix brought up to date
    incrementally (a full walk the first time, then only directories that changed).

    A workspace already in use by a running command gets another fresh uid (and a full walk),
    so two commands never share a uid. Thread-safe."""

    MARGIN_NS = 1_000_000_000  # directory times come from a coarse clock: look 1 s further back

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uids: dict[Path, int] = {}
        self._synced: dict[tuple[Path, int], int] = {}
        self._subdirs: dict[tuple[Path, int], dict[str, list[str]]] = {}
        self._busy: set[Path] = set()

    @contextlib.contextmanager
    def claim(self, ws: Path, install_dir: Path | None) -> Iterator[int]:
        """A uid owning ``ws`` (and ``install_dir``) for one command."""
        with self._lock:
            shared = ws not in self._busy
            uid = self._uids.setdefault(ws, _next_uid()) if shared else _next_uid()
            if shared:
                self._busy.add(ws)
        try:
            for path in (ws, Path(install_dir) if install_dir else None):
                if path is not None:
                    start = time.time_ns() - self.MARGIN_NS
                    known = self._subdirs.setdefault((path, uid), {})
                    _chown_tree(path, uid, self._synced.get((path, uid)), known)
                    self._synced[(path, uid)] = start
            yield uid
        finally:
            if shared:
                with self._lock:
                    self._busy.discard(ws)


def needed_paths(
    ws: Path, install_dir: Path | None, resources_dir: Path | None, python: str | None
) -> list[tuple[Path, str]]:
    """Host paths a command must reach, with their access (``rw`` / ``ro`` / ``reach``, see
    :func:`~.isolation.plan_mounts`): everything else of the run stays hidden."""
    paths: list[tuple[Path, str]] = [(ws, "rw")]
    if install_dir:
        paths.append((Path(install_dir), "rw"))
    if resources_dir:
        paths.append((Path(resources_dir), "ro"))
        paths += [(Path(src), "ro") for src in bind_sources(resources_dir)]
    root = interpreter_root(python) if python else None
    if python and root is not None:
        paths.append((root, "reach"))
        venv = Path(python).absolute().parent.parent
        if venv != root:
            paths.append((venv, "reach"))  # a venv in front of it
    return paths


def drop_privileges(uid: int | None) -> list[str]:
    """``setpriv`` argv: a fresh uid (root orchestrator) or just no capabilities, never new privileges."""
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    # --pdeathsig after the uid change: changing credentials clears the death signal set before
    # exec, and without it the command outlives an orchestrator killed with kill -9
    return [
        "setpriv",
        *ids,
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--pdeathsig",
        "KILL",
        "--",
    ]


class SubprocessExecutor(SandboxBackend):
    """Local child processes in namespaces; see the module docstring for what it enforces.

    Raises :class:`~.isolation.UnsafeSandbox` when this host (or a non-root orchestrator)
    cannot isolate commands, unless ``allow_unsafe`` (``exec.allow_unsafe_sandbox``).
    """

    name = "subprocess"
    host_paths = True  # same paths as the host: the workspace is bound back at its own path

    def __init__(
        self,
        python: str = "/usr/bin/python3",
        resources_dir: Path | None = None,
        *,
        allow_unsafe: bool = False,
    ):
        self.python = python
        # created now if missing, so every later bind / symlink has a real target
        self.resources_dir = ensure_dir(resources_dir)
        self.caps = capabilities()
        gap = isolation_gap(self.caps)
        if gap is not None and not allow_unsafe:
            raise refuse(self.name, *gap)
        self.unsafe = gap[0] if gap else None
        self.owners = WorkspaceOwners()  # a node's commands share one uid and the ownership walk
        # network off, a root orchestrator: a node's commands share one empty network namespace
        # (see .netns; making one per command is about a fifth of a bare interpreter start)
        self.networks = NodeNetworks.if_allowed() if self.caps["drop_uid"] else None

    def _wrapper(self, limits: Limits, uid: int | None) -> list[str]:
        caps = self.caps
        wrap: list[str] = []
        if caps["pid_namespace"]:
            # not root and no mount plan (which makes the user namespace itself): unshare -r does
            userns = not caps["root"] and not caps["mount_namespace"]
            wrap = [
                "unshare",
                *(["-r"] if userns else []),
                *_NS_FLAGS,
                *([] if limits.network else ["--net"]),
            ]
        if uid is not None or caps["pid_namespace"]:
            wrap += drop_privileges(uid)
        return wrap

    def _plan(
        self, setup: RunSetup, uid: int | None, direct: bool = False, shared_net: bool = False
    ) -> MountPlan | None:
        if not self.caps["mount_namespace"]:
            return None
        needed = needed_paths(setup.workspace, setup.install_dir, self.resources_dir, self.python)
        ids = None if self.caps["root"] else (os.getuid(), os.getgid())
        plan = plan_mounts(
            needed,
            workdir=setup.workspace,
            drop_uid=uid is not None,
            user_ns=ids,
            tmp_size_mb=setup.limits.memory_mb,
            hidden=self.hidden,
            mounts=self.mount_targets(setup.workspace),
        )
        if direct:  # the child is the init of its pid namespace: it makes the others and /proc
            net = 0 if setup.limits.network or shared_net else CLONE_NEWNET
            plan = dataclasses.replace(plan, namespaces=CLONE_NEWIPC | net, proc=True)
        return plan

    def _launch(self, setup: RunSetup) -> ExecResult:
        ws = setup.workspace
        if (self.hidden or self.mounts) and not self.caps["mount_namespace"]:
            raise SandboxError(
                "subprocess: a grader needs a mount namespace (to hide grader.dir and mount the "
                "submission read-only) and this host refuses one; use exec.backend: bwrap or docker"
            )
        if self.resources_dir and not (ws / "resources").exists():
            (ws / "resources").symlink_to(self.resources_dir)
        if self.caps["drop_uid"] and self.caps["mount_namespace"]:
            with self.owners.claim(ws, setup.install_dir) as uid:
                return self._run(setup, uid)
        return self._run(setup, None)

    def _run(self, setup: RunSetup, uid: int | None) -> ExecResult:
        limits, argv, ws = setup.limits, setup.argv, setup.workspace
        # root: the forked child becomes the init of a new pid namespace and sets everything up
        # itself; otherwise `unshare` and `setpriv` do it (two more programs started per command)
        direct = uid is not None and _direct_works()
        networks = self.networks if direct and not limits.network else None
        plan = self._plan(setup, uid, direct, shared_net=networks is not None)
        rlimits = rlimit_values(limits)
        network_isolated = limits.network or self.caps["net_namespace"]
        with contextlib.ExitStack() as stack:
            if direct:
                assert plan is not None and uid is not None
                # born in the node's network namespace (when shared) and a new pid namespace
                netns = stack.enter_context(networks.held(uid)) if networks is not None else -1
                spec = ChildSpec(plan, uid, True, rlimits, new_pid_ns=True, netns_fd=netns)
                wrapper: list[str] = []
            else:
                spec = ChildSpec(plan, None, rlimits=rlimits)
                wrapper = self._wrapper(limits, uid)
            result = self._supervise(
                wrapper + argv,
                cwd=ws,
                env=setup.env,
                limits=limits,
                display_command=argv,
                spec=spec,
                sweep_uid=uid,
                contained=direct or self.caps["pid_namespace"],
            )
        result.extra.update(
            uid=uid,
            dropped_env=setup.dropped,
            pid_namespace=self.caps["pid_namespace"],
            mount_namespace=plan is not None,
            direct_spawn=direct,
            network=limits.network,
            network_isolated=network_isolated,
            node_netns=networks is not None,
        )
        return result

    def close(self) -> None:
        """Let the nodes' network namespaces go."""
        if self.networks is not None:
            self.networks.close()
