"""JSON schemas of every structured answer the node pipeline asks for.

They are sent to the backend (server-side ``json_schema`` or llama.cpp grammar)
and validated on return; the extra checks that a schema cannot express live in
the ``validate_*`` functions, which raise ``ValueError`` with the precise problem
that the LLM client feeds back in its repair round.
"""

from __future__ import annotations

from typing import Any

_STR_LIST = {"type": "array", "items": {"type": "string"}}

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal_summary": {"type": "string"},
        "implementation_strategy": {"type": "string"},
        "dependencies": {
            "type": "object",
            "properties": {"apt": _STR_LIST, "pip": _STR_LIST, "source": _STR_LIST},
            "required": ["apt", "pip", "source"],
        },
        "phase_guidance": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("phase1", "phase2", "phase3", "phase4")},
        },
        "risks_and_mitigations": _STR_LIST,
        "time_budget_estimate": {"type": "string"},
    },
    "required": ["goal_summary", "implementation_strategy", "dependencies"],
}

INSTALL_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "done": {"type": "boolean"},
        "notes": {"type": "string"},
    },
    "required": ["command", "done"],
}

CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                },
                "required": ["path", "content"],
            },
        },
        "build": {
            "type": "object",
            "properties": {
                "language": {"type": "string"},
                "compiler": {"type": "string"},
                "flags": _STR_LIST,
                "commands": _STR_LIST,
                "output": {"type": "string"},
            },
            "required": ["language"],
        },
        "run": {
            "type": "object",
            "properties": {"commands": _STR_LIST, "expected_outputs": _STR_LIST},
            "required": ["commands"],
        },
    },
    "required": ["files", "build", "run"],
}

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"is_bug": {"type": "boolean"}, "summary": {"type": "string"}},
    "required": ["is_bug", "summary"],
}

IDEAS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ideas": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["ideas"],
}

TIEBREAK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"node_id": {"type": "string"}, "reasoning": {"type": "string"}},
    "required": ["node_id", "reasoning"],
}

METRICS_PARSER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metrics": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": "number"},
                    "direction": {"type": "string", "enum": ["maximize", "minimize"]},
                    "dataset": {"type": "string"},
                },
                "required": ["name", "value", "direction"],
            },
        }
    },
    "required": ["metrics"],
}

INTERPRETED = {"python", "python3", "bash", "sh", "shell"}
COMPILED = {"c", "c++", "cpp", "fortran", "cuda", "rust", "go"}


def validate_plan(plan: dict[str, Any]) -> None:
    deps = plan.get("dependencies") or {}
    for kind in ("apt", "pip", "source"):
        for item in deps.get(kind) or []:
            if not isinstance(item, str) or not item.strip() or any(c in item for c in ";|&`$\n"):
                raise ValueError(f"dependencies.{kind}: {item!r} is not a plain package name")
    if not str(plan.get("goal_summary", "")).strip():
        raise ValueError("goal_summary: must not be empty")


def validate_code(answer: dict[str, Any], environment: dict[str, Any] | None = None) -> None:
    """Checks the schema cannot express; ``environment`` is the probed environment.json."""
    files = answer.get("files") or []
    if not files:
        raise ValueError("files: at least one file is required")
    paths = [f.get("path", "") for f in files]
    if len(set(paths)) != len(paths):
        raise ValueError("files: duplicate paths")
    run = answer.get("run") or {}
    if not [c for c in run.get("commands") or [] if str(c).strip()]:
        raise ValueError("run.commands: at least one command is required")
    build = answer.get("build") or {}
    lang = str(build.get("language", "")).lower()
    compiler = str(build.get("compiler") or "").strip()
    if lang in COMPILED or compiler:
        if not compiler and not build.get("commands"):
            raise ValueError(f"build: language {lang!r} needs build.compiler or build.commands")
        if compiler and environment is not None:
            known = {c.get("name") for c in environment.get("compilers", []) if isinstance(c, dict)}
            if known and compiler not in known:
                raise ValueError(
                    f"build.compiler: {compiler!r} is not available here; available: {', '.join(sorted(known))}"
                )
