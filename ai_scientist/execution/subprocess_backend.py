"""``subprocess`` backend: a local child process with limits and no host secrets.

What it enforces (each where the host permits; ``capabilities()`` says which):
- own session / process group; timeout -> SIGTERM then SIGKILL to the whole group
  and every descendant seen, including ones that escaped with ``setsid``;
- ``unshare --pid --fork --kill-child``: the command runs in its own pid
  namespace, so killing it kills everything it started (no cgroups needed);
- ``unshare --net`` (root) or ``unshare -rn`` (unprivileged user namespaces)
  when the network is off: only a private loopback exists;
- when the orchestrator is root, the command runs under a fresh unprivileged
  uid (``setpriv``): RLIMIT_NPROC then holds (root ignores it), the host
  filesystem is read-only to it except the workspace, and a final sweep kills
  every process of that uid;
- rlimits: address space, CPU seconds, file size, processes;
- allow-listed environment, HOME and TMPDIR inside the workspace;
- output capped while streaming; a flood past the hard cap is killed.
It cannot hide the host filesystem from reads: use ``bwrap`` or ``docker`` for that.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
from pathlib import Path

from .base import ExecResult, Limits
from .process import rlimit_preexec, supervise
from .run_setup import RunSetup, SandboxBackend
from .sandbox_env import ensure_dir

UID_BASE = 1_500_000_000
_uid_counter = itertools.count()


@functools.cache
def _works(*argv: str) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def capabilities() -> dict[str, bool]:
    """What this host lets the subprocess backend do (each checked by running it once)."""
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    setpriv = shutil.which("setpriv")
    userns = bool(unshare) and _works("unshare", "-r", "--pid", "--fork", "--kill-child", "--net", "true")
    rootns = root and bool(unshare) and _works("unshare", "--pid", "--fork", "--kill-child", "--net", "true")
    drop = (
        root
        and bool(setpriv)
        and _works("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true")
    )
    return {
        "pid_namespace": rootns or userns,
        "net_namespace": rootns or userns,
        "drop_uid": drop,
        "root": root,
        "user_namespace": userns,
    }


def _next_uid() -> int:
    return UID_BASE + (os.getpid() % 100_000) * 1000 + next(_uid_counter) % 1000


def untraversable_ancestor(path: Path) -> Path | None:
    """The first ancestor of ``path`` another uid cannot enter (mode lacks o+x), if any."""
    for parent in [path, *path.parents]:
        try:
            if not parent.stat().st_mode & 0o001:
                return parent
        except OSError:
            return parent
    return None


def _chown_tree(path: Path, uid: int) -> None:
    # The per-run uid must own the workspace to write to it; lchown never follows symlinks out.
    os.lchown(path, uid, uid)
    for base, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                os.lchown(os.path.join(base, name), uid, uid)
            except OSError:
                pass


class SubprocessExecutor(SandboxBackend):
    """The weakest isolation, always available; see the module docstring for what it enforces."""

    name = "subprocess"
    host_paths = True  # no mounts: the command sees the real workspace and resources paths

    def __init__(self, python: str = "/usr/bin/python3", resources_dir: Path | None = None):
        self.python = python
        # created now if missing, so every later bind / symlink has a real target
        self.resources_dir = ensure_dir(resources_dir)
        self.caps = capabilities()

    def _wrapper(self, limits: Limits, uid: int | None) -> list[str]:
        caps = self.caps
        wrap: list[str] = []
        if caps["pid_namespace"]:
            wrap = ["unshare"] + ([] if caps["root"] else ["-r"]) + ["--pid", "--fork", "--kill-child"]
            if not limits.network:
                wrap.append("--net")
        if uid is not None:
            wrap += [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
        return wrap

    def _launch(self, setup: RunSetup) -> ExecResult:
        limits, argv, ws, install_dir = setup.limits, setup.argv, setup.workspace, setup.install_dir
        if self.resources_dir and not (ws / "resources").exists():
            (ws / "resources").symlink_to(self.resources_dir)
        uid = _next_uid() if self.caps["drop_uid"] else None
        blocked = untraversable_ancestor(ws.parent) if uid is not None else None
        if blocked is not None:
            # A fresh uid could not reach the workspace; run as the orchestrator's uid instead.
            uid = None
        if uid is not None:
            _chown_tree(ws, uid)
            if install_dir:
                _chown_tree(Path(install_dir), uid)
        network_isolated = limits.network or self.caps["net_namespace"]
        result = supervise(
            self._wrapper(limits, uid) + argv,
            cwd=ws,
            env=setup.env,
            limits=limits,
            backend=self.name,
            display_command=argv,
            preexec=rlimit_preexec(limits),
            sweep_uid=uid,
        )
        if blocked is not None:
            result.extra["uid_drop_skipped"] = f"{blocked} is not traversable by other users (chmod o+x)"
        result.extra.update(
            uid=uid,
            dropped_env=setup.dropped,
            pid_namespace=self.caps["pid_namespace"],
            network=limits.network,
            network_isolated=network_isolated,
        )
        return result

    def close(self) -> None:
        """Nothing persistent to release."""
