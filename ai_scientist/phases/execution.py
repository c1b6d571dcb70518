"""Running one command of a node in its sandbox and recording it under ``exec/``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.fileio import atomic_write_json
from .base import NodeContext

if TYPE_CHECKING:
    from ..execution.base import ExecResult

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _claim(folder: Path, phase: str, label: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob("[0-9][0-9][0-9]_*.json"))) + 1
    while True:
        path = folder / f"{n:03d}_{_SAFE.sub('-', phase)}_{_SAFE.sub('-', label)[:30]}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


def run_command(
    ctx: NodeContext, command: str, *, phase: str, label: str, timeout: float | None = None
) -> ExecResult:
    """Run ``command`` (a shell line) in the node's workspace; the result is saved in ``exec/``."""
    from dataclasses import replace

    from ..execution.base import Limits

    limits = Limits.from_config(ctx.cfg.exec)
    if timeout is not None:
        limits = replace(limits, timeout_s=timeout)
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    path = _claim(ctx.dir / "exec", phase, label)
    result = ctx.executor.run(
        ["bash", "-c", command],
        workspace=ctx.workspace,
        limits=limits,
        env=dict(ctx.exec_env),
    )
    record = {"phase": phase, "label": label, **result.to_dict()}
    atomic_write_json(path, ctx.run.redactor.redact_obj(record), durable=False)
    return result
