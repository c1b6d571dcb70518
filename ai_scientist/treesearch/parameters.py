"""The parameters an experiment's code exposes, read from its files, for the idea proposer.

A tuning proposal written without the code invents names (``lr`` for a C program whose only
knobs are compile-time tiles). So the proposer is shown what the code itself lets one change:

- command-line options: argparse ``add_argument`` (with its default), ``sys.argv[i]`` / ``argv[i]``;
- environment variables read: ``os.environ[...]``, ``os.environ.get``, ``os.getenv``, ``getenv``;
- named constants: module-level UPPER_CASE assignments of a literal (Python, tuples included),
  ``#define NAME value``, top-level ``const`` / ``constexpr`` scalars (C, C++), with their values;
- hard-coded grids: a Python loop over a literal tuple or list of numbers (``for l2 in (0, 0.1)``):
  a value the method sweeps that no option or constant exposes, which an idea may still change.

Pure and bounded: at most ``limit`` entries of at most ``ENTRY_CHARS`` characters each.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

ENTRY_CHARS = 120
VALUE_CHARS = 60
LIMIT = 40

_UPPER = re.compile(r"^[A-Z][A-Z0-9_]*$")
_ENV = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|getenv|std::getenv|secure_getenv)\s*\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']"""
    r"""(?:\s*,\s*([^)\n]{1,60}))?|os\.environ\s*\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]"""
)
_ARGV = re.compile(r"\b(?:sys\.)?argv\s*\[\s*(\d+)\s*\]")
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Z][A-Z0-9_]*)\s+(\S[^\n]*?)\s*(?://.*|/\*.*)?$", re.M)
# a top-level C / C++ constant: no indentation, `static`/`constexpr`/`const`, a scalar type
_CONST = re.compile(
    r"^(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?"
    r"(?:int|long|short|size_t|float|double|char|bool|u?int\d+_t|auto)\s+([A-Za-z_]\w*)\s*=\s*([^;\n]{1,60});",
    re.M,
)
# a C / C++ array of numbers written out in the code (``int tiles[5] = {16, 32, 64};``, at any
# indentation): the values a method sweeps, as a loop over it would (the "grid" kind)
_C_ARRAY = re.compile(
    r"^\s*(?:static\s+)?(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|size_t|double|float|short)\s+"
    r"(\w+)\s*\[\s*\w*\s*\]\s*=\s*\{([-+0-9.eE,\s]+)\}\s*;",
    re.M,
)
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
        }[self.kind]
        return _clip(f"{text} [{self.path}]", ENTRY_CHARS)


def _clip(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def code_parameters(
    files: dict[str, str], limit: int = LIMIT, note: Callable[[Parameter], str] | None = None
) -> list[str]:
    """One line per parameter the ``files`` (path -> text) expose, in file order, each name once;
    at most ``limit`` lines, the last saying how many more were found. ``note`` adds a remark to
    a parameter's line (e.g. that it belongs to the evaluation protocol), "" for none."""
    found = parameters(files)
    lines = [p.line() + (f" — {n}" if note and (n := note(p)) else "") for p in found[:limit]]
    if len(found) > limit:
        lines.append(f"... {len(found) - limit} more parameters not listed")
    return lines


def parameters(files: dict[str, str]) -> list[Parameter]:
    """Every parameter the ``files`` expose, in file order, each (name, kind) once (unbounded:
    the evaluation protocol compares them, runloop/protocol.py)."""
    found: list[Parameter] = []
    seen: set[tuple[str, str]] = set()
    for path, text in files.items():
        for p in _python(path, text) if path.endswith(".py") else _generic(path, text):
            if (p.name, p.kind) not in seen:
                seen.add((p.name, p.kind))
                found.append(p)
    return found


def _python(path: str, text: str) -> list[Parameter]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
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
    out += [
        Parameter(
            m.group(1),
            "grid",
            "(" + ", ".join(v.strip() for v in m.group(2).split(",") if v.strip()) + ")",
            path,
        )
        for m in _C_ARRAY.finditer(text)
    ]
    if not path.endswith((".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".cu")):
        out += [
            Parameter(m.group(1), "constant", m.group(2).strip(), path) for m in _PY_ASSIGN.finditer(text)
        ]
    return out + _env_and_argv(path, text)
