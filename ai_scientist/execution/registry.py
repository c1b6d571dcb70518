"""Choosing and building an executor: ``make_executor`` and ``resolve_backend`` (``auto``)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Executor, Limits, SandboxError
from .usage import tracked

if TYPE_CHECKING:
    from ..base.config import Config

BACKENDS = ("subprocess", "bwrap", "docker", "apptainer", "slurm")
# ``auto`` prefers the strongest isolation that really runs here.
AUTO_ORDER = ("docker", "apptainer", "bwrap", "subprocess")


def make_executor(
    cfg: Config,
    backend: str | None = None,
    *,
    resources_dir: Path | None = None,
    mounts: tuple[tuple[str, Path], ...] = (),
) -> Executor:
    """An executor for ``backend`` (default ``cfg.exec.backend``; ``auto`` resolves first).

    Every executor made here hides ``grader.dir`` from its commands (the grader's hidden data, and
    its other copies on this host: :func:`grader_hidden`);
    ``mounts`` (workspace name -> host path, read-only) make a grader's own executor instead,
    which hides nothing (see :mod:`.grader`). Raises :class:`SandboxError` when the backend
    cannot run here, with what to do.
    """
    ex = cfg.exec
    name = backend or ex.backend
    unsafe = bool(ex.allow_unsafe_sandbox)  # else a backend that cannot isolate here refuses (exit 2)
    if name == "auto":
        name, _ = resolve_backend(cfg)
    if mounts and name == "slurm":  # grading is short: the inner sandbox kind, on this host
        name = ex.slurm.sandbox
    executor = _make(cfg, name, resources_dir, unsafe)
    if hasattr(executor, "fork_server"):  # the local backends (see .forkserver)
        executor.fork_server = bool(ex.fork_server)
    # the load around each command and the run's other commands meanwhile (.usage)
    executor.run = tracked(executor.run)  # type: ignore[method-assign]
    if mounts:
        executor.mounts = tuple(mounts)  # type: ignore[attr-defined]
    elif cfg.grader.dir:
        executor.hidden = grader_hidden(Path(cfg.grader.dir))  # type: ignore[attr-defined]
    return executor


# the bench's bundled tasks (ai_scientist/benchsuite): their graders' data, and the script that makes it
_BENCH_PACKAGE = Path(__file__).resolve().parents[1] / "benchsuite"


def grader_hidden(grader_dir: Path) -> tuple[str, ...]:
    """What a run's commands must not see for a grader to mean anything: its directory, and the
    other places its hidden data lie on this host — the ``.git`` of a repository holding the
    grader (its objects are the files, committed), and for a bundled bench task the bench's
    package (every task's grader and ``make_task_data.py``, which writes them)."""
    grader = grader_dir.resolve()
    out = [grader]
    repo = next((p / ".git" for p in (grader, *grader.parents) if (p / ".git").exists()), None)
    if repo is not None:
        out.append(repo)
    if _BENCH_PACKAGE == grader or _BENCH_PACKAGE in grader.parents:
        out.append(_BENCH_PACKAGE)
    return tuple(dict.fromkeys(str(p) for p in out))


def _make(cfg: Config, name: str, resources_dir: Path | None, unsafe: bool) -> Executor:
    ex = cfg.exec
    if name == "subprocess":
        from .subprocess_backend import SubprocessExecutor

        return SubprocessExecutor(python=ex.python, resources_dir=resources_dir, allow_unsafe=unsafe)
    if name == "bwrap":
        from .bwrap_backend import BwrapExecutor

        return BwrapExecutor(python=ex.python, resources_dir=resources_dir, allow_unsafe=unsafe)
    if name == "docker":
        from .docker_backend import DockerExecutor

        return DockerExecutor(
            ex.docker_image, python=ex.python, resources_dir=resources_dir, reuse=ex.docker_reuse_container
        )
    if name == "apptainer":
        from .apptainer_backend import ApptainerExecutor

        return ApptainerExecutor(
            ex.apptainer_image,
            binary=ex.apptainer_binary,
            python=ex.python,
            resources_dir=resources_dir,
            allow_unsafe=unsafe,
        )
    if name == "slurm":
        from .slurm_backend import SlurmExecutor

        return SlurmExecutor(ex, resources_dir=resources_dir)
    raise SandboxError(f"exec.backend: unknown backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")


def live_check(cfg: Config, name: str) -> tuple[bool, str]:
    """Run ``true`` in backend ``name``; (usable, detail) with the reason when it is not."""
    try:
        executor = make_executor(cfg, name)
    except SandboxError as exc:
        return False, str(exc)
    try:
        with tempfile.TemporaryDirectory(prefix="ai-sci-check-") as tmp:
            Path(tmp).chmod(0o755)
            result = executor.run(["true"], workspace=Path(tmp), limits=Limits(timeout_s=60))
    except SandboxError as exc:
        return False, str(exc)
    finally:
        executor.close()
    if not result.ok:
        return False, f"`true` failed: {result.summary()} {result.stderr.strip()[:200]}"
    return True, f"ran `true` in {result.duration_s:.2f}s"


@functools.lru_cache(maxsize=8)
def _resolve_cached(key: tuple) -> tuple[str, str]:
    cfg = key[0]
    skipped: list[str] = []
    for name in AUTO_ORDER:
        ok, detail = live_check(cfg, name)
        if ok:
            why = f"auto picked {name} ({detail})"
            return name, why + (f"; not usable: {'; '.join(skipped)}" if skipped else "")
        skipped.append(f"{name}: {detail}")
    from .isolation import SandboxUnavailable

    raise SandboxUnavailable("no sandbox backend works here: " + "; ".join(skipped))


class _CfgKey:
    # Hashable wrapper so the resolution is cached per process and per exec config.
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.key = repr(sorted(cfg.exec.model_dump().items()))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CfgKey) and other.key == self.key

    def __getattr__(self, item: str) -> Any:
        return getattr(self.cfg, item)


def resolve_backend(cfg: Config) -> tuple[str, str]:
    """(backend name, reason). ``auto`` = the strongest backend that ran ``true`` here; cached per process."""
    if cfg.exec.backend != "auto":
        return cfg.exec.backend, f"configured exec.backend={cfg.exec.backend}"
    return _resolve_cached((_CfgKey(cfg),))
