"""``docker`` backend: the ``docker`` SDK against a daemon the user runs.

Each command runs in a container of ``exec.docker_image`` (never pulled: a
missing image is a :class:`SandboxError` saying how to build it from
``containers/``), as a non-root user, with a read-only root filesystem, the
workspace bound read-write at ``/workspace``, resources read-only at
``/resources`` (and ``/workspace/resources``), the install prefix at ``/env``,
a tmpfs ``/tmp``, network ``none`` unless allowed, memory / CPU / pids limits,
all capabilities dropped, ``no-new-privileges``, and GPUs through device
requests when configured. Containers are removed afterwards.

With ``reuse=True`` one running container per (workspace, install prefix,
limits) serves many short commands through ``exec``; after every command (and
on timeout) ``kill -9 -1`` inside it kills everything but its init, so nothing
outlives the command.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    SANDBOX_RESOURCES,
    SANDBOX_WORKSPACE,
    ExecResult,
    Limits,
    OutputHeadTail,
    SandboxError,
    limit_reason,
)
from .lineage import SANDBOX_ENV
from .resource_binds import bind_sources
from .run_setup import RunSetup, SandboxBackend
from .sandbox_env import ensure_dir
from .subprocess_backend import _chown_tree, _next_uid

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from docker import DockerClient
    from docker.models.containers import Container

BUILD_HINT = (
    "build it locally with `containers/build_rootfs_image.sh {image}` (offline, from this host) or "
    "`docker build -t {image} containers/`; images are never pulled implicitly"
)
LABEL = "org.ai-scientist.sandbox"
POLL_S = 0.1


def docker_client(timeout: float = 10.0) -> DockerClient:
    """A client for the daemon at DOCKER_HOST (or the default socket); raises SandboxError if unreachable."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)  # type: ignore[arg-type]  # a float is fine (requests'); the stub says int
        client.ping()
        return client
    except Exception as exc:  # the SDK raises several unrelated types for "no daemon"
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxError(f"no Docker daemon reachable at {where}: {_daemon_reason(exc)}") from None


def _daemon_reason(exc: BaseException) -> str:
    """Why the daemon did not answer, in words (the SDK's message nests a raw exception tuple)."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:  # the OS error hides in causes, contexts and args
        e = todo.pop(0)
        seen.append(e)
        todo += [x for x in (e.__cause__, e.__context__, *e.args) if isinstance(x, BaseException)]
        todo += [y for x in e.args if isinstance(x, tuple) for y in x if isinstance(y, BaseException)]
    for e in seen:
        if isinstance(e, FileNotFoundError):
            return "the socket does not exist (is dockerd running?)"
        if isinstance(e, PermissionError):
            return "permission denied on the socket (add the user to the docker group)"
        if isinstance(e, ConnectionRefusedError):
            return "the connection was refused (is dockerd running?)"
    first = str(exc).split(": (", 1)[0].strip()
    return first or type(exc).__name__


CGROUP_ROOT = Path("/sys/fs/cgroup")


class _Cgroup:
    """Reads a container's memory peak, pid count and CPU time from cgroup v1 or v2 files (None
    if hidden). ``parent``: the container's cgroup parent (:func:`_cpu_parent`), else ``docker``."""

    def __init__(self, cid: str | None, parent: str = "docker"):
        v1 = CGROUP_ROOT
        self.candidates: dict[str, list[Path]] = {"mem": [], "pids": [], "oom": [], "cpu": []}
        if not cid:  # the daemon gave no id: nothing to read, every reading is "hidden"
            return
        self.candidates = {
            "mem": [
                v1 / "memory" / parent / cid / "memory.max_usage_in_bytes",
                v1 / f"system.slice/docker-{cid}.scope/memory.peak",
            ],
            "pids": [
                v1 / "pids" / parent / cid / "pids.current",
                v1 / f"system.slice/docker-{cid}.scope/pids.current",
            ],
            "oom": [
                v1 / "memory" / parent / cid / "memory.oom_control",
                v1 / f"system.slice/docker-{cid}.scope/memory.events",
            ],
            "cpu": [v1 / "cpuacct" / parent / cid / "cpuacct.usage"],  # nanoseconds
        }

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this container so far (0 if unknown)."""
        for path in self.candidates["oom"]:
            try:
                for line in path.read_text().splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
            except (OSError, ValueError):
                continue
        return 0

    def read(self, what: str) -> int | None:
        for path in self.candidates[what]:
            try:
                return int(path.read_text().strip())
            except (OSError, ValueError):
                continue
        return None


def _cpu_parent_usable(client: Any) -> bool:
    """Whether a per-command cgroup parent can hold a fresh container's CPU time past its removal:
    the daemon places cgroups itself (driver ``cgroupfs``, v1) and its cgroup tree is this host's."""
    try:
        info = client.info()
    except Exception:
        return False
    return info.get("CgroupDriver") == "cgroupfs" and (CGROUP_ROOT / "cpuacct" / "docker").is_dir()


def _cpu_of_parent(parent: str) -> float | None:
    """CPU seconds charged to cgroup ``parent`` (its removed container's included: cpuacct
    charges every ancestor as the time is used), read once the container is gone."""
    try:
        return int((CGROUP_ROOT / "cpuacct" / parent.strip("/") / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        return None


def _remove_parent(parent: str) -> None:
    """The per-command cgroup parent, in every hierarchy the daemon made it in (empty by now)."""
    for d in CGROUP_ROOT.glob(f"*/{parent.strip('/')}"):
        try:
            d.rmdir()
        except OSError:
            pass


class DockerExecutor(SandboxBackend):
    """See the module docstring. ``client`` may be injected (tests); default is ``docker.from_env()``."""

    name = "docker"

    def __init__(
        self,
        image: str,
        *,
        python: str = "/usr/bin/python3",
        resources_dir: Path | None = None,
        reuse: bool = False,
        client: Any = None,
    ):
        self.client = client or docker_client()
        self.image = image
        self.python = python
        # created now if missing, so every later bind / symlink has a real target
        self.resources_dir = ensure_dir(resources_dir)
        self.reuse = reuse
        self._reused: dict[tuple, Any] = {}
        self._owner = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._cpu_parent: bool | None = None  # a per-command cgroup parent works (asked once)
        import docker.errors

        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"Docker image {image!r} not found; " + BUILD_HINT.format(image=image)
            ) from None

    # ------------------------------------------------------------ config --
    def _network_mode(self, allowed: bool) -> str:
        if not allowed:
            return "none"
        names = {n.name for n in self.client.networks.list()}
        return "bridge" if "bridge" in names else "host"

    def _host_config(self, ws: Path, limits: Limits, install_dir: Path | None) -> dict[str, Any]:
        import docker.types

        volumes = {str(ws): {"bind": SANDBOX_WORKSPACE, "mode": "rw"}}
        if self.resources_dir:
            volumes[str(self.resources_dir)] = {"bind": SANDBOX_RESOURCES, "mode": "ro"}
        if install_dir:
            volumes[str(Path(install_dir).resolve())] = {"bind": SANDBOX_ENV, "mode": "rw"}
        kw: dict[str, Any] = dict(
            volumes=volumes,
            working_dir=SANDBOX_WORKSPACE,
            network_mode=self._network_mode(limits.network),
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            read_only=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,size=512m,mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            hostname="sandbox",
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
        )
        for src in bind_sources(self.resources_dir):
            volumes[str(src)] = {"bind": str(src), "mode": "ro"}
        for name, host in self.mounts:  # a grader run's submission/ and grader/
            volumes[str(Path(host).resolve())] = {"bind": f"{SANDBOX_WORKSPACE}/{name}", "mode": "ro"}
        if self.resources_dir and not (ws / "resources").is_symlink():
            kw["volumes"][str(self.resources_dir) + "/."] = {
                "bind": f"{SANDBOX_WORKSPACE}/resources",
                "mode": "ro",
            }
        if limits.gpus:
            kw["device_requests"] = [
                docker.types.DeviceRequest(device_ids=[str(g) for g in limits.gpus], capabilities=[["gpu"]])
            ]
        return kw

    def _user(self, ws: Path, install_dir: Path | None) -> str:
        if os.geteuid() != 0:
            return f"{os.getuid()}:{os.getgid()}"
        uid = _next_uid()  # fresh unprivileged uid owning the workspace for this command
        _chown_tree(ws, uid)
        if install_dir:
            _chown_tree(Path(install_dir), uid)
        return f"{uid}:{uid}"

    # --------------------------------------------------------------- run --
    def _launch(self, setup: RunSetup) -> ExecResult:
        limits, argv, ws, install_dir = setup.limits, setup.argv, setup.workspace, setup.install_dir
        full_env, dropped = setup.env, setup.dropped
        full_env["PATH"] = full_env["PATH"]  # image PATH is replaced by the allow-listed one
        if self.reuse:
            result = self._run_reused(argv, ws, limits, full_env, install_dir)
        else:
            result = self._run_fresh(argv, ws, limits, full_env, install_dir)
        result.extra.update(dropped_env=dropped, image=self.image, reused=self.reuse)
        return result

    def _run_fresh(
        self, argv: list[str], ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None
    ) -> ExecResult:
        import docker.errors

        start = time.monotonic()
        if self._cpu_parent is None:
            self._cpu_parent = _cpu_parent_usable(self.client)
        # a cgroup parent of its own: the container's cgroup goes with it, the parent keeps its CPU time
        parent = f"ai-scientist-{uuid.uuid4().hex[:16]}" if self._cpu_parent else None
        host_config = self._host_config(ws, limits, install_dir)
        if parent:
            host_config["cgroup_parent"] = f"/{parent}"
        try:
            container = self.client.containers.create(
                self.image,
                command=argv,
                environment=env,
                user=self._user(ws, install_dir),
                labels={LABEL: env["AI_SCIENTIST_SANDBOX_ID"]},
                detach=True,
                **host_config,
            )
        except docker.errors.APIError as exc:
            if parent:
                _remove_parent(parent)
            raise SandboxError(f"docker could not create the container: {exc}") from None
        cpu = None
        try:
            sock = container.attach(stdout=True, stderr=True, stream=True, demux=True, logs=True)
            container.start()
            cg = _Cgroup(container.id, parent or "docker")
            out, err, state = self._pump(sock, limits, kill=lambda: _quiet(container.kill))
            code, killed_by, reason, peak = self._watch(container, cg, limits, state, start)
            state["thread"].join(timeout=10)
            container.reload()
            if killed_by is None and container.attrs["State"].get("OOMKilled"):
                killed_by, reason = "memory", f"OOM-killed at the {limits.memory_mb} MB memory limit"
        finally:
            _quiet(lambda: container.remove(force=True))
            if parent:
                cpu = _cpu_of_parent(parent)
                _remove_parent(parent)
        result = _make_result(argv, code, out, err, peak, killed_by, reason, start, limits)
        if cpu is not None:
            result.cpu_s, result.cpu_how = round(cpu, 4), "cgroup cpuacct"
        else:
            result.cpu_how = (
                "the container's cgroup could not be read"
                if parent
                else "the daemon's cgroups are not this host's cgroupfs (v1) tree"
            )
        return result

    def _pump(
        self, stream: Iterable[tuple[bytes | None, bytes | None]], limits: Limits, kill: Callable[[], object]
    ) -> tuple[OutputHeadTail, OutputHeadTail, dict]:
        out, err = OutputHeadTail(limits.output_bytes // 2), OutputHeadTail(limits.output_bytes // 2)
        state: dict[str, Any] = {"killed_by": None, "reason": "", "done": threading.Event()}

        def pump() -> None:
            try:
                for o, e in stream:
                    if o:
                        out.feed(o)
                    if e:
                        err.feed(e)
                    if out.total + err.total > limits.output_hard_cap and state["killed_by"] is None:
                        state["killed_by"] = "output"
                        state["reason"] = f"output exceeded {limits.output_hard_cap} bytes (flood)"
                        # Kill from another thread and keep draining: the daemon holds the
                        # container's lock while its output copier is blocked on an unread stream.
                        threading.Thread(target=kill, daemon=True).start()
            except Exception as exc:  # the stream breaks when the container is killed
                state.setdefault("stream_error", str(exc))
            finally:
                state["done"].set()

        state["thread"] = threading.Thread(target=pump, daemon=True)
        state["thread"].start()
        return out, err, state

    def _watch(
        self, container: Container, cg: _Cgroup, limits: Limits, state: dict, start: float
    ) -> tuple[int | None, str | None, str, float | None]:
        """Wait for exit, enforcing timeout and pids; returns (exit code, killed_by, reason, peak MB)."""
        peak = 0
        while True:
            container.reload()
            if container.status in ("exited", "dead"):
                break
            peak = max(peak, cg.read("mem") or 0)
            if state["killed_by"] is None and time.monotonic() - start > limits.timeout_s:
                state["killed_by"], state["reason"] = (
                    "timeout",
                    f"wall-clock timeout of {limits.timeout_s:g}s",
                )
                _quiet(container.kill)
            pids = cg.read("pids")
            if state["killed_by"] is None and pids is not None and pids >= limits.pids:
                state["killed_by"], state["reason"] = (
                    "pids",
                    f"{pids} processes reached the pids limit {limits.pids}",
                )
                _quiet(container.kill)
            try:  # returns as soon as the container exits
                container.wait(timeout=POLL_S)
            except Exception:  # requests' ReadTimeout / ConnectionError: still running
                pass
        code = container.attrs["State"].get("ExitCode")
        return code, state["killed_by"], state["reason"], (peak / 2**20 if peak else None)

    # ------------------------------------------------------------ reuse --
    def _container_for(
        self, ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None
    ) -> Container:
        key = (
            str(ws),
            str(install_dir),
            limits.network,
            limits.memory_mb,
            limits.cpus,
            limits.pids,
            limits.gpus,
        )
        with self._lock:
            c = self._reused.get(key)
            if c is not None:
                return c
            for other in list(self._reused.values()):  # one reused container at a time
                _quiet(lambda o=other: o.remove(force=True))
            self._reused.clear()
            c = self.client.containers.run(
                self.image,
                command=["sleep", "infinity"],
                environment=env,
                detach=True,
                user=self._user(ws, install_dir),
                labels={LABEL: f"reused-{self._owner}"},
                **self._host_config(ws, limits, install_dir),
            )
            self._reused[key] = c
            return c

    def _run_reused(
        self, argv: list[str], ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None
    ) -> ExecResult:
        start = time.monotonic()
        container = self._container_for(ws, limits, env, install_dir)
        api = self.client.api
        exec_id = api.exec_create(container.id, argv, environment=env, workdir=SANDBOX_WORKSPACE)["Id"]
        stream = api.exec_start(exec_id, stream=True, demux=True)

        def kill_all() -> None:
            # detached: never wait on a stream the daemon may be blocked on
            def go() -> None:
                kid = api.exec_create(container.id, ["/bin/sh", "-c", "kill -9 -1"])["Id"]
                api.exec_start(kid, detach=True)

            _quiet(go)

        cg = _Cgroup(container.id)
        cpu_before = cg.read("cpu")  # the container's CPU time: this command's is the difference
        out, err, state = self._pump(stream, limits, kill=kill_all)
        ooms_before = cg.oom_kills()
        peak, first_kill = 0, None
        while not state["done"].wait(POLL_S):
            peak = max(peak, cg.read("mem") or 0)
            pids = cg.read("pids")
            if state["killed_by"] is None and time.monotonic() - start > limits.timeout_s:
                state["killed_by"], state["reason"] = (
                    "timeout",
                    f"wall-clock timeout of {limits.timeout_s:g}s",
                )
            elif state["killed_by"] is None and pids is not None and pids >= limits.pids:
                state["killed_by"], state["reason"] = (
                    "pids",
                    f"{pids} processes reached the pids limit {limits.pids}",
                )
            if state["killed_by"] is not None:
                if first_kill is None:
                    first_kill = time.monotonic()
                    kill_all()
                elif time.monotonic() - first_kill > 2:
                    # kill -9 -1 could not run (e.g. no pid left for it): take the container down
                    _quiet(container.kill)
        kill_all()  # background children of this command do not outlive it
        code = api.exec_inspect(exec_id).get("ExitCode")
        cpu_after = cg.read("cpu")
        oom = cg.oom_kills() > ooms_before
        alive = True
        if code is None or code >= 128:  # only a kill can have taken the container down
            container.reload()
            alive = container.status == "running"
        if not alive:  # OOM or kill took init down: start afresh next time
            with self._lock:
                self._reused.clear()
            _quiet(lambda: container.remove(force=True))
        killed_by, reason = state["killed_by"], state["reason"]
        if killed_by is None and (oom or (code == 137 and peak >= limits.memory_mb * 2**20 * 0.9)):
            killed_by, reason = "memory", f"OOM-killed at the {limits.memory_mb} MB memory limit"
        result = _make_result(
            argv, code, out, err, peak / 2**20 if peak else None, killed_by, reason, start, limits
        )
        if cpu_before is not None and cpu_after is not None:
            # the kill -9 -1 that ends each command is charged too (a few ms)
            result.cpu_s, result.cpu_how = round((cpu_after - cpu_before) / 1e9, 4), "cgroup cpuacct"
        else:
            result.cpu_how = "the reused container's cgroup could not be read"
        return result

    def close(self) -> None:
        """Remove the reused container, if any."""
        with self._lock:
            self._reused.clear()
            try:
                left = self.client.containers.list(
                    all=True, filters={"label": f"{LABEL}=reused-{self._owner}"}
                )
            except Exception:
                left = []
            for c in left:
                _quiet(lambda c=c: c.remove(force=True))


def _quiet(fn: Callable[..., object]) -> None:
    # Kill/remove of a container that is already gone is not an error worth surfacing.
    try:
        fn()
    except Exception:
        pass


def _make_result(argv, code, out, err, peak, killed_by, reason, start, limits) -> ExecResult:

    stderr = err.text()
    if killed_by is None:
        killed_by, reason = limit_reason(stderr, code, limits) or (None, reason)
    sig = code - 128 if code is not None and code > 128 and killed_by else None
    return ExecResult(
        list(argv),
        code,
        sig,
        round(time.monotonic() - start, 4),
        out.text(),
        stderr,
        out.total,
        err.total,
        peak,
        killed_by,
        reason,
        "docker",
    )
