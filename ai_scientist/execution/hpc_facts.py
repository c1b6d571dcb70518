"""What HPC code needs beyond the CPU: NUMA layout, MPI, environment modules; parsed, bounded.

Both probes (the host's, :mod:`.environment`, and the sandbox's, :mod:`.sandbox_probe`, which
under Slurm runs as a job on a compute node) feed the same raw text to these functions:

- NUMA: one ``(node, cpulist)`` per ``/sys/devices/system/node/node*/cpulist`` (or ``lscpu``);
- MPI: the version lines of the launchers (``mpirun``/``mpiexec --version``, ``srun --version``)
  and which compiler wrappers exist, summarised as the implementation and its version;
- environment modules (Lmod / Environment Modules): the init script that defines the ``module``
  shell function, the system's version line, and ``module -t avail``, kept to ``MAX_MODULES``.

A build or run line may load modules (``module load gcc/12.2.0 && gcc ...``): ``check_module_loads``
refuses a module the probe did not list, and ``modules_env`` gives the command environment that
defines ``module`` in each ``bash -c`` line (``BASH_ENV`` = the probed init script).
"""

from __future__ import annotations

import re
from typing import Any

MAX_MODULES = 1000  # names kept from ``module -t avail``; a site lists a few hundred to thousands
MAX_NUMA_NODES = 64
MPI_LAUNCHERS = ("mpirun", "mpiexec", "srun")
MPI_WRAPPERS = ("mpicc", "mpicxx", "mpifort", "mpif90")
# Variables of the job's environment that make the site's module system work inside the inner
# sandbox (where it lives, its search path); the loaded modules' state is left behind on purpose
MODULE_VARS = ("MODULESHOME", "MODULEPATH", "MODULEPATH_ROOT", "BASH_FUNC_module%%", "BASH_FUNC_ml%%")
MODULE_VAR_PREFIXES = ("LMOD_", "MODULES_")

_MODULE = re.compile(r"^([A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*)(?:\s*\([^)]*\)|\s*<[^>]*>)*$")
_VERSION = re.compile(r"\d+(?:\.\d+)+")
_SEPARATORS = re.compile(r"&&|\|\||;|\|")


def numa_layout(rows: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``[{"node", "cpus", "count"}]`` from ``(node number, kernel CPU list)`` pairs, by node."""
    from .cpu_facts import _cpu_count

    out = []
    for node, cpus in rows[:MAX_NUMA_NODES]:
        count = _cpu_count(cpus)
        if node.strip().isdigit() and count:
            out.append({"node": int(node), "cpus": cpus.strip()[:80], "count": count})
    return sorted(out, key=lambda n: n["node"])


def mpi_summary(tools: dict[str, str]) -> dict[str, Any]:
    """Implementation and version (from ``mpirun``/``mpiexec --version``), launchers and wrappers
    among ``tools`` (name -> version line); ``{}`` when none of them is there."""
    launchers = [t for t in MPI_LAUNCHERS if t in tools]
    wrappers = [t for t in MPI_WRAPPERS if t in tools]
    if not launchers and not wrappers:
        return {}
    implementation = None
    for t in ("mpirun", "mpiexec"):
        implementation = implementation or _mpi_implementation(tools.get(t) or "")
    return {"implementation": implementation, "launchers": launchers, "wrappers": wrappers}


def _mpi_implementation(text: str) -> str | None:
    low = text.lower()
    if "open mpi" in low or "openrte" in low:
        name = "Open MPI"
    elif "intel(r) mpi" in low:
        name = "Intel MPI"
    elif "mvapich" in low:
        name = "MVAPICH"
    elif "hydra" in low or "mpich" in low:
        name = "MPICH"
    else:
        return None
    m = _VERSION.search(text)
    return f"{name} {m.group(0)}" if m else name


def parse_modules(init: str, system: str, lines: list[str]) -> dict[str, Any]:
    """The module system from the probe's raw lines: the init script (``""`` when ``module`` came
    as a function in the environment), the version line, and the names of ``module -t avail``
    (directory headers ``/path:`` and markers such as ``(default)`` dropped), sorted, at most
    ``MAX_MODULES``; ``truncated`` says the list was cut, so a name missing from it proves nothing."""
    names: set[str] = set()
    for line in lines:
        m = _MODULE.match(line.strip())
        if m and not line.strip().endswith(":"):
            names.add(m.group(1))
    kept = sorted(names)[:MAX_MODULES]
    return {
        "init": init,
        "system": system,
        "available": kept,
        "count": len(names),
        "truncated": len(names) > len(kept) or len(lines) >= MAX_MODULES,
    }


def modules_view(modules: dict[str, Any] | None, limit: int = 60) -> dict[str, Any] | None:
    """The modules grouped by name for the prompt: ``{"groups": [(name, [versions])], "more": n}``,
    at most ``limit`` names (the rest counted)."""
    if not modules or not modules.get("available"):
        return None
    groups: dict[str, list[str]] = {}
    for full in modules["available"]:
        name, _, version = full.partition("/")
        groups.setdefault(name, [])
        if version:
            groups[name].append(version)
    items = sorted(groups.items())
    return {"groups": items[:limit], "more": max(0, len(items) - limit), "count": modules.get("count")}


def module_loads(command: str) -> list[str]:
    """The modules a shell line loads: every ``module load|add A B`` (also ``ml A``) among its
    ``&&`` / ``;`` / ``|`` separated parts, options (``-q``) skipped."""
    found = []
    for part in _SEPARATORS.split(command):
        words = part.split()
        if words[:1] == ["ml"] and len(words) > 1 and not words[1].startswith("-"):
            args = words[1:]  # ``ml A`` loads A; ``ml avail`` etc. are other commands
            if args[0] in ("avail", "list", "spider", "show", "purge", "unload", "swap", "save", "restore"):
                continue
            if args[0] in ("load", "add"):
                args = args[1:]
        elif words[:1] == ["module"]:
            rest = [w for w in words[1:] if not w.startswith("-")]  # ``module -q load A``
            if not rest or rest[0] not in ("load", "add"):
                continue
            args = rest[1:]
        else:
            continue
        found += [w.strip("'\"") for w in args if not w.startswith("-")]
    return found


def check_module_loads(answer: dict[str, Any], environment: dict[str, Any] | None) -> None:
    """A ``module load`` in a build or run line naming a module the probe did not list is refused
    (ValueError naming the line, the module and what there is). ``name`` alone matches any
    ``name/version`` (the site's default). Unjudged: no probe, a failed one, or a cut list."""
    where, modules = _probed_modules(environment)
    if where is None:
        return
    lines = [
        (f"build.commands[{i}]", c) for i, c in enumerate((answer.get("build") or {}).get("commands") or [])
    ]
    lines += [
        (f"run.commands[{i}]", c) for i, c in enumerate((answer.get("run") or {}).get("commands") or [])
    ]
    for key, text in lines:
        for name in module_loads(str(text)):
            if modules is None:
                raise ValueError(
                    f"{key}: `module load {name}`, but {where} has no environment modules (no `module` "
                    "command); build with the compilers and libraries listed, without `module`"
                )
            if modules.get("truncated"):
                continue
            available = modules.get("available") or []
            if name in available or any(a.startswith(name + "/") for a in available):
                continue
            stem = name.split("/")[0]
            same = [a for a in available if a.split("/")[0] == stem]
            there = ", ".join(same or available[:30]) or "none"
            raise ValueError(
                f"{key}: module {name!r} is not available on {where}; "
                + (f"versions of {stem} there: {there}" if same else f"modules there: {there}")
                + ". Load one of those, or none"
            )


def _probed_modules(environment: dict[str, Any] | None) -> tuple[str | None, dict[str, Any] | None]:
    """(where the code runs, its module facts or None) from a probed sandbox; (None, None) when
    it was not probed (nothing can be judged)."""
    sandbox = (environment or {}).get("sandbox")
    if not isinstance(sandbox, dict) or not sandbox.get("ok"):
        return None, None
    if sandbox.get("backend") == "slurm":
        where = f"the compute node (partition {sandbox.get('partition') or 'default'})"
    else:
        where = f"the {sandbox.get('backend')} sandbox"
    modules = sandbox.get("modules")
    return where, modules if isinstance(modules, dict) else None


def modules_env(environment: dict[str, Any] | None) -> dict[str, str]:
    """The command environment that defines ``module`` in every ``bash -c`` line: ``BASH_ENV`` set
    to the init script the sandbox probe found (bash reads it before a non-interactive command);
    ``{}`` without one (no modules, or ``module`` already a function of the environment)."""
    sandbox = (environment or {}).get("sandbox")
    modules = sandbox.get("modules") if isinstance(sandbox, dict) and sandbox.get("ok") else None
    init = modules.get("init") if isinstance(modules, dict) else None
    return {"BASH_ENV": init} if isinstance(init, str) and init.startswith("/") else {}


def job_module_environ(environ: dict[str, str]) -> dict[str, str]:
    """The module system's variables of a Slurm job's environment (``MODULE_VARS``, ``LMOD_*``,
    ``MODULES_*``), which the inner sandbox's clean environment would otherwise drop."""
    return {k: v for k, v in environ.items() if k in MODULE_VARS or k.startswith(MODULE_VAR_PREFIXES)}
