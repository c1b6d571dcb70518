"""The components of an experiment's program, read from its files, for the ablation proposer.

An ablation removes or disables one part of the best experiment. A proposer shown only the
program's parameters named parts it does not have (relay s8 ln2 027, mm1 030: "no inventory of
the best experiment's components"). So the ablation proposal is also shown, per file:

- its functions: Python ``def`` at module level that the program refers to (the others are
  counted) and in classes (``Class.method``), C / C++ function definitions, each with its
  parameters' names;
- its switches: the conditions of ``if`` statements and conditional expressions that test a named
  setting (a module constant, a command-line option, a function's flag argument with a literal
  default) or compare a value with a string (``mode == "blocked"``); C's ``#if`` / ``#ifdef``
  lines and ``if`` conditions on a ``#define`` / constant or a string;
- its variants: a loop over named entries (``for name in ("naive", "blocked")``, a list of
  ``("name", function)`` pairs) or a module-level table of them (``{"naive": naive}``).

Pure and bounded: at most ``LIMIT`` lines of at most ``LINE_CHARS`` characters each.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..base.pysource import parse_python
from .parameters import C_FUNC, C_KEYWORDS, parameters

LINE_CHARS = 500
ITEM_CHARS = 180  # a dict setting whole (relay s10 ln 027 cut HEADLINE at "schedu...")
LIMIT = 12

_C_FILES = (".c", ".h", ".cc", ".cpp", ".hpp", ".cxx", ".cu", ".cuh")
_C_PP = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif)\b[ \t]*([^\n]*?)\s*(?://[^\n]*|/\*[^\n]*)?$", re.M)
_C_IF = re.compile(r"\bif\s*\(")
_GUARD = re.compile(r"_H_?$|_HPP_?$|^__")


def components(files: dict[str, str], limit: int = LIMIT) -> list[str]:
    """One line per file and kind ("functions", "switches", "variants") the ``files`` (path ->
    text) hold, in file order: ``"<kind> [<path>]: item; item"``, each item whole (cut at
    ``ITEM_CHARS``), a line cut at a whole item with "(+N more)"; at most ``limit`` lines, the
    last saying how many more were found; [] when the files define none."""
    # the named settings a test can switch on (a grid's or an array's values are swept, not switched)
    settings = {p.name for p in parameters(files) if p.kind in ("constant", "option", "environment")}
    lines: list[str] = []
    for path, text in files.items():
        found = (
            _python(text, settings)
            if path.endswith(".py")
            else _c(text, settings)
            if path.endswith(_C_FILES)
            else {}
        )
        for kind in ("functions", "switches", "variants"):
            if found.get(kind):
                lines.append(_line(f"{kind} [{path}]: ", found[kind]))
    if len(lines) > limit:
        return [*lines[:limit], f"... {len(lines) - limit} more lines not listed"]
    return lines


def _line(head: str, items: list[str]) -> str:
    items = list(dict.fromkeys(_clip(i) for i in items))
    shown: list[str] = []
    for item in items:
        if len(head) + len("; ".join([*shown, item])) + len(" (+99 more)") > LINE_CHARS and shown:
            break
        shown.append(item)
    more = len(items) - len(shown)
    return head + "; ".join(shown) + (f" (+{more} more)" if more else "")


def _clip(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= ITEM_CHARS else one[: ITEM_CHARS - 3] + "..."


# ------------------------------------------------------------------------------------ Python --


def _python(text: str, settings: set[str]) -> dict[str, list[str]]:
    tree = parse_python(text)
    if tree is None:
        return {}
    # a function nothing refers to is no component of what runs (a realistic program carries
    # dozens of unused helpers): counted, not listed
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    functions: list[str] = []
    unused = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if stmt.name in used or stmt.name == "main":
                functions.append(_signature(stmt.name, stmt))
            else:
                unused += 1
        elif isinstance(stmt, ast.ClassDef):
            functions += [
                _signature(f"{stmt.name}.{f.name}", f)
                for f in stmt.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and not f.name.startswith("__")
            ]
    names = settings | _option_dests(tree) | _flag_arguments(tree)
    switches, variants = [], []
    for node, where in _walk(tree):
        if isinstance(node, ast.If | ast.IfExp) and _is_switch(node.test, names):
            switches.append(f"if {_source(text, node.test)}{where}")
        elif isinstance(node, ast.For) and _named_entries(node.iter):
            variants.append(f"for {_source(text, node.target)} in {_source(text, node.iter)}{where}")
    for stmt in tree.body:  # a module-level table of named entries: {"naive": naive, ...}
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if _named_entries(stmt.value):
                variants.append(f"{stmt.targets[0].id} = {_source(text, stmt.value)}")
    if unused and functions:
        functions.append(f"{unused} more defined but never called")
    return {"functions": functions, "switches": switches, "variants": variants}


def _signature(name: str, f: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = [
        a.arg for a in [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs] if a.arg not in ("self", "cls")
    ]
    return f"{name}({', '.join(args)})"


def _walk(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Every node with " (in <function>)" for the function it is in ("" at module level)."""

    def visit(node: ast.AST, where: str) -> Iterator[tuple[ast.AST, str]]:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f" (in {child.name})"
            yield child, where
            yield from visit(child, inner)

    yield from visit(tree, "")


def _option_dests(tree: ast.Module) -> set[str]:
    """The attribute names argparse gives the options (``--no-bias`` -> ``no_bias``)."""
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            dest = next(
                (
                    k.value.value
                    for k in node.keywords
                    if k.arg == "dest" and isinstance(k.value, ast.Constant)
                ),
                None,
            )
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if isinstance(dest, str):
                out.add(dest)
            elif flags:
                out.add(max(flags, key=len).lstrip("-").replace("-", "_"))
    return out


def _flag_arguments(tree: ast.Module) -> set[str]:
    """Function arguments whose default is a bool or a string: a flag or a mode the caller sets."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            pairs = [*zip(a.args[len(a.args) - len(a.defaults) :], a.defaults, strict=True)]
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
            out |= {
                arg.arg for arg, d in pairs if isinstance(d, ast.Constant) and isinstance(d.value, bool | str)
            }
    return out


def _is_switch(test: ast.expr, names: set[str]) -> bool:
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__":
        return False
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id in names:
            return True
        if isinstance(node, ast.Attribute) and node.attr in names:
            return True
        if isinstance(node, ast.Compare) and any(
            isinstance(c, ast.Constant) and isinstance(c.value, str) for c in [node.left, *node.comparators]
        ):
            return True
    return False


def _named_entries(value: ast.expr) -> bool:
    """A literal of at least two named entries: strings, ("name", ...) tuples, or a dict with
    string keys."""
    if isinstance(value, ast.Dict):
        return len(value.keys) >= 2 and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys
        )
    if not isinstance(value, ast.List | ast.Tuple) or len(value.elts) < 2:
        return False

    def named(e: ast.expr) -> bool:
        if isinstance(e, ast.Tuple | ast.List) and e.elts:
            e = e.elts[0]
        return isinstance(e, ast.Constant) and isinstance(e.value, str)

    return all(named(e) for e in value.elts)


def _source(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or ast.unparse(node)


# ----------------------------------------------------------------------------------- C / C++ --


def _c(text: str, settings: set[str]) -> dict[str, list[str]]:
    code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    functions = []
    for m in C_FUNC.finditer(code):
        if m.group(1) in C_KEYWORDS or m.group(1) == "main":
            continue
        params = [p.strip() for p in m.group(2).split(",") if p.strip() and p.strip() != "void"]
        names = [
            n[-1] if (n := re.findall(r"[A-Za-z_]\w*", p.split("=")[0].split("[")[0])) else p for p in params
        ]
        functions.append(f"{m.group(1)}({', '.join(names)})")
    switches = []
    for m in _C_PP.finditer(code):
        cond = m.group(2).strip()
        # an include guard, or a default (``#ifndef N`` / ``#define N 1024``: a parameter), is no switch
        default = re.match(rf"\s*#\s*define\s+{re.escape(cond)}\b", code[m.end() :].lstrip("\n"))
        if cond and not (m.group(1) == "ifndef" and (_GUARD.search(cond) or default)):
            switches.append(f"#{m.group(1)} {cond}")
    for m in _C_IF.finditer(code):
        cond = _balanced(code, m.end())
        if cond is not None and (
            '"' in cond or any(n in settings for n in re.findall(r"[A-Za-z_]\w*", cond))
        ):
            switches.append(f"if ({cond})")
    return {"functions": functions, "switches": switches}


def _balanced(text: str, start: int) -> str | None:
    """The text from ``start`` to the ``)`` that closes the ``(`` before it, or None."""
    depth = 1
    for i in range(start, min(len(text), start + 400)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return " ".join(text[start:i].split())
    return None
