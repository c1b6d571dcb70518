"""The preamble every backend's ``run()`` shares: limits, argv, install prefix, workspace, env.

One place decides how a command, its workspace and its environment are made
ready, so the four backends cannot drift apart on it (e.g. one forgetting the
private TMP dir or the secret filter). Backends inherit :class:`SandboxBackend`
and implement only ``_launch(setup)``.
"""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .base import SANDBOX_RESOURCES, SANDBOX_WORKSPACE, ExecResult, Limits, SandboxError, normalize_command
from .forkserver import ChildSpec
from .isolation import harden_orchestrator
from .lineage import SANDBOX_ENV, take_install_dir
from .process import supervise
from .sandbox_env import TMP_DIRNAME, sandbox_environ


@dataclass(frozen=True)
class RunSetup:
    """What a backend needs to launch one command (fields fixed; ``env`` is the backend's to adjust)."""

    limits: Limits
    argv: list[str]  # the command as an argv (a string becomes ``/bin/sh -c``)
    workspace: Path  # resolved host path; its private TMP dir exists
    install_dir: Path | None  # host path of the lineage install prefix (created), or None
    env: dict[str, str]  # the command's full allow-listed environment
    dropped: list[str]  # names removed from the caller's env because they look like secrets


def prepare_run(
    command: list[str] | str,
    workspace: Path,
    limits: Limits | None,
    env: dict[str, str] | None,
    install_dir: Path | None,
    *,
    python: str,
    resources: Path | None,
    host_paths: bool = False,
) -> RunSetup:
    """Normalise the arguments of a backend's ``run()`` and build the sandbox environment.

    ``python`` is the interpreter path inside the sandbox, ``resources`` the
    backend's resolved resources directory (or None).

    Makes the orchestrator non-dumpable (:func:`~.isolation.harden_orchestrator`) first.
    ``limits`` defaults to :class:`Limits`. The install prefix may come from
    ``install_dir`` or the marker variable in ``env`` (see :func:`take_install_dir`).
    Paths in the environment are those seen inside a container (``/workspace``,
    ``/resources``, ``/env``) unless ``host_paths`` is True (the subprocess
    backend, which runs on the host filesystem). Raises ValueError for an
    empty command, before touching the filesystem.
    """
    argv = normalize_command(command)
    harden_orchestrator()  # before any generated code runs: nothing can read this process's memory
    env, install_dir = take_install_dir(env, install_dir)
    ws = Path(workspace).resolve()
    (ws / TMP_DIRNAME).mkdir(parents=True, exist_ok=True)
    if host_paths:
        seen_ws, seen_res = str(ws), (str(resources) if resources else None)
        seen_prefix = str(Path(install_dir).resolve()) if install_dir else None
    else:
        seen_ws, seen_res = SANDBOX_WORKSPACE, (SANDBOX_RESOURCES if resources else None)
        seen_prefix = SANDBOX_ENV if install_dir else None
    full_env, dropped = sandbox_environ(
        workspace=seen_ws,
        extra=env,
        python=python,
        resources=seen_res,
        install_prefix=seen_prefix,
        marker=uuid.uuid4().hex,
    )
    return RunSetup(limits or Limits(), argv, ws, install_dir, full_env, dropped)


class SandboxBackend:
    """Base of the sandbox backends: ``run()`` is :func:`prepare_run`, then the backend's ``_launch``.

    Subclasses set ``python`` and ``resources_dir`` (resolved, or None) and
    implement ``_launch(setup) -> ExecResult``; ``host_paths = True`` gives the
    command host paths in its environment instead of the container mounts.
    """

    name: str
    python: str
    resources_dir: Path | None
    host_paths = False
    fork_server = True  # commands forked by the fork server when it runs (exec.fork_server)
    # directories no command may see, whatever their permissions (a grader's directory and its
    # hidden data: ``grader.dir``), and read-only mounts into the workspace (name -> host path:
    # a grader run's ``submission/`` and ``grader/``); set by ``registry.make_executor``
    hidden: tuple[str, ...] = ()
    mounts: tuple[tuple[str, Path], ...] = ()

    if TYPE_CHECKING:  # each backend defines it (what it holds differs); declared for the type checker

        def close(self) -> None: ...

    def run(
        self,
        command: list[str] | str,
        *,
        workspace: Path,
        limits: Limits | None = None,
        env: dict[str, str] | None = None,
        install_dir: Path | None = None,
    ) -> ExecResult:
        """Run one command in ``workspace`` (see :class:`~.base.Executor`: a failing command is a value).

        ``install_dir`` (or the lineage marker in ``env``) is the writable install prefix.
        """
        setup = prepare_run(
            command,
            workspace,
            limits,
            env,
            install_dir,
            python=self.python,
            resources=self.resources_dir,
            host_paths=self.host_paths,
        )
        for name, _ in self.mounts:  # the mount points, empty on the host
            (setup.workspace / name).mkdir(exist_ok=True)
        return self._launch(setup)

    def mount_targets(self, workspace: Path) -> tuple[tuple[Path, Path], ...]:
        """``(host target under workspace, host source)`` of each read-only mount."""
        return tuple((workspace / name, Path(src).resolve()) for name, src in self.mounts)

    def _launch(self, setup: RunSetup) -> ExecResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _launch(setup)")

    def _supervise(
        self,
        command: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        limits: Limits,
        display_command: list[str],
        spec: ChildSpec,
        sweep_uid: int | None,
        contained: bool = False,
    ) -> ExecResult:
        """:func:`~.process.supervise` for a local backend: a sandbox that cannot be set up is a
        :class:`~.base.SandboxError`, and an opted-in unsafe sandbox says so in the record."""
        try:
            result = supervise(
                command,
                cwd=cwd,
                env=env,
                limits=limits,
                backend=self.name,
                display_command=display_command,
                spec=spec,
                sweep_uid=sweep_uid,
                contained=contained,
                fork_server=self.fork_server,
            )
        except subprocess.SubprocessError as exc:
            raise SandboxError(
                f"{self.name}: the sandbox could not be set up ({exc}); run `ai-scientist doctor`"
            ) from None
        unsafe = getattr(self, "unsafe", None)
        if unsafe:
            result.extra["unsafe_sandbox"] = unsafe
        return result
