"""``bwrap`` backend (Debian package ``bubblewrap``): a namespace sandbox with a read-only system.

The command sees: ``/usr`` and ``/etc`` read-only (``/bin``, ``/lib``... as on the
host), a private ``/proc``, ``/dev`` and ``/tmp``, its workspace at
``/workspace`` (the only writable place besides ``/tmp`` and the install
prefix ``/env``), resources read-only at ``/resources`` and
``/workspace/resources``. All namespaces are unshared (``--unshare-all``); the
network is shared only when allowed. ``--die-with-parent`` and the pid
namespace mean killing bwrap kills everything inside. When the orchestrator is
root, bwrap itself runs under a fresh unprivileged uid, as in the subprocess
backend, so RLIMIT_NPROC holds against fork bombs and the sandbox holds no
capability of the host; directories that uid cannot enter on the way to the
workspace (the 0700 run directory, ``/root``) are covered and the needed paths
bound back first (:class:`~.isolation.MountPlan`). A root orchestrator that
cannot drop the uid refuses to start (bwrap run as root keeps its capabilities)
unless ``exec.allow_unsafe_sandbox``.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import subprocess
from pathlib import Path

from .base import SANDBOX_RESOURCES, SANDBOX_WORKSPACE, ExecResult, Limits, SandboxError
from .forkserver import ChildSpec
from .isolation import plan_mounts, refuse
from .lineage import SANDBOX_ENV
from .netns import NodeNetworks
from .process import rlimit_values
from .resource_binds import bind_sources
from .run_setup import RunSetup, SandboxBackend
from .sandbox_env import ensure_dir
from .subprocess_backend import WorkspaceOwners, capabilities, needed_paths

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@functools.cache
def bwrap_usable(binary: str = "bwrap") -> tuple[bool, str]:
    """(usable, detail), checked by running ``true`` inside a minimal bwrap sandbox once."""
    path = shutil.which(binary)
    if not path:
        return False, "bwrap not found (apt-get install bubblewrap)"
    argv = [
        path,
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
        *_system_links(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {proc.stderr.strip()[:200]}"
    return True, path


def _system_links() -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


class BwrapExecutor(SandboxBackend):
    """Runs each command in a fresh bubblewrap sandbox; see the module docstring."""

    name = "bwrap"

    def __init__(
        self,
        python: str = "/usr/bin/python3",
        resources_dir: Path | None = None,
        *,
        allow_unsafe: bool = False,
    ):
        ok, detail = bwrap_usable()
        if not ok:
            raise SandboxError(detail)
        self.binary = detail
        self.python = python
        # created now if missing, so every later bind / symlink has a real target
        self.resources_dir = ensure_dir(resources_dir)
        self.caps = capabilities()
        self.drop = self.caps["drop_uid"] and self.caps["mount_namespace"]
        self.unsafe = None
        if self.caps["root"] and not self.drop:
            self.unsafe = "the orchestrator is root and cannot drop commands to another uid here"
            if not allow_unsafe:
                raise refuse(
                    self.name, self.unsafe, "install util-linux (setpriv) and allow mount namespaces"
                )
        self.owners = WorkspaceOwners()  # a node's commands share one uid and the ownership walk
        # ... and, network off, one network namespace (made by the root orchestrator; see .netns)
        self.networks = NodeNetworks.if_allowed() if self.drop else None

    def _argv(
        self, ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None, share_net: bool
    ) -> list[str]:
        args = [
            self.binary,
            "--unshare-all",
            # the command is the pid namespace's init (no reaper of bwrap's own): bwrap exits only
            # after it, when the kernel has emptied the namespace, so nothing outlives a command
            "--as-pid-1",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/usr",
            "/usr",
            *_system_links(),
            "--ro-bind",
            "/etc",
            "/etc",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--bind",
            str(ws),
            SANDBOX_WORKSPACE,
            "--chdir",
            SANDBOX_WORKSPACE,
            "--hostname",
            "sandbox",
        ]
        if share_net:  # the host's network, or the node's empty namespace the command is born in
            args.append("--share-net")
        if self.resources_dir:
            args += ["--ro-bind", str(self.resources_dir), SANDBOX_RESOURCES]
            if not (ws / "resources").is_symlink():
                args += ["--ro-bind", str(self.resources_dir), f"{SANDBOX_WORKSPACE}/resources"]
            for src in bind_sources(self.resources_dir):
                args += ["--ro-bind", str(src), str(src)]
        if install_dir:
            args += ["--bind", str(Path(install_dir).resolve()), SANDBOX_ENV]
        for name, src in self.mounts:
            args += ["--ro-bind", str(Path(src).resolve()), f"{SANDBOX_WORKSPACE}/{name}"]
        for hidden in self.hidden:  # visible only where a bound host tree holds it (/usr, /etc...)
            real = os.path.realpath(hidden)
            if os.path.isdir(real) and any(
                real == b or real.startswith(b.rstrip("/") + "/") for b in self._bound(install_dir)
            ):
                args += ["--tmpfs", real]
        for dev in _gpu_devices(limits.gpus):
            args += ["--dev-bind", dev, dev]
        args.append("--clearenv")
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args

    def _bound(self, install_dir: Path | None) -> list[str]:
        """The host trees this sandbox binds (a hidden directory inside one gets a tmpfs over it)."""
        trees = ["/usr", "/etc", *(os.path.realpath(d) for d in _SYSTEM_DIRS if os.path.isdir(d))]
        if self.resources_dir:
            trees += [os.path.realpath(self.resources_dir)]
            trees += [os.path.realpath(s) for s in bind_sources(self.resources_dir)]
        return trees

    def _launch(self, setup: RunSetup) -> ExecResult:
        if self.drop:
            with self.owners.claim(setup.workspace, setup.install_dir) as uid:
                return self._run(setup, uid)
        return self._run(setup, None)

    def _run(self, setup: RunSetup, uid: int | None) -> ExecResult:
        limits, argv, ws, install_dir = setup.limits, setup.argv, setup.workspace, setup.install_dir
        full_env, dropped = setup.env, setup.dropped
        plan = None
        if uid is not None:
            # the fresh uid must reach what bwrap binds: hidden ancestors are covered, paths bound
            # back (no mount namespace at all when nothing is hidden on the way)
            needed = needed_paths(ws, install_dir, self.resources_dir, None)
            needed += [(src, "reach") for _, src in self.mount_targets(ws)]
            plan = plan_mounts(needed, workdir=ws, drop_uid=True, private_tmp=False)
        host_env = {"PATH": "/usr/bin:/bin"}  # bwrap's own environment; the command's is --setenv
        networks = self.networks if uid is not None and not limits.network else None
        share_net = limits.network or networks is not None
        with contextlib.ExitStack() as stack:
            # bwrap itself runs under the fresh uid (no `setpriv` program in front of it), born in
            # the node's network namespace when it is shared
            netns = (
                stack.enter_context(networks.held(uid)) if networks is not None and uid is not None else -1
            )
            spec = ChildSpec(
                plan if plan is not None and not plan.empty else None,
                uid,
                capabilities=False,
                rlimits=rlimit_values(limits, address_space=True),
                netns_fd=netns,
            )
            result = self._supervise(
                [*self._argv(ws, limits, full_env, install_dir, share_net), "--", *argv],
                cwd=ws,
                env=host_env,
                limits=limits,
                display_command=argv,
                spec=spec,
                sweep_uid=uid,
                contained=True,  # --unshare-all: bwrap's init holds the pid namespace
            )
        result.extra.update(
            uid=uid, dropped_env=dropped, network=limits.network, node_netns=networks is not None
        )
        return result

    def close(self) -> None:
        """Let the nodes' network namespaces go."""
        if self.networks is not None:
            self.networks.close()


def _gpu_devices(gpus: tuple[int, ...]) -> list[str]:
    if not gpus:
        return []
    devs = [f"/dev/nvidia{i}" for i in gpus if os.path.exists(f"/dev/nvidia{i}")]
    devs += [d for d in glob.glob("/dev/nvidia-*") + ["/dev/nvidiactl"] if os.path.exists(d)]
    return devs
