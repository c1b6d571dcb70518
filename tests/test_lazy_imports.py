"""No import inside a function repeats an import at the top of the same file (issue 29 counted
11): a module the file already imports at load time gains nothing from a lazy import of it, and
the reader is left wondering which one is meant. A lazy import stays where it defers a heavy or
optional module, or one the file imports only under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ai_scientist"


def _module(node: ast.ImportFrom | ast.Import, alias: ast.alias, path: Path, root: Path) -> str:
    """The absolute module an import names (``from ..base.paths import X`` -> ai_scientist.base.paths)."""
    if isinstance(node, ast.Import):
        return alias.name
    if node.level == 0:
        return node.module or ""
    package = list(path.relative_to(root.parent).with_suffix("").parts)[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _loaded_at_import(body: list[ast.stmt], path: Path, root: Path, typing_only: bool = False) -> set[str]:
    """The modules the file imports when it is loaded (not those under ``if TYPE_CHECKING:``)."""
    out: set[str] = set()
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not typing_only:
            out |= {_module(stmt, a, path, root) for a in stmt.names}
        elif isinstance(stmt, ast.If):
            typing = typing_only or "TYPE_CHECKING" in ast.unparse(stmt.test)
            out |= _loaded_at_import(stmt.body, path, root, typing)
            out |= _loaded_at_import(stmt.orelse, path, root, typing_only)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                out |= _loaded_at_import(part, path, root, typing_only)
    return out


def repeated_lazy_imports(root: Path = PKG) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = _loaded_at_import(tree.body, path, root)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    _module(node, a, path, root) in top for a in node.names
                ):
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}")
    return list(dict.fromkeys(found))


def test_no_lazy_import_repeats_an_import_at_the_top_of_its_file():
    assert repeated_lazy_imports() == []


def test_the_check_finds_a_repeated_lazy_import(tmp_path):
    pkg = tmp_path / "ai_scientist"
    (pkg / "base").mkdir(parents=True)
    (pkg / "base" / "run.py").write_text(
        "from .fileio import read_json\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .paths import RunPaths\n"
        "def f():\n    from .fileio import read_jsonl\n    from .paths import RunPaths\n    return read_jsonl\n"
    )
    assert repeated_lazy_imports(pkg) == ["ai_scientist/base/run.py:6: from .fileio import read_jsonl"]
