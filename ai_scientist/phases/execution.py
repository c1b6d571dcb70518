"""Running one command of a node in its sandbox and recording it under ``exec/``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.fileio import atomic_write_json
from ..base.paths import claim_numbered
from .base import NodeContext

if TYPE_CHECKING:
    from ..execution.base import ExecResult


def run_command(
    ctx: NodeContext,
    command: str,
    *,
    phase: str,
    label: str,
    timeout: float | None = None,
    ntasks: int = 1,
) -> ExecResult:
    """Run ``command`` (a shell line) in the node's workspace; the result is saved in ``exec/``.
    ``ntasks`` > 1: that many MPI ranks (the Slurm backend's launcher)."""
    from dataclasses import replace

    from ..execution.base import Limits

    limits = replace(Limits.from_config(ctx.cfg.exec), ntasks=ntasks)
    if timeout is not None:
        limits = replace(limits, timeout_s=timeout)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    _, path = claim_numbered(ctx.paths.exec, phase, label)
    result = ctx.executor.run(
        ["bash", "-c", command],
        workspace=ctx.workspace,
        limits=limits,
        env=dict(ctx.exec_env),
    )
    record = {"phase": phase, "label": label, **result.to_dict()}
    atomic_write_json(path, ctx.run.redactor.redact_obj(record), durable=False)
    return result
