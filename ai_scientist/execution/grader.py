"""A grader: a program out of the generated code's reach that decides a node's metric.

The task author's directory (``run --grader DIR``, ``grader.dir``) holds an executable
``grade`` (or ``grade.py``) and any hidden data (test labels). After a node's run the grader
runs in its own sandbox, in a fresh writable directory outside the run directory holding

- ``submission/``: the node's workspace, read-only;
- ``grader/``: DIR, read-only;

as ``grader/grade`` (or ``python3 grader/grade.py``), and writes ``metrics.json`` there in the
usual format. The directory is removed afterwards: only ``metrics.json`` (read bounded, no
symlink out) and the command record leave it, so the hidden data never lands in the run.

The node's own commands never see DIR: every executor :func:`~.registry.make_executor` builds
for a run with ``grader.dir`` hides it (subprocess: an empty tmpfs over it in the command's
mount namespace; bwrap and docker bind nothing of the host but what the command needs, and
bwrap covers DIR if a bound tree such as ``/usr`` holds it; apptainer ``--containall`` binds
no host directory of its own; slurm passes it to the inner sandbox). :func:`check_placement`
refuses a DIR that a resource or the run directory would expose.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import ConfigError
from ..base.fileio import read_file_inside
from .base import ExecResult, Limits

if TYPE_CHECKING:
    from ..base.config import Config

GRADE_EXE = "grade"
GRADE_PY = "grade.py"
SUBMISSION = "submission"
GRADER = "grader"
GRADED_FILE = "metrics.json"
MAX_GRADED_BYTES = 1_000_000


class GraderError(ConfigError):
    """The grader directory cannot serve as a grader (CLI exit 2, before any token is spent)."""


@dataclass(frozen=True)
class Grader:
    """A checked grader directory and how its entry point is started."""

    dir: Path
    entry: str  # GRADE_EXE or GRADE_PY

    def argv(self, python: str) -> list[str]:
        """The grading command, run in the fresh directory (``python``: the sandbox's interpreter)."""
        if self.entry == GRADE_EXE:
            return [f"{GRADER}/{GRADE_EXE}"]
        return [python, f"{GRADER}/{GRADE_PY}"]


def _others_may(mode: int, read: bool = True, run: bool = False) -> bool:
    return (not read or bool(mode & stat.S_IROTH)) and (not run or bool(mode & stat.S_IXOTH))


def load_grader(path: str | Path, where: str = "--grader") -> Grader:
    """Check ``path`` as a grader directory; raises :class:`GraderError` naming what to fix.

    The grader runs under an unprivileged uid, so DIR must be enterable and its entry point
    readable (and ``grade`` executable) by others."""
    d = Path(path).expanduser()
    if not d.is_dir():
        raise GraderError(f"{where} {path}: not a directory (it must hold grade or grade.py)")
    d = d.resolve()
    exe, py = d / GRADE_EXE, d / GRADE_PY
    if exe.exists() or exe.is_symlink():
        entry, f = GRADE_EXE, exe
    elif py.exists() or py.is_symlink():
        entry, f = GRADE_PY, py
    else:
        raise GraderError(f"{where} {d}: no grade or grade.py in it; add one (see docs/pipeline.md, Graders)")
    if f.is_symlink() or not f.is_file():
        raise GraderError(f"{where} {f}: must be a regular file (not a symlink or directory)")
    mode = f.stat().st_mode
    if entry == GRADE_EXE and not _others_may(mode, run=True):
        raise GraderError(f"{where} {f}: not executable by others; chmod a+rx {f} (or name it grade.py)")
    if not _others_may(mode):
        raise GraderError(
            f"{where} {f}: not readable by others (the grader runs unprivileged); chmod a+r {f}"
        )
    if not _others_may(d.stat().st_mode, run=True):
        raise GraderError(
            f"{where} {d}: not enterable by others (the grader runs unprivileged); chmod a+rx {d}"
        )
    return Grader(d, entry)


def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def check_placement(grader: Grader, out_root: Path | None, resource_sources: list[Path]) -> None:
    """Refuse a grader directory the node's programs could reach some other way: one holding
    the runs' output root (the workspaces would live inside it), or one inside (or holding) a
    declared resource (seen under ``resources/``)."""
    d = grader.dir
    if out_root is not None:
        out = Path(out_root).resolve()
        if _inside(out, d):
            raise GraderError(f"grader.dir {d}: holds the output root {out}; put the runs elsewhere")
    for src in resource_sources:
        real = Path(src).resolve()
        if _inside(real, d) or _inside(d, real):
            raise GraderError(
                f"grader.dir {d}: overlaps the resource {real}, which the node's programs see under "
                "resources/; do not declare the grader's data as a resource"
            )


@dataclass
class GradeRun:
    """One grading: the command's record and what it wrote (``data``) or why nothing counts."""

    result: ExecResult
    data: Any = None  # the parsed metrics.json
    error: str | None = None
    duration_s: float = 0.0  # wall time of the whole grading (sandbox start included)


def grade(grader: Grader, submission: Path, cfg: Config, executor: Any = None) -> GradeRun:
    """Run ``grader`` on ``submission`` (a node's workspace) in its own sandbox.

    ``executor``: one made with the ``submission``/``grader`` mounts (default: built from
    ``cfg`` with :func:`~.registry.make_executor`, closed afterwards). Never raises for a
    grader that fails: the :class:`GradeRun` carries the reason."""
    from .registry import make_executor

    start = time.monotonic()
    own = executor is None
    if own:
        mounts = ((SUBMISSION, Path(submission)), (GRADER, grader.dir))
        executor = make_executor(cfg, mounts=mounts)
    work = Path(tempfile.mkdtemp(prefix="ai-sci-grade-"))
    try:
        work.chmod(0o755)
        limits = dataclasses.replace(
            Limits.from_config(cfg.exec), timeout_s=float(cfg.grader.timeout), network=False
        )
        result = executor.run(grader.argv(cfg.exec.python), workspace=work, limits=limits)
        run = GradeRun(result)
        if not result.ok:
            why = result.reason or f"exit {result.exit_code}"
            run.error = f"the grader failed ({why}): {result.stderr.strip()[-800:]}"
        else:
            path = work / GRADED_FILE
            try:
                run.data = json.loads(read_file_inside(work, path, MAX_GRADED_BYTES).decode("utf-8"))
            except (ValueError, TypeError) as exc:
                run.error = f"the grader wrote no readable {GRADED_FILE}: {exc}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if own:
            executor.close()
    run.duration_s = time.monotonic() - start
    return run


def grader_dir_of(cfg: Config) -> Path | None:
    """``grader.dir`` as a path, or None."""
    return Path(cfg.grader.dir) if cfg.grader.dir else None
