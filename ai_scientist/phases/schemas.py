"""JSON schemas of every structured answer the node pipeline asks for.

They are sent to the backend (server-side ``json_schema`` or llama.cpp grammar)
and validated on return; the extra checks that a schema cannot express live in
the ``validate_*`` functions, which raise ``ValueError`` with the precise problem
that the LLM client feeds back in its repair round.
"""

from __future__ import annotations

from typing import Any

# Every array has a maxItems and every string a maxLength (``unbounded_fields`` finds a missing
# one; tests walk every answer schema with it): with grammar-constrained decoding (llama.cpp)
# they are what stops a weak model that starts repeating itself ("pip", "pip", ...) from running
# to max_tokens. Long fields (file contents) get a generous bound that the validator enforces;
# the local backend leaves bounds above GRAMMAR_MAX_LENGTH out of its grammar (llama.cpp
# expands a maxLength into one nested rule per character), max_tokens bounds them there.
LONG_TEXT = 60_000  # a generated source file


def unbounded_fields(schema: Any, path: str = "$") -> list[str]:
    """Paths of the strings without ``maxLength`` and the arrays without ``maxItems`` in a JSON
    schema (an ``enum`` or ``const`` is bounded); empty when every one is bounded."""
    if not isinstance(schema, dict):
        return []
    out: list[str] = []
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    fixed = "enum" in schema or "const" in schema
    if "string" in kinds and not fixed and "maxLength" not in schema:
        out.append(f"{path}: string without maxLength")
    if "array" in kinds and not fixed and "maxItems" not in schema:
        out.append(f"{path}: array without maxItems")
    for name, sub in (schema.get("properties") or {}).items():
        out += unbounded_fields(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        out += unbounded_fields(schema["additionalProperties"], f"{path}.*")
    items = schema.get("items")
    for i, sub in enumerate(items if isinstance(items, list) else [items]):
        out += unbounded_fields(sub, f"{path}[{i if isinstance(items, list) else ''}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            out += unbounded_fields(sub, f"{path}.{key}[{i}]")
    return out


def _text(n: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": n}


def _list(n: int, item_len: int = 300) -> dict[str, Any]:
    return {"type": "array", "items": _text(item_len), "maxItems": n}


_STR_LIST = _list(20, 100)  # package names

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal_summary": _text(400),
        "implementation_strategy": _text(800),
        "dependencies": {
            "type": "object",
            "properties": {"apt": _STR_LIST, "pip": _STR_LIST, "source": _STR_LIST},
            "required": ["apt", "pip", "source"],
        },
        "phase_guidance": {
            "type": "object",
            "properties": {k: _text(400) for k in ("phase1", "phase2", "phase3", "phase4")},
        },
        "risks_and_mitigations": _list(8, 200),
        "time_budget_estimate": _text(100),
    },
    "required": ["goal_summary", "implementation_strategy", "dependencies"],
}

INSTALL_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": _text(500),
        "done": {"type": "boolean"},
        "notes": _text(300),
    },
    "required": ["command", "done"],
}

CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": _text(300),
        "files": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "path": _text(200),
                    "content": _text(LONG_TEXT),
                    "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                },
                "required": ["path", "content"],
            },
        },
        "build": {
            "type": "object",
            "properties": {
                "language": _text(40),
                "compiler": _text(80),
                "flags": _list(20, 100),
                "commands": _list(10, 300),
                "output": _text(200),
            },
            "required": ["language"],
        },
        "run": {
            "type": "object",
            "properties": {"commands": _list(10, 300), "expected_outputs": _list(10, 200)},
            "required": ["commands"],
        },
    },
    "required": ["files", "build", "run"],
}

# a child's code answer with its plan in it (agent.merge_calls): one call instead of plan + code;
# the plan fields are PLAN_SCHEMA's, saved as the node's plan.json (plan_source "merged")
PLAN_FIELDS = tuple(PLAN_SCHEMA["properties"])
MERGED_CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {**PLAN_SCHEMA["properties"], **CODE_SCHEMA["properties"]},
    "required": [*PLAN_SCHEMA["required"], *CODE_SCHEMA["required"]],
}

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"is_bug": {"type": "boolean"}, "summary": _text(500)},
    "required": ["is_bug", "summary"],
}

IDEAS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ideas": {"type": "array", "items": _text(200), "minItems": 1, "maxItems": 8}},
    "required": ["ideas"],
}

TIEBREAK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"node_id": _text(20), "reasoning": _text(600)},
    "required": ["node_id", "reasoning"],
}

# the summary role at a stage's end: bounded prose per field (the best node and its metric come
# from the journal, not from the model)
STAGE_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tried": _text(1200),
        "worked": _text(1000),
        "failed": _text(800),
        "next": _text(800),
    },
    "required": ["tried", "worked", "failed", "next"],
}

METRICS_PARSER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metrics": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _text(100),
                    "value": {"type": "number"},
                    "direction": {"type": "string", "enum": ["maximize", "minimize"]},
                    "dataset": _text(100),
                },
                "required": ["name", "value", "direction"],
            },
            "maxItems": 30,
        }
    },
    "required": ["metrics"],
}

# the execution review that also parses the metrics (agent.merge_calls, no metrics.json): one call
# instead of the metrics fallback parser plus the review
REVIEW_METRICS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {**REVIEW_SCHEMA["properties"], **METRICS_PARSER_SCHEMA["properties"]},
    "required": [*REVIEW_SCHEMA["required"], *METRICS_PARSER_SCHEMA["required"]],
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


def validate_code(
    answer: dict[str, Any],
    environment: dict[str, Any] | None = None,
    installed: set[str] | frozenset = frozenset(),
) -> None:
    """Checks the schema cannot express; ``environment`` is the probed environment.json, whose
    sandbox probe says which compilers the code's sandbox has; ``installed`` names the tools the
    node's own install prefix added (phase 1)."""
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
    _check_tools(build, environment, installed)


def _check_tools(
    build: dict[str, Any], environment: dict[str, Any] | None, installed: set[str] | frozenset
) -> None:
    """A compiler the build names (``build.compiler`` or the first word of a build command) that
    the sandbox probe looked for and did not find is refused, naming what is there instead. A
    name the probe does not look for cannot be judged and passes."""
    from ..execution.sandbox_probe import TOOLS, available_tools

    found = available_tools(environment)
    if found is None:
        return
    present, where = found
    present = present | set(installed)
    named = [("build.compiler", str(build.get("compiler") or ""))]
    named += [(f"build.commands[{i}]", str(c)) for i, c in enumerate(build.get("commands") or [])]
    for key, text in named:
        words = text.split()
        tool = words[0].rsplit("/", 1)[-1] if words else ""
        if tool in TOOLS and tool not in present:
            there = ", ".join(sorted(t for t in present if t in TOOLS)) or "none"
            raise ValueError(
                f"{key}: {tool!r} is not installed in {where}; compilers and build tools there: {there}. "
                f"Build with one of those, or write the program in a language they compile"
            )


def probed_packages(environment: dict[str, Any] | None) -> list[str] | None:
    """The Python packages the sandbox probe found (``environment.json`` ``sandbox.python``),
    sorted; None when there is no probe or its list is cut (``package_count`` above the list)."""
    python = ((environment or {}).get("sandbox") or {}).get("python") or {}
    packages = python.get("packages")
    if not isinstance(packages, dict) or python.get("error"):
        return None
    count = python.get("package_count")
    if isinstance(count, int) and count > len(packages):
        return None  # a truncated list: constraining to it would refuse installed packages
    return sorted(packages)


def constrain_dependencies(
    schema: dict[str, Any], environment: dict[str, Any] | None, network: bool
) -> dict[str, Any]:
    """``schema`` (a plan or merged code schema) with ``dependencies.pip`` limited to the packages
    the sandbox probe found, when the sandbox has no network (nothing else could be installed): an
    enum, so a grammar (llama.cpp) or a server-side JSON schema cannot produce an invented package
    and the validator refuses one otherwise. Unchanged with network on or without a full probe."""
    found = None if network else probed_packages(environment)
    if found is None:
        return schema
    pip: dict[str, Any] = (
        {"type": "array", "items": {"type": "string", "enum": found}, "maxItems": 20}
        if found
        else {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 0}
    )
    deps = schema["properties"]["dependencies"]
    return {
        **schema,
        "properties": {
            **schema["properties"],
            "dependencies": {**deps, "properties": {**deps["properties"], "pip": pip}},
        },
    }
