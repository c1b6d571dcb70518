"""The package's layers: a module never imports from a layer above its own.

Every ``import`` / ``from ... import`` in the package is checked — at module level, inside functions
(lazy imports) and under ``if TYPE_CHECKING:`` alike: a lazy or type-only import upward is still an
upward dependency. Packages in the same layer must not import each other either. docs/architecture.md
draws the same table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "ai_scientist"

# bottom to top; a module may import its own package and any package of a lower layer
LAYERS: list[set[str]] = [
    {"base"},
    {"context"},
    {"promptlog"},
    {"llm"},
    {"memory", "execution", "treesearch", "literature"},
    {"phases", "reporting"},
    {"ideation"},
    {"runloop"},
    {"benchsuite"},  # the bench: tasks, baselines, runs as processes, the report (docs/bench.md)
    {"serve"},  # the web view: reads the run directory, writes steering requests (runloop/steering)
    {"cli"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute target) of every import of the package in ``path``."""
    mod = _module(path, root)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "ai_scientist":  # `from .. import x`: each name is the module imported
                out += [(node.lineno, f"ai_scientist.{a.name}") for a in node.names]
            elif target.startswith("ai_scientist."):
                out.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("ai_scientist.")]
    return out


def _package(module: str) -> str:
    return module.split(".")[1]


def violations(root: Path = PKG) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        mod = _module(path, root)
        if mod == "ai_scientist":
            continue
        src = _package(mod)
        for line, target in _imports(path, root):
            dst = _package(target)
            where = f"{path.relative_to(root.parent)}:{line} imports {target}"
            if src not in RANK:
                found.append(f"{where}: package '{src}' has no layer in tests/test_import_layers.py")
            elif dst not in RANK:
                found.append(f"{where}: '{dst}' has no layer (a module loose at the package root?)")
            elif dst != src and RANK[dst] >= RANK[src]:
                kind = "a package of the same layer" if RANK[dst] == RANK[src] else "a higher layer"
                found.append(f"{where}: {src} (layer {RANK[src]}) must not import {kind} ({dst})")
    return found


def test_no_module_imports_upward():
    assert violations() == []


def test_every_package_has_a_layer_and_nothing_is_loose():
    loose = [p.name for p in PKG.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], "modules belong to a layer's package, not the package root"
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert packages == set(RANK), "every package appears in LAYERS exactly once"


@pytest.mark.parametrize(
    ("where", "code", "message"),
    [
        (
            "context/x.py",
            "from ..llm.client import LLMClient\n",
            "context (layer 1) must not import a higher layer",
        ),
        (
            "base/x.py",
            "def f():\n    from ..cli.main import main\n",
            "base (layer 0) must not import a higher layer",
        ),
        (
            "phases/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..runloop.services import S\n",
            "phases (layer 5) must not import a higher layer",
        ),
        ("memory/x.py", "from ai_scientist.execution import base\n", "a package of the same layer"),
        ("llm/x.py", "from .. import orchestrator\n", "has no layer"),
    ],
)
def test_the_check_catches_an_upward_import(tmp_path, where, code, message):
    root = tmp_path / "ai_scientist"
    (root / where).parent.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / where).write_text(code)
    found = violations(root)
    assert len(found) == 1 and message in found[0], found


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazy and type-only imports included); ``from . import
    x`` is an import of the module ``x`` when there is one, not of the package's ``__init__``."""
    files = {_module(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                base = ".".join(parts + ([node.module] if node.module else []))
                targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
        for target in targets:
            while target not in files and "." in target:  # a name inside a module: that module
                target = target.rsplit(".", 1)[0]
            if target in files and target != mod:
                graph[mod].add(target)
    return graph


def import_loops(root: Path = PKG) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a longer loop (Tarjan)."""
    graph = _module_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                loops.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return loops


def test_no_import_loop_between_modules():
    # a loop hidden by a lazy import is still a loop: the two modules cannot be understood apart
    assert import_loops() == []


def test_the_loop_check_catches_a_lazy_loop(tmp_path):
    root = tmp_path / "ai_scientist"
    (root / "execution").mkdir(parents=True)
    for init in (root / "__init__.py", root / "execution" / "__init__.py"):
        init.write_text("")
    (root / "execution" / "a.py").write_text("from .b import B\nA = 1\n")
    (root / "execution" / "b.py").write_text("B = 2\ndef f():\n    from . import a\n    return a.A\n")
    (root / "execution" / "c.py").write_text("from .a import A\n")
    assert import_loops(root) == [["ai_scientist.execution.a", "ai_scientist.execution.b"]]
