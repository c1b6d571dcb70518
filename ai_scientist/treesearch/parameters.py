"""The parameters an experiment's code exposes, read from its files, for the idea proposer.

A tuning proposal written without the code invents names (``lr`` for a C program whose only
knobs are compile-time tiles). So the proposer is shown what the code itself lets one change:

- command-line options: argparse ``add_argument`` (with its default), ``sys.argv[i]`` / ``argv[i]``;
- environment variables read: ``os.environ[...]``, ``os.environ.get``, ``os.getenv``, ``getenv``;
- named constants: module-level UPPER_CASE assignments of a literal (Python, tuples included),
  ``#define NAME value``, top-level ``const`` / ``constexpr`` scalars (C, C++), with their values;
- hard-coded grids: a Python loop over a literal tuple or list of numbers (``for l2 in (0, 0.1)``):
  a value the method sweeps that no option or constant exposes, which an idea may still change;
- arrays of values: C / C++ ``static const int TILES[] = {16, 32, n};`` (several declarators on a
  line, ``std::array`` / ``std::vector`` initialisers), Python module-level lists or tuples of numbers
  (``tiles = [16, 32]``, ``np.array([...])``); C ``enum { TILE = 64 };`` constants;
- the build: compile flags of each compiler line of ``build.commands`` (``-O3 -march=native``),
  ``-DNAME=value`` defines and ``CFLAGS=...`` assignments there — a relay run's proposals had to
  invent "tiles_sweep" and "CFLAGS" for the knobs a C benchmark sweeps.

Pure and bounded: at most ``limit`` entries of at most ``ENTRY_CHARS`` characters each.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base.pysource import parse_python

# a setting a tune writes whole (HEADLINE = {'l2': 0.01, ..., 'schedule': 'decay_avg'}) fits: at 60
# characters its last key was cut, and a proposal could not name the whole value (relay s10 ln 010)
ENTRY_CHARS = 240
VALUE_CHARS = 180
LIMIT = 40

_UPPER = re.compile(r"^[A-Z][A-Z0-9_]*$")
_ENV = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|getenv|std::getenv|secure_getenv)\s*\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""(?:\s*,\s*([^)\n]{1,60}))?|os\.environ\s*\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]"""
)
_ARGV = re.compile(r"\b(?:sys\.)?argv\s*\[\s*(\d+)\s*\]")
# an object-like macro with a value (``#define TILE 64``; a function-like ``MIN(a,b)`` has "(" after
# the name, an include guard no value)
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)[ \t]+(\S[^\n]*?)\s*(?://.*|/\*.*)?$", re.M)
# a top-level C / C++ constant: no indentation, `static`/`constexpr`/`const`, a scalar type
_CONST = re.compile(
    r"^(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?"
    r"(?:int|long|short|size_t|float|double|char|bool|u?int\d+_t|auto)\s+([A-Za-z_]\w*)\s*=\s*([^;\n]{1,60});",
    re.M,
)
# a C / C++ array of values written out in the code, at any indentation, each declarator of a line
# (``int tiles_sweep[] = {16, 32, 64, n}, tiles_one[] = {64};``) or a std::array / std::vector
# initialiser: the values a method sweeps; elements are numbers or names (``n``), nothing nested
_ELEMENTS = r"\{\s*([-+\w.]+(?:\s*,\s*[-+\w.]+)*)\s*,?\s*\}"
_C_ARRAY = re.compile(r"\b([A-Za-z_]\w*)\s*\[[^\]\n]*\]\s*=\s*" + _ELEMENTS)
_CPP_ARRAY = re.compile(r"\bstd::(?:array|vector)\s*<[^>\n]*>\s*([A-Za-z_]\w*)\s*(?:=\s*)?\{?\s*" + _ELEMENTS)
_ENUM = re.compile(r"\benum\b[^{;]*\{([^}]*)\}")
_ENUM_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([^,]+?)\s*$")
# compilers whose flags in a build command are the build's knobs (the ``-o`` output and include /
# library paths are not: they name files)
_COMPILER = re.compile(
    r"^(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|icc|icpc|icx|icpx|nvcc|nvc|nvc\+\+|mpicc|mpicxx|mpic\+\+"
    r"|mpiCC|gfortran|ifort|ifx|nvfortran|hipcc|dpcpp)(?:-\d+)?$"
)
_NOT_KNOBS = ("-o", "-c", "-I", "-L", "-isystem", "-MF", "-MT", "-MD", "-MMD")
_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
_PY_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*([^\n#]+)", re.M)


@dataclass(frozen=True)
class Parameter:
    """One knob of the code: ``name``, its ``kind`` (option, environment, constant, argv) and
    its value or default as written (``""`` when none), in ``path``."""

    name: str
    kind: str
    value: str
    path: str

    def line(self) -> str:
        value = _clip(self.value, VALUE_CHARS)
        text = {
            "option": f"{self.name} (command-line option{', default ' + value if value else ''})",
            "environment": f"{self.name} (environment variable{', default ' + value if value else ''})",
            "argv": f"{self.name} (command-line argument)",
            "constant": f"{self.name} = {value}",
            "grid": f"{self.name} in {value} (a grid hard-coded in a loop)",
            "array": f"{self.name} = {value} (an array of values in the code)",
            "flags": f"{self.name}: {value}",
        }[self.kind]
        return _clip(f"{text} [{self.path}]", ENTRY_CHARS)


def _clip(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


# a constant named for a cache whose value is one of the machine's cache sizes is a fact of the
# machine, not a knob (a relay run's proposer was offered L1D_KIB = 48 beside the tile sizes)
_CACHE_NAME = re.compile(r"(?:^|_)(?:L[1-4][DI]?|LLC|CACHE)(?:_|$)|CACHE", re.I)


def machine_sizes(environment: dict[str, Any] | None) -> set[float]:
    """The cache sizes the environment record reports (``cpu.caches``, the sandbox's when it was
    probed), in bytes, KiB and MiB, and the cache line sizes: the values a constant named for a
    cache repeats rather than chooses."""
    out: set[float] = set()
    env = environment if isinstance(environment, dict) else {}
    for cpu in ((env.get("sandbox") or {}).get("cpu"), env.get("cpu")):
        for cache in ((cpu or {}).get("caches") or {}).values() if isinstance(cpu, dict) else ():
            size = cache.get("bytes") if isinstance(cache, dict) else None
            if isinstance(size, (int, float)) and size > 0:
                out |= {float(size), size / 1024, size / 1024**2}
            line = cache.get("line") if isinstance(cache, dict) else None
            if isinstance(line, (int, float)) and line > 0:
                out.add(float(line))
    return out


def _number(text: str) -> float | None:
    try:
        return float(text.strip().rstrip("uUlLfF") or "x")
    except ValueError:
        return None


def not_a_knob(p: Parameter, machine: set[float], labels: set[str]) -> bool:
    """Whether ``p`` is no setting an idea may change: a name starting with ``_`` (a feature-test
    macro such as ``_POSIX_C_SOURCE``, a private name), a constant named for a cache whose value is
    one of the ``machine``'s cache sizes (:func:`machine_sizes`), or a constant holding one of the
    metric's dataset ``labels`` (a label, not a setting) — a relay run's C program offered all three
    beside its tile sizes (request 010)."""
    if p.name.startswith("_"):
        return True
    if p.kind != "constant":
        return False
    if p.value.strip().strip("'\"") in labels:
        return True
    value = _number(p.value)
    return value is not None and value in machine and bool(_CACHE_NAME.search(p.name))


def code_parameters(
    files: dict[str, str],
    limit: int = LIMIT,
    note: Callable[[Parameter], str] | None = None,
    build: Any = None,
    machine: set[float] | None = None,
    labels: set[str] | None = None,
    fixed: bool | None = None,
    commands: list[str] | None = None,
) -> list[str]:
    """One line per parameter the ``files`` (path -> text) expose, in file order, each name once,
    then those of the code answer's ``build`` section (:func:`build_parameters`), leaving out those
    that are no knob (:func:`not_a_knob`: ``machine``, the environment's cache sizes; ``labels``,
    the metric's dataset labels); at most ``limit`` lines, the last saying how many more were
    found. ``note`` adds a remark to a parameter's line (e.g. that it belongs to the evaluation
    protocol), "" for none; with ``fixed`` True only those it remarks on (what the protocol or the
    headline fixes), False only the others (what an idea may change)."""
    found = [
        p
        for p in parameters(files)
        if not not_a_knob(p, machine or set(), labels or set())
        and not _names_files(p, commands or [], _program_sources(files, commands or []))
    ]
    seen = {(p.name, p.kind) for p in found}
    found += [p for p in build_parameters(build) if (p.name, p.kind) not in seen]
    shared = sharing_notes(found, files, commands or [])
    if note is not None and fixed is not None:  # each list holds its own kind
        found = [p for p in found if bool(note(p)) == fixed]
    lines = [
        p.line() + "".join(f" — {n}" for n in (note(p) if note else "", shared.get(p, "")) if n)
        for p in found[:limit]
    ]
    if len(found) > limit:
        lines.append(f"... {len(found) - limit} more parameters not listed")
    return lines


_C_SOURCES = (".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".cu", ".cuh")


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def sharing_notes(found: list[Parameter], files: dict[str, str], commands: list[str]) -> dict[Parameter, str]:
    """What a one-line change of a parameter also changes, by parameter ("" none): a C / C++
    compile-time constant names the functions that use it (every condition running them gets the
    new value: relay s9 mm 015 offered ``#define NR 16``, shared by every packed condition, as a
    one-line tunable); a constant whose value a run command also passes to another program (the
    whole argument or the first of a comma list) names both places, which must change together
    (010, 011: ``HEADLINE_TILE = 64`` in make_metrics.py and the first of mm.c's ``argv[4]``)."""
    notes: dict[Parameter, list[str]] = {}

    for p in found:
        if p.kind == "constant" and p.path.endswith(_C_SOURCES):
            users = c_functions_using(files.get(p.path, ""), p.name)
            if users and users != ["main"]:
                them = "them" if len(users) > 1 else "it"
                notes.setdefault(p, []).append(
                    f"compile-time, used in {', '.join(users)}: a new value changes every condition that runs {them}"
                )
    constants = [p for p in found if p.kind == "constant" and _number(p.value) not in (None, 0, 1)]
    sources = _program_sources(files, commands)
    places: dict[Parameter, list[str]] = {}  # a constant -> where a run command sets it again
    for line in commands:
        words = _run_words(line)
        source = sources.get(_stem(words[0])) if words else None
        for k, word in enumerate(words[1:], start=1):
            first = word.split(",")[0]
            reads = " ".join(ln for ln in files.get(source or "", "").splitlines() if f"argv[{k}]" in ln)
            for p in constants:
                if p.path == source or _number(first) != _number(p.value) or not _same_thing(p.name, reads):
                    continue
                places.setdefault(p, []).append(
                    f"argv[{k}] of {words[0]}" + (f" (the first of {word})" if first != word else "")
                )
                for q in found:
                    if q.kind == "argv" and q.name == f"argv[{k}]" and q.path == source:
                        notes.setdefault(q, []).append(
                            f"its value {first} is also {p.name} in {p.path}: change both together"
                        )
    for p, where in places.items():
        notes.setdefault(p, []).append(
            f"{p.value.strip()} is set again as {', '.join(dict.fromkeys(where))}: "
            + ("change both together" if len(set(where)) == 1 else "change them together")
        )
    return {p: "; ".join(dict.fromkeys(n)) for p, n in notes.items()}


def _program_sources(files: dict[str, str], commands: list[str]) -> dict[str, str]:
    """Program stem -> the source file it runs: a file of that stem, or the source a build line
    compiles into it (``build: gcc -O3 -o mm_native mm.c``)."""
    out = {_stem(path): path for path in files}
    for line in commands:
        if not line.startswith("build: "):
            continue
        try:
            words = shlex.split(line.removeprefix("build: "))
        except ValueError:
            continue
        built = [w for w in words if w in files]
        if "-o" in words[:-1] and len(built) == 1:
            out[_stem(words[words.index("-o") + 1])] = built[0]
    return out


def _same_thing(name: str, text: str) -> bool:
    """Whether a word of the constant ``name`` (``HEADLINE_TILE``: "headline", "tile") names the
    variable the program reads the argument into (``parse_csv(argv[4], tiles, 16)``)."""
    words = {w.rstrip("s") for w in re.split(r"[_\W\d]+", name.lower()) if len(w.rstrip("s")) >= 3}
    return any(re.search(rf"\b{re.escape(w)}", text, re.I) for w in words)


_FILE_ARG = re.compile(r"/|\.[A-Za-z][A-Za-z0-9]{0,4}$")


def _names_files(p: Parameter, commands: list[str], sources: dict[str, str] | None = None) -> bool:
    """A command-line argument whose every value in the run commands that run ``p``'s file (by
    name: ``python3 analyze.py``, ``./mm`` for ``mm.c``) is a file name (``results.json``,
    ``out/x.csv``): where the program reads or writes, not a setting (relay s8 mm 010 offered an
    analysis script's input and output files as knobs; s9 mm 010, 020: ``./mm_native res.json``
    of ``mm.c``)."""
    if p.kind != "argv" or not commands:
        return False
    # the program's own name, or a binary a build line compiles from it (``-o mm_native mm.c``)
    mine = [
        line
        for line in commands
        if (words := _run_words(line))
        and _stem((sources or {}).get(_stem(words[0]), words[0])) == _stem(p.path)
    ]
    values = argv_values(mine).get(p.name, [])
    return bool(values) and all(_number(v) is None and _FILE_ARG.search(v) for v in values)


def _run_words(line: str) -> list[str]:
    """A ``run: ...`` line's words from the program on (an interpreter dropped); [] otherwise."""
    if not line.startswith("run: "):
        return []
    try:
        words = shlex.split(line.removeprefix("run: "))
    except ValueError:
        return []
    # one command: up to the first shell operator (``|| echo skipped``, ``> log``), after a
    # ``timeout [options] DURATION`` guard (relay s9 mm: ``timeout 300 ./mm_generic ...``)
    words = words[: next((i for i, w in enumerate(words) if _SHELL_OP.match(w)), len(words))]
    if words and words[0] == "timeout":
        rest = [w for w in words[1:] if not w.startswith("-")]
        words = rest[1:] if rest else []
    if words and re.search(r"(?:^|/)(?:python[\d.]*|bash|sh|perl|Rscript|julia|node)$", words[0]):
        words = words[1:]
    return words


_SHELL_OP = re.compile(r"^(?:\|\|?|&&?|;|\d?>>?|<|2>&1)$")


def argv_values(commands: list[str]) -> dict[str, list[str]]:
    """``argv[k]`` -> the values the run commands (``"run: ./mm O3 1024 256"``, as
    ``CodeAnswer.commands`` gives them) pass at position k, each once; an interpreter's script
    (``python3 x.py``) is argv[0]."""
    out: dict[str, list[str]] = {}
    for line in commands:
        words = _run_words(line)
        for k, word in enumerate(words[1:], start=1):
            out.setdefault(f"argv[{k}]", [])
            if word not in out[f"argv[{k}]"]:
                out[f"argv[{k}]"].append(word)
    return out


def timed_commands(commands: list[str], took: list[tuple[str, float | None]]) -> list[str]:
    """``commands`` (``"run: ./mm 256,512,1024"``, as :func:`argv_values` reads them) with the
    wall time each run line took (``took``: (command, seconds) as the node's run record has them):
    what an extra, larger size would cost can only be estimated from what the present ones took
    (relay s9 mm 020, 021: a stage-3 proposal added n=4096 without its cost)."""
    seconds = {cmd: s for cmd, s in took if s is not None}
    return [
        f"{c} (took {seconds[c[5:]]:.3g} s)" if c.startswith("run: ") and c[5:] in seconds else c
        for c in commands
    ]


def headline_fixes(
    p: Parameter,
    *,
    argv: dict[str, list[str]],
    headline: tuple[str, str],
    config: str,
    protocol_numbers: set[float],
) -> str:
    """Why the headline fixes ``p`` ("" when it does not): a command-line argument whose value
    in the run commands (``argv``, :func:`argv_values`) is a problem size the headline is named
    for (``headline``: its metric name and dataset label, "speedup_n1024") or one of the protocol's
    values (``protocol_numbers``); a grid or array the headline takes its best over (``config``,
    the review's "blocked at best swept tile 64" names it). A relay run's tuner was offered
    the size arguments and the swept tile grid as knobs (s7 mm2 010, 011)."""
    if p.kind == "argv":
        named = " ".join(headline)
        sizes = [
            v
            for v in argv.get(p.name, [])
            if (x := _number(v)) is not None
            # 0 and 1 are too common (a flag, a thread count) to be a protocol's size by value alone
            and (
                (x in protocol_numbers and x not in (0, 1))
                or re.search(rf"(?<![\d.]){re.escape(v)}(?![\d.])", named)
            )
        ]
        if sizes:
            return f"the problem size ({', '.join(sizes)}) the headline {headline[0]} is measured at"
        return ""
    listed = p.kind in ("grid", "array") or (p.kind == "constant" and p.value.lstrip()[:1] in ("[", "("))
    if listed and re.search(r"\bbest\b", config, re.I):
        stems = [w.rstrip("s") for w in re.split(r"[_\W\d]+", p.name.lower()) if len(w.rstrip("s")) >= 3]
        if any(re.search(rf"\b{re.escape(w)}", config, re.I) for w in stems):
            return (
                "the headline is the best over it (its configuration: under the evaluation protocol); "
                "another value goes in as an extra metric beside it"
            )
    return ""


def parameters(files: dict[str, str]) -> list[Parameter]:
    """Every parameter the ``files`` expose, in file order, each (name, kind) once (unbounded:
    the evaluation protocol compares them, runloop/protocol.py)."""
    found: list[Parameter] = []
    seen: set[tuple[str, str, str]] = set()
    for path, text in files.items():
        for p in _python(path, text) if path.endswith(".py") else _generic(path, text):
            # each program's argv[k] is its own (relay s9 mm: mm.c's argv[1] was hidden behind a
            # Python script's)
            key = (p.name, p.kind, p.path if p.kind == "argv" else "")
            if key not in seen:
                seen.add(key)
                found.append(p)
    return found


def _python(path: str, text: str) -> list[Parameter]:
    tree = parse_python(text)
    if tree is None:
        return _generic(path, text)
    out: list[Parameter] = []
    for stmt in tree.body:  # module-level constants: NAME = literal, A, B = 1, 2
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                out += _constants(path, target, stmt.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _attr(node.func).endswith("add_argument"):
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if flags:
                name = max(flags, key=len)
                out.append(Parameter(name, "option", _source(text, default), path))
    out += _env_and_argv(path, text)
    out += _grids(path, tree)
    out += _py_arrays(path, tree, {p.name for p in out if p.kind == "constant"})
    return out


def _numbers(node: ast.expr) -> bool:
    """A literal list or tuple of at least two numbers."""
    return (
        isinstance(node, ast.List | ast.Tuple)
        and len(node.elts) >= 2
        and all(
            isinstance(e, ast.Constant)
            and isinstance(e.value, int | float)
            and not isinstance(e.value, bool)
            or isinstance(e, ast.UnaryOp)
            and isinstance(e.operand, ast.Constant)
            for e in node.elts
        )
    )


def _py_arrays(path: str, tree: ast.Module, constants: set[str]) -> list[Parameter]:
    """Module-level ``name = [numbers]`` (any case; an UPPER_CASE one is a constant already) and
    ``NAME = np.array([numbers])`` / ``array('d', [numbers])``: the values the code sweeps."""
    out = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0], stmt.value
        if not isinstance(target, ast.Name) or target.id in constants:
            continue
        if isinstance(value, ast.Call):
            value = next((a for a in value.args if _numbers(a)), value)
        if _numbers(value):
            out.append(Parameter(target.id, "array", ast.unparse(value), path))
    return out


def _grids(path: str, tree: ast.Module) -> list[Parameter]:
    """``for name in (<numbers>)`` loops: the grids the code sweeps, as written."""
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple | ast.List)
            and len(node.iter.elts) >= 2
            and all(
                isinstance(e, ast.Constant)
                and isinstance(e.value, int | float)
                and not isinstance(e.value, bool)
                for e in node.iter.elts
            )
        ):
            out.append(Parameter(node.target.id, "grid", ast.unparse(node.iter), path))
    return out


def _constants(path: str, target: ast.expr, value: ast.expr | None) -> list[Parameter]:
    if value is None:
        return []
    if isinstance(target, ast.Name) and _UPPER.match(target.id) and _is_literal(value):
        return [Parameter(target.id, "constant", ast.unparse(value), path)]
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _constants(path, t, v)]
    return []


def _is_literal(value: ast.expr) -> bool:
    # dict(l2=0.01, lr=0.01): a configuration written as a call is a literal too (relay s8 ln 010:
    # the headline's MAIN = dict(...) was missing from the parameters a tuning proposal saw)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return not value.args and all(k.arg and _is_literal(k.value) for k in value.keywords)
    try:
        ast.literal_eval(value)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _attr(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _source(text: str, node: ast.expr | None) -> str:
    if node is None:
        return ""
    return ast.get_source_segment(text, node) or ast.unparse(node)


def _env_and_argv(path: str, text: str) -> list[Parameter]:
    out = []
    for m in _ENV.finditer(text):
        name = m.group(1) or m.group(3)
        default = (m.group(2) or "").strip()
        out.append(Parameter(name, "environment", default, path))
    for m in _ARGV.finditer(text):
        if m.group(1) != "0":  # argv[0] is the program's own name
            out.append(Parameter(f"argv[{m.group(1)}]", "argv", "", path))
    return out


def _generic(path: str, text: str) -> list[Parameter]:
    """C, C++, shell, anything else: #define, top-level const scalars, UPPER_CASE = value lines."""
    out = [Parameter(m.group(1), "constant", m.group(2), path) for m in _DEFINE.finditer(text)]
    out += [Parameter(m.group(1), "constant", m.group(2).strip(), path) for m in _CONST.finditer(text)]
    for m in [*_C_ARRAY.finditer(text), *_CPP_ARRAY.finditer(text)]:
        values = [v.strip() for v in m.group(2).split(",") if v.strip()]
        numbers = [x for v in values if (x := _number(v)) is not None]
        # ``= {0}`` or ``{0, 0, 0}`` zero-fills a buffer; ``{c0, c1, c2, c3}`` lists variables: no
        # knob (relay s8 mm 010 was offered ``acc`` and ``t`` beside the tile sizes)
        if numbers and any(numbers):
            out.append(Parameter(m.group(1), "array", "{" + ", ".join(values) + "}", path))
    for m in _ENUM.finditer(text):
        for item in m.group(1).split(","):
            if e := _ENUM_ITEM.match(item.split("//")[0]):
                out.append(Parameter(e.group(1), "constant", e.group(2), path))
    if not path.endswith((".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".cu")):
        out += [
            Parameter(m.group(1), "constant", m.group(2).strip(), path) for m in _PY_ASSIGN.finditer(text)
        ]
    return out + _env_and_argv(path, text)


def build_parameters(build: Any) -> list[Parameter]:
    """The knobs of a code answer's ``build`` section: per compiler line of ``build.commands`` its
    flags (``gcc flags (build command 1): -O3 -march=native``; not the output, include or library
    paths), its ``-DNAME=value`` defines and ``NAME=value`` assignments (``CFLAGS=-O3 make``) as
    constants, and a ``flags`` field when an answer has one. A line that does not parse is skipped."""
    if not isinstance(build, dict):
        return []
    out: list[Parameter] = []
    commands = build.get("commands")
    for i, cmd in enumerate(commands if isinstance(commands, list) else [], 1):
        try:
            words = shlex.split(str(cmd))
        except ValueError:
            continue
        where = f"build command {i}"  # the flags' name; defines and assignments are constants
        start = 0  # each compiler of the line (``gcc ... && g++ ...``), flags up to the next ``&&``
        for at, word in enumerate(words):
            if m := _ASSIGN.match(word):
                out.append(Parameter(m.group(1), "constant", m.group(2), "build.commands"))
            if _COMPILER.match(word.rsplit("/", 1)[-1]) and at >= start:
                flags, defines, end = _compiler_flags(words[at + 1 :])
                start = at + 1 + end
                out += [Parameter(n, "constant", v, "build.commands") for n, v in defines]
                if flags:
                    out.append(
                        Parameter(
                            f"{word.rsplit('/', 1)[-1]} flags ({where})",
                            "flags",
                            " ".join(flags),
                            "build.commands",
                        )
                    )
    extra = build.get("flags")
    if isinstance(extra, list):
        extra = " ".join(str(f) for f in extra)
    if isinstance(extra, str) and extra.strip():
        out.append(Parameter("flags", "flags", extra.strip(), "build.flags"))
    return out


def _compiler_flags(words: list[str]) -> tuple[list[str], list[tuple[str, str]], int]:
    """The flags of one compiler call (``words`` after the compiler, up to a shell operator), its
    ``-D`` defines, and how many words the call used."""
    flags: list[str] = []
    defines: list[tuple[str, str]] = []
    skip = False
    for n, w in enumerate(words):
        if w in ("&&", "||", ";", "|"):
            return flags, defines, n
        if skip:
            skip = False
            continue
        if not w.startswith("-"):
            continue
        if w in _NOT_KNOBS:  # its argument is a path
            skip = w != "-c"
            continue
        # paths, dependency files, warnings, debug info and libraries: not what a tuning varies
        if w.startswith(("-I", "-L", "-o", "-M", "-W", "-g", "-l")) and not w.startswith("-g0"):
            continue
        if w.startswith("-D") and len(w) > 2:
            name, _, value = w[2:].partition("=")
            defines.append((name, value or "1"))
            continue
        flags.append(w)
    return flags, defines, len(words)


# a tuning idea's settings: NAME=value pairs; a value with spaces, a list or a dict is written in
# quotes or as JSON ({"l2": 0.01, "lr": 0.1}, [16, 32], (0.1, 0.2)): a relay run's proposer could
# not write REF = {'l2': 0.01, 'lr': 0.1} in the whitespace-separated form (request 010)
_SETTING_NAME = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*=\s*")
_CLOSE = {"{": "}", "[": "]", "(": ")"}
_BARE = re.compile(r"[^\s,;]+")  # an unquoted value ends at a space, a comma or a semicolon


def _setting_value(text: str, i: int) -> int:
    """The end of the value starting at ``text[i]``: a quoted string (its closing quote), a bracketed
    value (its matching bracket, quotes inside respected), else the next whitespace. ValueError
    when a quote or bracket is never closed."""
    if i >= len(text):
        return i
    c = text[i]
    if c in "\"'":
        end = text.find(c, i + 1)
        if end < 0:
            raise ValueError(f"unclosed {c} in {text[i:]!r}")
        return end + 1
    if c in _CLOSE:
        stack, j, quote = [], i, None
        while j < len(text):
            ch = text[j]
            if quote:
                quote = None if ch == quote else quote
            elif ch in "\"'":
                quote = ch
            elif ch in _CLOSE:
                stack.append(_CLOSE[ch])
            elif stack and ch == stack[-1]:
                stack.pop()
                if not stack:
                    return j + 1
            j += 1
        raise ValueError(f"unclosed {c} in {text[i:]!r}")
    m = _BARE.match(text, i)
    return m.end() if m else i


def parse_settings(text: str) -> list[tuple[str, str]] | None:
    """A tuning idea's ``NAME=value`` pairs in order (``LR=0.05 REF={"l2": 0.01, "lr": 0.1}
    LABEL="two words"``), each value as written (quotes around a plain string removed); pairs may be
    separated by spaces, commas or semicolons. None when the text is not in that form (an idea in
    words: "use a cosine schedule"), so a caller shows it as it is."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and (text[i].isspace() or text[i] in ",;"):
            i += 1
        if i >= n:
            break
        m = _SETTING_NAME.match(text, i)
        if m is None:
            return None
        try:
            end = _setting_value(text, m.end())
        except ValueError:
            return None
        value = text[m.end() : end]
        if not value:
            return None
        if value[0] in "\"'" and value[-1] == value[0]:
            value = value[1:-1]
        out.append((m.group(1), value))
        i = end
    return out or None


def settings_text(text: str) -> str:
    """A tuning idea as ``NAME = value; NAME = value`` when :func:`parse_settings` reads it and a
    value has a space or a comma in it (a dict, a quoted string: it stays one value, where the
    space-separated form would read as several); else as it is (``lr=0.05 l2=0.1``)."""
    pairs = parse_settings(text)
    if not pairs or not any(re.search(r"[\s,;]", v) for _, v in pairs):
        return text
    return "; ".join(f"{k} = {v}" for k, v in pairs)


C_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "defined"})
# a C / C++ function definition: a line starting (no indentation) with its return type, its name,
# its parameters (possibly over several lines) and the opening brace
C_FUNC = re.compile(
    r"^(?![ \t#])(?:[A-Za-z_][\w:<>,*& \t]*?[\s*&])([A-Za-z_]\w*)\s*\(([^;{}()]*)\)\s*(?:const\s*)?\{",
    re.M,
)


def c_functions_using(text: str, name: str) -> list[str]:
    """The functions of a C / C++ source ``text`` whose body names ``name`` (a ``#define`` or a
    ``const``), in file order: the code a compile-time constant's value reaches."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    word = re.compile(rf"\b{re.escape(name)}\b")
    out = []
    for m in C_FUNC.finditer(code):
        depth, i = 1, m.end()
        while depth and i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        if m.group(1) not in C_KEYWORDS and word.search(code, m.start(2), i):
            out.append(m.group(1))
    return out
