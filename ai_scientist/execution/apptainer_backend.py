"""``apptainer`` / ``singularity`` backend through its CLI (HPC clusters).

Each command is ``<binary> exec --containall --cleanenv --no-home
--bind WS:/workspace --pwd /workspace [--bind RES:/resources:ro]
[--bind ENV:/env] [--net --network none] [--nv] [--fakeroot --writable-tmpfs]
IMAGE CMD...``, supervised like a local process (timeout kills the whole
group, output capped, memory polled). The environment is passed with
``--env`` from the same allow-list as every backend. ``phase1=True`` adds
``--fakeroot --writable-tmpfs`` so installers that insist on root work.

A root orchestrator is refused (exit 2) unless ``exec.allow_unsafe_sandbox``: apptainer
started by root runs the command as root with root's capabilities, which a bind-mounted
workspace does not contain. Run it as the ordinary user, as clusters do.

Apptainer is not installable on Debian 12 here: the tests drive this backend
with a fake binary that records its argv (see tests/test_exec_apptainer.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .base import SANDBOX_RESOURCES, SANDBOX_WORKSPACE, ExecResult, Limits, SandboxError
from .forkserver import ChildSpec
from .isolation import refuse
from .lineage import SANDBOX_ENV
from .process import rlimit_values, supervise
from .resource_binds import bind_sources
from .run_setup import RunSetup, SandboxBackend
from .sandbox_env import ensure_dir


def find_apptainer(binary: str = "apptainer") -> str | None:
    """The configured binary, else ``apptainer`` or ``singularity`` from PATH."""
    for name in (binary, "apptainer", "singularity"):
        path = shutil.which(name)
        if path:
            return path
    return None


class ApptainerExecutor(SandboxBackend):
    name = "apptainer"

    def __init__(
        self,
        image: str | None,
        *,
        binary: str = "apptainer",
        python: str = "/usr/bin/python3",
        resources_dir: Path | None = None,
        phase1: bool = False,
        allow_unsafe: bool = False,
    ):
        path = find_apptainer(binary)
        if not path:
            raise SandboxError(
                f"{binary!r} not found (nor apptainer / singularity) on PATH; "
                "set exec.apptainer_binary to its full path"
            )
        if not image:
            raise SandboxError(
                "exec.apptainer_image is not set: give the path of a .sif built from "
                "containers/ai-scientist.def (`apptainer build sandbox.sif containers/ai-scientist.def`)"
            )
        self.unsafe = None
        if os.geteuid() == 0:
            self.unsafe = "the orchestrator is root, and apptainer would run the command as root"
            if not allow_unsafe:
                raise refuse(
                    self.name, self.unsafe, "run the orchestrator as an ordinary user, or use bwrap / docker"
                )
        self.binary = path
        self.image = image
        self.python = python
        # created now if missing, so every later bind / symlink has a real target
        self.resources_dir = ensure_dir(resources_dir)
        self.phase1 = phase1

    def build_argv(
        self, argv: list[str], ws: Path, limits: Limits, env: dict[str, str], install_dir: Path | None = None
    ) -> list[str]:
        """The full command line handed to apptainer (pure; what the tests check)."""
        args = [
            self.binary,
            "exec",
            "--containall",
            "--cleanenv",
            "--no-home",
            "--bind",
            f"{ws}:{SANDBOX_WORKSPACE}",
            "--pwd",
            SANDBOX_WORKSPACE,
        ]
        if self.resources_dir:
            args += ["--bind", f"{self.resources_dir}:{SANDBOX_RESOURCES}:ro"]
            args += [a for src in bind_sources(self.resources_dir) for a in ("--bind", f"{src}:{src}:ro")]
        if install_dir:
            args += ["--bind", f"{Path(install_dir).resolve()}:{SANDBOX_ENV}"]
        for name, host in self.mounts:  # a grader run's submission/ and grader/
            args += ["--bind", f"{Path(host).resolve()}:{SANDBOX_WORKSPACE}/{name}:ro"]
        if not limits.network:
            args += ["--net", "--network", "none"]
        if limits.gpus:
            args.append("--nv")
        if self.phase1:
            args += ["--fakeroot", "--writable-tmpfs"]
        for key in sorted(env):
            args += ["--env", f"{key}={env[key]}"]
        return args + [self.image, *argv]

    def _launch(self, setup: RunSetup) -> ExecResult:
        limits, argv, ws, install_dir = setup.limits, setup.argv, setup.workspace, setup.install_dir
        full_env, dropped = setup.env, setup.dropped
        host_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        if limits.gpus:
            host_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in limits.gpus)
        result = supervise(
            self.build_argv(argv, ws, limits, full_env, install_dir),
            cwd=ws,
            env=host_env,
            limits=limits,
            backend=self.name,
            display_command=argv,
            spec=ChildSpec(rlimits=rlimit_values(limits, address_space=False)),
            fork_server=self.fork_server,
        )
        if self.unsafe:
            result.extra["unsafe_sandbox"] = self.unsafe
        result.extra.update(dropped_env=dropped, image=self.image)
        return result

    def close(self) -> None:
        """Nothing persistent to release."""
