"""One way to build a prompt (issue 29): every caller reaches the assembler through
``llm.prompting`` and no module outside the assembler's home writes chat messages by hand.

The scan reads the package's source (not a list of known offenders): a new module that imports
``context.assemble.assemble`` or writes a ``{"role": "user", "content": ...}`` literal fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ai_scientist

PKG = Path(ai_scientist.__file__).parent
# the assembler and the one function every call goes through
ASSEMBLER_HOME = {"context", "llm/prompting.py"}
# where chat messages may be written: the assembler, and the transport (a provider's wire format,
# the structured-output repair turn, the connection probe)
MESSAGE_HOME = {"context", "llm"}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    return out


def _home(rel: str, homes: set[str]) -> bool:
    return any(rel == h or rel.split("/")[0] == h for h in homes)


def _assembler_imports(tree: ast.Module) -> list[int]:
    """Lines importing the assembler's ``assemble`` (from ``context.assemble`` or ``context``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            mod = node.module.split(".")
            if mod[-1] in ("assemble", "context") and "context" in mod[-2:]:
                if any(a.name == "assemble" for a in node.names):
                    lines.append(node.lineno)
    return lines


def _message_literals(tree: ast.Module) -> list[int]:
    """Lines with a dict literal ``{"role": "<literal>", "content": ...}``: a chat message written
    by hand (copying a logged message's fields for display is not one: its role is not a literal)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        fields = {
            k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)
        }
        role = fields.get("role")
        if "content" in fields and isinstance(role, ast.Constant) and isinstance(role.value, str):
            lines.append(node.lineno)
    return lines


def test_scan_sees_the_package_and_its_homes():
    mods = dict(_modules())
    # the scan reads the real modules: the assembler's import in llm/prompting.py and the messages
    # the assembler writes are found where they are allowed
    assert _assembler_imports(mods["llm/prompting.py"])
    assert _message_literals(mods["context/history.py"])
    assert len(mods) > 100


def test_only_the_prompt_path_imports_the_assembler():
    offenders = [
        f"{rel}:{line}"
        for rel, tree in _modules()
        if not _home(rel, ASSEMBLER_HOME)
        for line in _assembler_imports(tree)
    ]
    assert offenders == [], (
        "assemble prompts through ai_scientist.llm.prompting (Prompter / ask), not the assembler "
        f"directly: {offenders}"
    )


def test_no_module_outside_the_assembler_writes_chat_messages():
    offenders = [
        f"{rel}:{line}"
        for rel, tree in _modules()
        if not _home(rel, MESSAGE_HOME)
        for line in _message_literals(tree)
    ]
    assert offenders == [], f"chat messages are built by ai_scientist.context (or llm transport): {offenders}"


def test_the_scan_catches_a_hand_built_message():
    bad = ast.parse('from ..context.assemble import assemble\nmsgs = [{"role": "user", "content": "hi"}]\n')
    assert _assembler_imports(bad) == [1]
    assert _message_literals(bad) == [2]
