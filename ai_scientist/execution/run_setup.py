"""The preamble every backend's ``run()`` shares: limits, argv, install prefix, workspace, env.

One place decides how a command, its workspace and its environment are made
ready, so the four backends cannot drift apart on it (e.g. one forgetting the
private TMP dir or the secret filter).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from .base import SANDBOX_RESOURCES, SANDBOX_WORKSPACE, Limits, normalize_command
from .lineage import SANDBOX_ENV, take_install_dir
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
    *,
    workspace: Path,
    limits: Limits | None,
    env: dict[str, str] | None,
    install_dir: Path | None,
    python: str,
    resources_dir: Path | None,
    host_paths: bool = False,
) -> RunSetup:
    """Normalise the inputs of ``Executor.run`` and build the sandbox environment.

    ``limits`` defaults to :class:`Limits`. The install prefix may come from
    ``install_dir`` or the marker variable in ``env`` (see :func:`take_install_dir`).
    Paths in the environment are those seen inside a container (``/workspace``,
    ``/resources``, ``/env``) unless ``host_paths`` is True (the subprocess
    backend, which runs on the host filesystem). Raises ValueError for an
    empty command, before touching the filesystem.
    """
    argv = normalize_command(command)
    env, install_dir = take_install_dir(env, install_dir)
    ws = Path(workspace).resolve()
    (ws / TMP_DIRNAME).mkdir(parents=True, exist_ok=True)
    if host_paths:
        paths = (str(ws), str(resources_dir) if resources_dir else None)
        prefix = str(Path(install_dir).resolve()) if install_dir else None
    else:
        paths = (SANDBOX_WORKSPACE, SANDBOX_RESOURCES if resources_dir else None)
        prefix = SANDBOX_ENV if install_dir else None
    full_env, dropped = sandbox_environ(
        workspace=paths[0],
        extra=env,
        python=python,
        resources=paths[1],
        install_prefix=prefix,
        marker=uuid.uuid4().hex,
    )
    return RunSetup(limits or Limits(), argv, ws, install_dir, full_env, dropped)
