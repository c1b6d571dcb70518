"""Type-check the package against a baseline that only shrinks (docs/testing.md, "Lint and types").

    python scripts/mypy_baseline.py            # run mypy, compare with .ci/mypy-baseline.txt
    python scripts/mypy_baseline.py --update   # run mypy, write its counts as the new baseline

The baseline holds, for every module that still has mypy errors, how many it has. The check
fails (exit 1) when a module has more errors than its baseline allows (a module not listed
allows none), and when mypy itself fails without reporting errors (a crash, a config error).
A module with fewer errors passes, with a reminder to lower its line: the baseline only shrinks.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / ".ci" / "mypy-baseline.txt"
HEADER = (
    "# mypy errors per module (scripts/mypy_baseline.py, docs/testing.md). The counts may only go\n"
    "# down: fix errors, then run `python scripts/mypy_baseline.py --update` and commit this file.\n"
)

# "path/to/mod.py:12: error: message  [code]" (also "path:12:5:" with column numbers)
_ERROR = re.compile(r"^(?P<path>[^:\s][^:]*\.pyi?):\d+(?::\d+)?: error: ")


def count_errors(mypy_output: str) -> Counter[str]:
    """Errors per file in mypy's text output (notes and the summary line are not errors)."""
    counts: Counter[str] = Counter()
    for line in mypy_output.splitlines():
        m = _ERROR.match(line)
        if m:
            counts[m.group("path").replace("\\", "/")] += 1
    return counts


def parse_baseline(text: str) -> dict[str, int]:
    """``<count> <path>`` lines; ``#`` comments and blank lines are skipped."""
    baseline: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        count, _, path = line.partition(" ")
        if not count.isdigit() or not path.strip():
            raise ValueError(f"baseline line {n}: expected '<count> <path>', got {raw!r}")
        baseline[path.strip()] = int(count)
    return baseline


def format_baseline(counts: Counter[str]) -> str:
    return HEADER + "".join(f"{counts[p]} {p}\n" for p in sorted(counts) if counts[p] > 0)


def compare(counts: Counter[str], baseline: dict[str, int]) -> tuple[list[str], list[str]]:
    """(regressions, improvements), each a list of readable lines, sorted by module."""
    regressions, improvements = [], []
    for path in sorted(set(counts) | set(baseline)):
        now, allowed = counts.get(path, 0), baseline.get(path, 0)
        if now > allowed:
            regressions.append(f"{path}: {now} errors, baseline allows {allowed}")
        elif now < allowed:
            improvements.append(f"{path}: {now} errors, baseline {allowed}")
    return regressions, improvements


def run_mypy() -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    args = ap.parse_args(argv)

    rc, output = run_mypy()
    counts = count_errors(output)
    if rc not in (0, 1) or (rc == 1 and not counts):
        sys.stderr.write(output)
        print(f"[types] mypy failed (exit {rc}) without reporting type errors", file=sys.stderr)
        return 1
    total = sum(counts.values())
    if args.update:
        BASELINE.parent.mkdir(exist_ok=True)
        BASELINE.write_text(format_baseline(counts))
        print(
            f"[types] baseline written: {total} errors in {len(counts)} modules ({BASELINE.relative_to(REPO)})"
        )
        return 0

    try:
        baseline = parse_baseline(BASELINE.read_text()) if BASELINE.exists() else {}
    except ValueError as e:
        print(f"[types] {BASELINE.relative_to(REPO)}: {e}", file=sys.stderr)
        return 2
    regressions, improvements = compare(counts, baseline)
    if regressions:
        new_errors = [line for line in output.splitlines() if _ERROR.match(line)]
        regressed = {r.split(":", 1)[0] for r in regressions}
        for line in new_errors:
            if line.split(":", 1)[0] in regressed:
                print(line, file=sys.stderr)
        print("[types] more mypy errors than the baseline allows:", file=sys.stderr)
        for r in regressions:
            print(f"  {r}", file=sys.stderr)
        return 1
    print(f"[types] mypy: {total} errors in {len(counts)} modules, none above the baseline")
    if improvements:
        print("[types] fewer errors than the baseline; lower it (python scripts/mypy_baseline.py --update):")
        for line in improvements:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
