"""Phase 1: the iterative installer.

The LLM proposes one shell command at a time (``{command, done, notes}``); each
runs in the sandbox and its outcome goes into the next prompt. ``done`` is
refused right after a failed command, and is only accepted when the check
derived from the plan's dependencies passes (pip distributions importable by
metadata, apt packages known to dpkg or on PATH) — never a fixed import list.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from ..base.artifacts import Dependencies, Plan
from ..base.paths import INSTALL_FILE as STATE_FILE
from ..llm.call import LLMError
from .base import NodeContext, PhaseFailed, checkpoint
from .execution import run_command
from .schemas import INSTALL_STEP_SCHEMA


def install_schema(schema: dict[str, Any], can_install: bool) -> dict[str, Any]:
    """``schema`` (the plan's, or a code answer's with the plan fields) without the note for
    phase 1 (``phase_guidance.phase1``, "installing the dependencies") when nothing can be
    installed (``exec.network`` off: no download reaches the sandbox) — an offer the model cannot
    use (a relay run's code call offered it beside "nothing new can be installed": s7 mm2 001,
    005). Unchanged otherwise, or without the field."""
    guidance = (schema.get("properties") or {}).get("phase_guidance")
    if can_install or not isinstance(guidance, dict) or "phase1" not in (guidance.get("properties") or {}):
        return schema
    props = {k: v for k, v in guidance["properties"].items() if k != "phase1"}
    return {
        **schema,
        "properties": {**schema["properties"], "phase_guidance": {**guidance, "properties": props}},
    }


def dependency_check_command(deps: Dependencies, python: str) -> str | None:
    """A shell command that exits 0 iff every pip and apt dependency is present (the ``new``
    packages of a constrained plan included)."""
    pip = [
        p.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip()
        for p in [*deps.pip, *deps.new_names("pip")]
    ]
    apt = [a.strip() for a in [*deps.apt, *deps.new_names("apt")]]
    checks = []
    if pip:
        code = (
            "import importlib.metadata as m, sys\n"
            "missing = []\n"
            f"for d in {pip!r}:\n"
            "    try:\n        m.distribution(d)\n"
            "    except m.PackageNotFoundError:\n        missing.append(d)\n"
            "print('missing pip:', ' '.join(missing)) if missing else None\n"
            "sys.exit(1 if missing else 0)\n"
        )
        checks.append(f"{shlex.quote(python)} -c {shlex.quote(code)}")
    for a in apt:
        q = shlex.quote(a)
        checks.append(
            f"(dpkg-query -W -f='${{Status}}' {q} 2>/dev/null | grep -q 'ok installed' "
            f"|| command -v {q} >/dev/null || (echo 'missing apt: {a}'; false))"
        )
    return " && ".join(checks) if checks else None


def _steps_for_prompt(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The installer log as a list (the layer's history policy prunes old steps whole)."""
    return [
        {
            "step": i,
            "command": h["command"],
            "exit_code": h["exit_code"],
            "killed_by": h.get("killed_by"),
            "stdout_tail": h["stdout"][-600:],
            "stderr_tail": h["stderr"][-600:],
            "notes": h.get("notes", ""),
        }
        for i, h in enumerate(steps, 1)
    ]


def install_dependencies(ctx: NodeContext, plan: Plan) -> dict:
    """Install the plan's dependencies in the node's sandbox; returns the phase record."""
    return checkpoint(ctx, "phase1", STATE_FILE, lambda: _install(ctx, plan))


def _install(ctx: NodeContext, plan: Plan) -> dict:
    """The installer loop; every step's state is saved for the viewer as it goes."""
    check = dependency_check_command(plan.dependencies, ctx.cfg.exec.python)
    state: dict[str, Any] = {
        "dependencies": plan.dependencies.to_json() or {},
        "check": check,
        "steps": [],
        "satisfied": False,
    }
    if check is None or _check(ctx, check, state):
        state["satisfied"] = True
        state["note"] = (
            "no dependencies to install"
            if check is None
            else "already satisfied: every listed dependency is present (the check passed), no installer call"
        )
        return state
    for step in range(1, ctx.cfg.exec.phase1_max_steps + 1):
        answer = _ask_step(ctx, plan, state, step)
        last_failed = bool(state["steps"]) and state["steps"][-1]["exit_code"] != 0
        if answer.get("done"):
            if last_failed:
                state["refusals"] = state.get("refusals", 0) + 1
                state["steps"].append(_refusal("the last command failed; fix it before declaring done"))
                continue
            if _check(ctx, check, state):
                state["satisfied"] = True
                return state
            state["steps"].append(_refusal("done refused: the dependency check still fails"))
            continue
        cmd = str(answer.get("command", "")).strip()
        if not cmd:
            state["steps"].append(_refusal("empty command"))
            continue
        res = run_command(ctx, cmd, phase="phase1", label=f"install{step}")
        state["steps"].append(
            {
                "command": cmd,
                "exit_code": res.exit_code,
                "killed_by": res.killed_by,
                "stdout": res.stdout[-2000:],
                "stderr": res.stderr[-2000:],
                "notes": answer.get("notes", ""),
            }
        )
        ctx.save(STATE_FILE, state)
    if _check(ctx, check, state):
        state["satisfied"] = True
        return state
    ctx.save(STATE_FILE, state)
    hint = "" if ctx.cfg.exec.network else " (exec.network is false: downloads cannot work in the sandbox)"
    raise PhaseFailed(
        "phase1",
        f"dependencies not installed after {len(state['steps'])} steps{hint}: "
        f"{state.get('last_check_output', '')}".strip(),
    )


def _refusal(reason: str) -> dict[str, Any]:
    return {"command": "", "exit_code": None, "killed_by": None, "stdout": "", "stderr": reason, "notes": ""}


def _check(ctx: NodeContext, check: str | None, state: dict) -> bool:
    if check is None:
        return True
    res = run_command(ctx, check, phase="phase1", label="check")
    state["last_check_output"] = (res.stdout + res.stderr).strip()[-500:]
    return res.exit_code == 0


def _ask_step(ctx: NodeContext, plan: Plan, state: dict, step: int) -> dict:
    values = {
        "plan_snippet": json.dumps(
            {"dependencies": plan.dependencies.to_json(), "guidance": plan.guidance_for("phase1")},
            indent=2,
        ),
        "install_steps": _steps_for_prompt(state["steps"]),
        "step_info": f"step {step} of {ctx.cfg.exec.phase1_max_steps}; "
        f"network {'allowed' if ctx.cfg.exec.network else 'OFF'}; "
        f"last dependency check: {state.get('last_check_output') or 'failed'}",
    }
    try:
        return ctx.ask(
            "phase1_install", values, phase="phase1", label=f"step{step}", schema=INSTALL_STEP_SCHEMA
        ).parsed
    except LLMError as exc:
        raise PhaseFailed("phase1", f"installer step {step}: {exc}") from exc
