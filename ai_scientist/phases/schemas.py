"""JSON schemas of every structured answer the node pipeline asks for.

They are sent to the backend (server-side ``json_schema`` or llama.cpp grammar)
and validated on return; the extra checks that a schema cannot express live in
the ``validate_*`` functions, which raise ``ValueError`` with the precise problem
that the LLM client feeds back in its repair round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Every array has a maxItems and every string a maxLength (``unbounded_fields`` finds a missing
# one; tests walk every answer schema with it): with grammar-constrained decoding (llama.cpp)
# they are what stops a weak model that starts repeating itself ("pip", "pip", ...) from running
# to max_tokens. Long fields (file contents) get a generous bound that the validator enforces;
# the local backend keeps every bound in its grammar (char{0,N}, llm/local_grammar.py), a server
# converting the schema itself gets bounds above GRAMMAR_MAX_LENGTH left out (negotiation.py).
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
        # a node's own steps, not the search's stages (a relay run's model could not tell them apart)
        "phase_guidance": {
            "type": "object",
            "description": "optional notes for this node's own later steps (not the search's stages)",
            "properties": {
                k: {**_text(400), "description": what}
                for k, what in (
                    ("phase1", "installing the dependencies"),
                    ("phase2", "writing the code"),
                    ("phase3", "building it"),
                    ("phase4", "running it and measuring"),
                )
            },
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
                # checked against the sandbox's probed compilers; the build commands compile
                "compiler": {**_text(80), "description": "checked against the sandbox; the commands compile"},
                "commands": {
                    **_list(10, 300),
                    "description": "shell lines run in order by bash -c in the working directory before "
                    "the run commands (flags and output names go here); none for an interpreted language",
                },
            },
            "required": ["language"],
        },
        "run": {
            "type": "object",
            "properties": {
                "commands": _list(10, 300),
                # two relay runs' first drafts failed on descriptions here ("stdout line starting
                # with SUMMARY"): the schema said nothing of what an entry is
                "expected_outputs": {
                    **_list(10, 200),
                    "description": "file paths relative to the working directory that the run writes "
                    "(e.g. metrics.json); each is checked after the run and a missing one fails the "
                    "node: no descriptions, no stdout lines",
                },
            },
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
    # the findings first: the verdict follows what the answer has just said about the run (a
    # grammar-constrained decoder writes the properties in this order). Only the findings (what the
    # run found, with its numbers) become the node's summary; remarks about the review itself
    # (what the output did not show) stay in review.json. ``measurement``: a valid run whose number
    # is noisy or not comparable (a baseline timed once) — no bug, but shown with the node's result
    "properties": {
        "findings": _text(500),
        "remarks": _text(400),
        "measurement": _text(300),
        # a grid's headline: which configuration the primary metric's reported value is for
        # (optional: "" or absent when the run measured one); carried with the value (node summary)
        "headline": _text(200),
        "is_bug": {"type": "boolean"},
    },
    "required": ["findings", "remarks", "measurement", "is_bug"],
}

IDEAS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ideas": {"type": "array", "items": _text(200), "minItems": 1, "maxItems": 8}},
    "required": ["ideas"],
}


def ideas_schema(allowed: int) -> dict[str, Any]:
    """:data:`IDEAS_SCHEMA` allowing ``allowed`` ideas (1 to 8): what the proposal's text asks for."""
    ideas = {**IDEAS_SCHEMA["properties"]["ideas"], "maxItems": max(1, min(8, allowed))}
    return {**IDEAS_SCHEMA, "properties": {"ideas": ideas}}


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
                    "direction": {"type": "string", "enum": ["maximize", "minimize", "none"]},
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
# what a compiled build needs among the answer's files: a source file of some compiled language
# (not checked per language: a CUDA build may compile .cpp too, a Fortran one link C)
COMPILED_SOURCES = (
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".cxx",
    ".hpp",
    ".hh",
    ".cu",
    ".cuh",
    ".f",
    ".f77",
    ".f90",
    ".f95",
    ".f03",
    ".f08",
    ".rs",
    ".go",
    ".s",
    "makefile",
    "cmakelists.txt",
    "cargo.toml",
    "go.mod",
)


def validate_plan(plan: dict[str, Any]) -> None:
    deps = plan.get("dependencies") or {}
    named = {kind: deps.get(kind) or [] for kind in ("apt", "pip", "source")}
    for manager, names in new_packages(deps).items():
        named[f"new ({manager})"] = names
    for kind, items in named.items():
        for item in items:
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
    if (lang in COMPILED or compiler) and not build.get("commands"):
        # nothing compiles but the build commands: a compiler alone would build nothing
        raise ValueError(
            f"build: language {lang or compiler!r} needs build.commands, the shell lines that compile "
            "(e.g. 'gcc -O3 -o prog prog.c'); build.compiler is only checked against the sandbox"
        )
    _check_tools(build, environment, installed)
    from ..execution.hpc_facts import check_module_loads  # modules the probe listed

    check_module_loads(answer, environment)
    check_build_sources(answer)
    check_run_files(answer)


def check_build_sources(answer: dict[str, Any]) -> None:
    """A compiled build (a compiled language, a compiler or build commands with a compiled
    language) with no source file among the answer's files is refused, naming the files there
    are: it cannot compile anything (the embedded model's drafts chose C++ for a Python seed and
    the build failed with ``no input files``)."""
    build = answer.get("build") or {}
    lang = str(build.get("language", "")).lower()
    if lang not in COMPILED and not str(build.get("compiler") or "").strip():
        return
    paths = [str(f.get("path", "")) for f in answer.get("files") or [] if isinstance(f, dict)]
    if any(p.lower().endswith(COMPILED_SOURCES) for p in paths):
        return
    there = ", ".join(repr(p) for p in sorted(paths)) or "none"
    raise ValueError(
        f"build: language {lang or build.get('compiler')!r} but none of the answer's files is a "
        f"source file to compile (files: {there}); build nothing for an interpreted language, "
        "or add the source file"
    )


def _check_tools(
    build: dict[str, Any], environment: dict[str, Any] | None, installed: set[str] | frozenset
) -> None:
    """A compiler the build names (``build.compiler`` or the first word of a build command) that
    the sandbox probe looked for and did not find is refused, naming what is there instead. A
    name the probe does not look for cannot be judged and passes."""
    from ..execution.hpc_facts import module_loads
    from ..execution.sandbox_probe import TOOLS, available_tools

    found = available_tools(environment)
    if found is None:
        return
    present, where = found
    present = present | set(installed)
    named = [("build.compiler", str(build.get("compiler") or ""))]
    named += [(f"build.commands[{i}]", str(c)) for i, c in enumerate(build.get("commands") or [])]
    loads = any(module_loads(str(c)) for c in build.get("commands") or [])  # a module may add it
    for key, text in named:
        words = text.split()
        tool = words[0].rsplit("/", 1)[-1] if words else ""
        if tool in TOOLS and tool not in present and not loads:
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


NEW_PACKAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": _text(100),
        "manager": {"type": "string", "enum": ["pip", "apt"]},
        "reason": _text(200),
    },
    "required": ["name", "manager", "reason"],
}
NEW_PACKAGES_MAX = 10
# the languages a build can name without a compiler, and which probed tools compile which language
INTERPRETED_LANGUAGES = ("python", "bash", "sh")
COMPILERS_OF = {
    "c": ("gcc", "cc", "clang", "icx", "icc", "mpicc"),
    "c++": ("g++", "c++", "clang++", "icpx", "mpicxx"),
    "fortran": ("gfortran", "ifx", "ifort", "nvfortran", "mpifort", "mpif90"),
    "cuda": ("nvcc",),
    "rust": ("rustc", "cargo"),
    "go": ("go",),
}


def probed_tools(environment: dict[str, Any] | None) -> list[str] | None:
    """The compilers and build tools the sandbox probe found, sorted; None without a probe."""
    from ..execution.sandbox_probe import TOOLS, available_tools

    found = available_tools(environment)
    return None if found is None else sorted(t for t in found[0] if t in TOOLS)


def _enum_list(names: list[str], limit: int, description: str) -> dict[str, Any]:
    if not names:  # nothing to choose from: the list must stay empty
        return {"type": "array", "items": _text(100), "maxItems": 0, "description": description}
    return {
        "type": "array",
        "items": {"type": "string", "enum": names},
        "maxItems": limit,
        "description": description,
    }


def constrain_dependencies(
    schema: dict[str, Any], environment: dict[str, Any] | None, network: bool
) -> dict[str, Any]:
    """``schema`` (a plan or merged code schema) with its dependency lists chosen from what the
    sandbox probe found: ``pip`` an enum of the installed Python packages, ``apt`` an enum of the
    installed tools (the dependency check accepts a tool on PATH), and a ``new`` list of packages
    to install, each with a reason — allowed only when the sandbox has network (``maxItems`` 0
    otherwise). An enum, so a grammar (llama.cpp) or a server-side JSON schema cannot produce an
    invented package and the client's schema check refuses one otherwise. Unchanged without a full
    probe (Slurm, a failed probe, a cut package list): nothing to choose from."""
    packages = probed_packages(environment)
    tools = probed_tools(environment)
    if packages is None or tools is None:
        return schema
    new: dict[str, Any] = {
        "type": "array",
        "items": NEW_PACKAGE_SCHEMA,
        "maxItems": NEW_PACKAGES_MAX if network else 0,
        "description": "packages the sandbox does not have, each with why the code needs it"
        if network
        else "must stay empty: the sandbox has no network, nothing new can be installed",
    }
    deps = schema["properties"]["dependencies"]
    props = {
        **deps["properties"],
        "pip": _enum_list(packages, 20, "installed Python packages the code imports"),
        "apt": _enum_list(tools, 20, "installed tools the build or run needs"),
        "new": new,
    }
    if not network:  # a source download cannot work either
        props["source"] = {**_STR_LIST, "maxItems": 0}
    return {
        **schema,
        "properties": {**schema["properties"], "dependencies": {**deps, "properties": props}},
    }


def constrain_build(schema: dict[str, Any], environment: dict[str, Any] | None) -> dict[str, Any]:
    """``schema`` (a code answer's) with ``build`` limited to the probed toolchains: either an
    interpreted language with no build commands, or a compiled language whose compiler the probe
    found, naming that compiler. Unchanged without a probe."""
    tools = probed_tools(environment)
    if tools is None:
        return schema
    build = schema["properties"]["build"]
    props = build["properties"]
    interpreted = {
        "type": "object",
        "properties": {
            "language": {"type": "string", "enum": list(INTERPRETED_LANGUAGES)},
            "commands": {**props["commands"], "maxItems": 0},
        },
        "required": ["language"],
    }
    compiled_langs = [lang for lang, cc in COMPILERS_OF.items() if set(cc) & set(tools)]
    compilers = sorted({c for lang in compiled_langs for c in COMPILERS_OF[lang] if c in tools})
    options = [interpreted]
    if compiled_langs:
        options.append(
            {
                "type": "object",
                "properties": {
                    **props,
                    "language": {"type": "string", "enum": compiled_langs},
                    "compiler": {"type": "string", "enum": compilers},
                    "commands": {**props["commands"], "minItems": 1},
                },
                "required": ["language", "compiler", "commands"],
            }
        )
    constrained = {"anyOf": options} if len(options) > 1 else options[0]
    return {**schema, "properties": {**schema["properties"], "build": constrained}}


def constrain_run(
    schema: dict[str, Any], files: list[str], python: str, known: Sequence[str] = ()
) -> dict[str, Any]:
    """``schema`` with ``run.commands`` chosen from the commands that run an existing file (``known``,
    e.g. the parent's run commands, then ``<python> <file>`` for each Python file among ``files``)
    and ``run.expected_outputs`` from ``metrics.json`` (the metrics contract): for a constrained
    decoder answering with edits against existing files, whose paths are known in advance."""
    commands = list(dict.fromkeys([*known, *(f"{python} {f}" for f in files if f.endswith(".py"))]))
    if not commands:
        return schema
    run = schema["properties"]["run"]
    props = {
        **run["properties"],
        # as many commands as the parent ran (one for a seed file): a small model repeats itself
        "commands": {
            "type": "array",
            "items": {"type": "string", "enum": commands},
            "minItems": 1,
            "maxItems": max(1, min(3, len(known))),
        },
        "expected_outputs": {
            "type": "array",
            "items": {"type": "string", "enum": ["metrics.json"]},
            "maxItems": 1,
        },
    }
    return {**schema, "properties": {**schema["properties"], "run": {**run, "properties": props}}}


def with_ntasks(schema: dict[str, Any], max_ntasks: int) -> dict[str, Any]:
    """``schema`` whose ``run`` may ask for ``ntasks`` MPI ranks, up to ``max_ntasks``: offered only
    where they can be had (``exec.backend: slurm`` with ``exec.slurm.max_ntasks`` > 1)."""
    if max_ntasks <= 1:
        return schema
    run = schema["properties"]["run"]
    ntasks = {
        "type": "integer",
        "minimum": 1,
        "maximum": max_ntasks,
        "description": "MPI ranks: each run command is started this many times by the MPI launcher "
        "in one Slurm job; 1 or absent: one process",
    }
    props = {**run["properties"], "ntasks": ntasks}
    return {**schema, "properties": {**schema["properties"], "run": {**run, "properties": props}}}


_SCRIPT_SUFFIXES = (".py", ".sh")


def check_run_files(answer: dict[str, Any]) -> None:
    """A run command that names a script (``*.py``, ``*.sh``, by a relative path outside
    ``resources/``) that is not among the answer's files is refused, naming the files there are."""
    paths = {str(f.get("path", "")).lstrip("./") for f in answer.get("files") or [] if isinstance(f, dict)}
    for i, cmd in enumerate((answer.get("run") or {}).get("commands") or []):
        for word in str(cmd).split():
            word = word.strip("'\"")
            if (
                word.endswith(_SCRIPT_SUFFIXES)
                and not word.startswith(("/", "-", "$", "resources/", "../"))
                and "=" not in word
                and word.lstrip("./") not in paths
                and not any(p.endswith("/" + word.lstrip("./")) for p in paths)  # after a `cd`
            ):
                there = ", ".join(repr(p) for p in sorted(paths)) or "none"
                raise ValueError(
                    f"run.commands[{i}]: {word!r} is not a file of this answer (files: {there}); "
                    "run one of them or add the file"
                )


def new_packages(deps: dict[str, Any]) -> dict[str, list[str]]:
    """The ``new`` entries of a plan's dependencies by manager (``{"pip": [...], "apt": [...]}``)."""
    out: dict[str, list[str]] = {"pip": [], "apt": []}
    for item in deps.get("new") or []:
        if isinstance(item, dict) and item.get("manager") in out and str(item.get("name", "")).strip():
            out[item["manager"]].append(str(item["name"]).strip())
    return out
