"""No dead prompts: every template under ``ai_scientist/prompt/`` is rendered by the package's
code, and every prompt of the layer table (``context/spec.py`` ``PROMPTS``) is built by it.

The referenced set is derived by scanning the code (the AST, so comments and docstrings do
not count), never listed by hand:

- a string constant ending in ``.j2`` names a template by its path under ``prompt/`` or under
  the root of a second jinja loader (``reporting/prompts.py`` and ``reporting/latex.py`` load
  from ``prompt/reporting/`` and ``prompt/reporting/latex/``), so it matches a template whose
  path ends with it at a folder boundary;
- an f-string ending in ``.j2`` (``f"phases/{prompt}.j2"``, ``f"context/{name}.j2"`` for the
  layers of the table, ``f"{template}.tex.j2"``) matches a template when each placeholder can be
  one of the identifier-like string constants of the code (``"phase0_plan"``, ``"workshop"``);
- a template included, extended or imported by a referenced template is referenced.

Code under ``testsupport/ai_scientist_testing/`` (the scripted LLM of the tests) does not count.
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
from pathlib import Path

import ai_scientist
from ai_scientist.context.spec import PROMPTS

PACKAGE = Path(ai_scientist.__file__).resolve().parent
PROMPT_ROOT = PACKAGE / "prompt"
SPEC = PACKAGE / "context" / "spec.py"
_INCLUDE = re.compile(r"""{%-?\s*(?:include|extends|import|from)\s+["']([^"']+)["']""")
_WORD = re.compile(r"[A-Za-z0-9_.-]+")


def _code_files(code_root: Path) -> tuple[Path, ...]:
    files = code_root.rglob("*.py")
    return tuple(sorted(p for p in files if p.relative_to(code_root).parts[0] != "testing"))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


@functools.lru_cache(maxsize=4)
def scan_code(files: tuple[Path, ...]) -> tuple[set[str], set[tuple], set[str]]:
    """(template names, f-string patterns as tuples with None for a placeholder, words)."""
    names: set[str] = set()
    patterns: set[tuple] = set()
    words: set[str] = set()
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.JoinedStr):
                parts = tuple(p.value if isinstance(p, ast.Constant) else None for p in n.values)
                if isinstance(parts[-1], str) and parts[-1].endswith(".j2"):
                    patterns.add(parts)
                skip.update(id(p) for p in n.values)  # pieces of an f-string are not names
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
                if n.value.endswith(".j2") and " " not in n.value:
                    names.add(n.value)
                if _WORD.fullmatch(n.value):
                    words.add(n.value)
    return names, patterns, words


def unreferenced_templates(prompt_root: Path, code_files: tuple[Path, ...]) -> list[str]:
    """Templates under ``prompt_root`` that nothing in ``code_files`` renders (sorted paths)."""
    templates = sorted(p.relative_to(prompt_root).as_posix() for p in prompt_root.rglob("*.j2"))
    names, patterns, words = scan_code(code_files)
    # a placeholder matches one path-safe word, which must be a string constant of the code
    regexes = [
        re.compile(r"(?:.*/)?" + "".join(r"([A-Za-z0-9_.-]+)" if p is None else re.escape(p) for p in pat))
        for pat in patterns
    ]

    def formatted(template: str) -> bool:
        return any((m := rx.fullmatch(template)) and set(m.groups()) <= words for rx in regexes)

    def named(template: str, name: str) -> bool:
        return template == name or template.endswith("/" + name)

    used = {t for t in templates if any(named(t, n) for n in names) or formatted(t)}
    todo = list(used)
    while todo:  # follow {% include %} / {% extends %} / {% import %} of the referenced ones
        text = (prompt_root / todo.pop()).read_text(encoding="utf-8")
        for inc in _INCLUDE.findall(text):
            for t in templates:
                if t not in used and named(t, inc):
                    used.add(t)
                    todo.append(t)
    return [t for t in templates if t not in used]


def test_every_template_is_rendered_by_code():
    dead = unreferenced_templates(PROMPT_ROOT, _code_files(PACKAGE))
    assert not dead, (
        f"prompt templates no code renders: {dead}. Delete them, or render them from the code "
        "(a literal 'dir/name.j2', an f-string whose placeholder is a string constant of the code, "
        "or an {% include %} from a rendered template)."
    )


def test_the_scan_finds_an_unreferenced_template_and_follows_includes(tmp_path):
    root = tmp_path / "prompt"
    shutil.copytree(PROMPT_ROOT, root)
    assert (root / "phases" / "_node.j2").exists()  # referenced only by {% include %}
    (root / "phases" / "unused_step.j2").write_text("Never rendered.", encoding="utf-8")
    (root / "reporting" / "orphan_user.j2").write_text('{% include "orphan_part.j2" %}', encoding="utf-8")
    (root / "reporting" / "orphan_part.j2").write_text("part", encoding="utf-8")
    assert unreferenced_templates(root, _code_files(PACKAGE)) == [
        "phases/unused_step.j2",
        "reporting/orphan_part.j2",
        "reporting/orphan_user.j2",
    ]
    # once a rendered template includes the orphan, it and its include count as used
    review = root / "reporting" / "review_user.j2"
    review.write_text(
        review.read_text(encoding="utf-8") + '\n{% include "orphan_user.j2" %}', encoding="utf-8"
    )
    assert unreferenced_templates(root, _code_files(PACKAGE)) == ["phases/unused_step.j2"]


def test_every_prompt_of_the_layer_table_is_built_by_code():
    # a PROMPTS entry is built when its name reaches assemble(): ctx.ask("phase0_plan", ...),
    # services.ask_run("select_tiebreak", ...), ideation's PROMPT = "ideation"
    _, _, words = scan_code(tuple(p for p in _code_files(PACKAGE) if p != SPEC))
    unbuilt = sorted(set(PROMPTS) - words)
    assert not unbuilt, f"prompts of context/spec.py PROMPTS that no code builds: {unbuilt}; delete them"
