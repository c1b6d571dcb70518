"""scripts/mypy_baseline.py: the type-error baseline only shrinks (docs/testing.md, "Lint and types")."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("mypy_baseline", REPO / "scripts" / "mypy_baseline.py")
assert _spec and _spec.loader
mb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mb)


def test_counts_only_error_lines_of_real_mypy_output(tmp_path):
    pytest.importorskip("mypy")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text('x: int = "a"\n\ndef f(a: int) -> str:\n    return a\n\nreveal_type(x)\n')
    (pkg / "good.py").write_text("def g(a: int) -> int:\n    return a + 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--cache-dir", str(tmp_path / "cache"), "pkg"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error_lines = [line for line in proc.stdout.splitlines() if ": error: " in line]
    assert len(error_lines) == 2  # the reveal_type line is a note, the summary line no error
    assert "note:" in proc.stdout
    assert mb.count_errors(proc.stdout) == Counter({"pkg/bad.py": 2})


def test_more_errors_than_the_baseline_is_a_regression_fewer_is_an_improvement():
    baseline = {"a.py": 3, "b.py": 2, "gone.py": 1}
    counts = Counter({"a.py": 4, "b.py": 1, "new.py": 1})
    regressions, improvements = mb.compare(counts, baseline)
    assert regressions == ["a.py: 4 errors, baseline allows 3", "new.py: 1 errors, baseline allows 0"]
    assert improvements == ["b.py: 1 errors, baseline 2", "gone.py: 0 errors, baseline 1"]
    assert mb.compare(Counter(baseline), baseline) == ([], [])


def test_baseline_file_round_trips_and_drops_clean_modules():
    counts = Counter({"z.py": 2, "a.py": 5, "clean.py": 0})
    text = mb.format_baseline(counts)
    assert text.startswith("#")
    assert text.splitlines()[-2:] == ["5 a.py", "2 z.py"]
    assert mb.parse_baseline(text) == {"a.py": 5, "z.py": 2}


@pytest.mark.parametrize("line", ["five a.py", "3", "-1 a.py"])
def test_malformed_baseline_line_is_named(line):
    with pytest.raises(ValueError, match=r"baseline line 2: expected '<count> <path>'"):
        mb.parse_baseline("# header\n" + line + "\n")


def test_checked_in_baseline_parses_and_names_existing_modules():
    baseline = mb.parse_baseline(mb.BASELINE.read_text())
    missing = [p for p in baseline if not (REPO / p).is_file()]
    assert not missing, f"baseline names modules that no longer exist: {missing}; run --update"
