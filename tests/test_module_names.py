"""No module of the package takes a standard-library module's name (issue 29: ``memory/inspect.py``,
then ``llm/types.py``): a reader, a debugger or a script run from the package's folder would take
one for the other."""

from __future__ import annotations

import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ai_scientist"


def stdlib_named(root: Path = PKG) -> list[str]:
    names = set(sys.stdlib_module_names)
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.parent.name if path.name == "__init__.py" else path.stem
        if name in names:
            found.append(str(path.relative_to(root.parent)))
    return found


def test_no_module_takes_a_standard_library_name(tmp_path):
    assert stdlib_named() == []
    (tmp_path / "ai_scientist" / "llm").mkdir(parents=True)
    (tmp_path / "ai_scientist" / "llm" / "types.py").write_text("")
    assert stdlib_named(tmp_path / "ai_scientist") == ["ai_scientist/llm/types.py"]
