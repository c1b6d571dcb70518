"""``ai-scientist exec``: run one command in a sandbox backend, for checking a set-up by hand."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from ..base.config import load_config
from ..base.errors import UsageError
from ..execution.base import Limits, SandboxError
from ..execution.registry import make_executor


def cmd_exec(args: argparse.Namespace) -> int:
    """Print the command's output and a one-line summary on stderr; exit with its exit code (124 on timeout)."""
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given; usage: ai-scientist exec [--backend NAME] -- CMD ARGS...")
    cfg = load_config(args.config, args.overrides)
    limits = Limits.from_config(cfg.exec)
    changes = {}
    if args.timeout is not None:
        if args.timeout <= 0:
            raise UsageError(f"--timeout must be > 0, got {args.timeout}")
        changes["timeout_s"] = args.timeout
    if args.network:
        changes["network"] = True
    if changes:
        limits = Limits(**{**limits.__dict__, **changes})
    temp = None
    if args.workspace:
        workspace = Path(args.workspace)
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--workspace {workspace}: cannot create it ({exc.strerror})") from None
    else:
        temp = tempfile.mkdtemp(prefix="ai-sci-exec-")
        Path(temp).chmod(0o755)
        workspace = Path(temp)
    try:
        try:
            executor = make_executor(cfg, args.backend)
        except SandboxError as exc:
            raise UsageError(f"backend {args.backend or cfg.exec.backend}: {exc}") from None
        try:
            result = executor.run(cmd, workspace=workspace, limits=limits)
        finally:
            executor.close()
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.write(result.stderr)
    print(f"[exec] {result.summary()}", file=sys.stderr)
    return result.shell_exit_code
