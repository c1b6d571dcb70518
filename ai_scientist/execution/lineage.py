"""Phase 1 installs inherited along a lineage.

Each node has an install prefix ``nodes/<id>/env/``. Phase 1 installs into it
(pip through ``PYTHONUSERBASE`` + ``PIP_USER=1``, ``make install`` through
``PREFIX``); every later command of that node and of its descendants sees it
on ``PATH``, ``PYTHONPATH``/user site, ``LD_LIBRARY_PATH``, ``CPATH`` and
``PKG_CONFIG_PATH``. A child starts from a cheap copy of its parent's prefix
(a reflink copy where the filesystem supports it, otherwise hard links), so it
never reinstalls what its parent already has, and what it adds stays its own.

Hard-linked files are shared with the parent: installers replace files
(write new, rename) rather than rewrite them in place, which keeps the parent
intact; a command that edits an inherited file in place would change the
parent's copy too (documented in docs/execution.md).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..base.paths import NodePaths
from .base import SYSTEM_PATH

# Host path of a node's prefix, passed through ``run(env=...)``; every backend takes it out of
# the command's environment and mounts the directory (at /env in containers) instead.
INSTALL_DIR_ENV = "AI_SCIENTIST_INSTALL_DIR"
# Where the prefix is mounted inside container-like backends.
SANDBOX_ENV = "/env"


def node_env_dir(node_dir: Path) -> Path:
    """The install prefix of a node (created if missing)."""
    path = NodePaths(Path(node_dir)).env
    path.mkdir(parents=True, exist_ok=True)
    return path


def inherit_install_state(parent_node_dir: Path, child_node_dir: Path) -> dict[str, str]:
    """Give the child a copy of the parent's install prefix; returns ``{"method", "env_dir"}``.

    ``method`` is ``reflink``, ``hardlink``, ``copy``, ``empty`` (parent had no prefix) or
    ``existing``: the child already has a non-empty prefix (a resumed node, or a second call),
    which is kept as it is, so calling this before every command is safe.
    """
    src = NodePaths(Path(parent_node_dir)).env
    dst = NodePaths(Path(child_node_dir)).env
    if dst.is_dir() and any(dst.iterdir()):
        return {"method": "existing", "env_dir": str(dst)}
    if dst.exists():
        dst.rmdir()
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        dst.mkdir()
        return {"method": "empty", "env_dir": str(dst)}
    for method, args in (("reflink", ["--reflink=always", "-a"]), ("hardlink", ["-al"])):
        proc = subprocess.run(["cp", *args, str(src), str(dst)], capture_output=True, text=True)
        if proc.returncode == 0:
            return {"method": method, "env_dir": str(dst)}
        shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, symlinks=True)
    return {"method": "copy", "env_dir": str(dst)}


def install_env(node_dir: Path) -> dict[str, str]:
    """The ``env`` entry that makes any executor use the node's install prefix (created if missing)."""
    return {INSTALL_DIR_ENV: str(node_env_dir(Path(node_dir)).resolve())}


def take_install_dir(
    env: dict[str, str] | None, install_dir: Path | None
) -> tuple[dict[str, str], Path | None]:
    """Split the prefix marker out of a command's env: (env without it, prefix dir or None)."""
    env = dict(env or {})
    marked = env.pop(INSTALL_DIR_ENV, None)
    if install_dir is None and marked:
        install_dir = Path(marked)
    if install_dir is not None:
        Path(install_dir).mkdir(parents=True, exist_ok=True)
    return env, install_dir


def _pyver(python: str) -> str:
    # The interpreter inside the sandbox is the host's /usr/bin/python3 or the image's; both
    # expose their version in the resolved file name (python3.11); fall back to the running one.
    try:
        name = Path(python).resolve().name
        if name.startswith("python3."):
            return name.removeprefix("python")
    except OSError:
        pass
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def install_environ(prefix: str, python: str = "/usr/bin/python3") -> dict[str, str]:
    """Variables that make installs go into ``prefix`` and make them visible (paths as seen inside)."""
    ver = _pyver(python)
    return {
        "AI_SCIENTIST_ENV": prefix,
        "PREFIX": prefix,
        "PYTHONUSERBASE": prefix,
        "PIP_USER": "1",
        "PIP_BREAK_SYSTEM_PACKAGES": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": f"{prefix}/lib/python{ver}/site-packages",
        "PATH": f"{prefix}/bin:{SYSTEM_PATH}",
        "LD_LIBRARY_PATH": f"{prefix}/lib",
        "CPATH": f"{prefix}/include",
        "PKG_CONFIG_PATH": f"{prefix}/lib/pkgconfig",
    }
