"""What one numbered file costs (``base/paths.claim_numbered``) against the code it replaced.

    python bench/numbering.py [--files 500] [--rounds 5]

Fills a fresh folder with ``--files`` prompt-log records, claiming each number with
``claim_numbered`` (scan of the folder + ``flock`` of the folder + ``O_EXCL`` create) and, in
another fresh folder, with the old prompt-log claim (``glob`` of the folder + ``O_EXCL`` create, no
lock), alternating round after round so a change of load hits both alike. Each claim is followed by
writing a ``.md`` twin, as the prompt logger does, so the scanned folder looks like a real one.
Prints the median time per claim of each and their ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from ai_scientist.base.paths import claim_numbered

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _old_claim(folder: Path, phase: str, label: str) -> tuple[int, Path]:
    """The prompt logger's claim before base/paths.py (promptlog/record.py at 1c86b9b)."""

    def slug(text: str) -> str:
        return _SAFE.sub("-", text).strip("-")[:40] or "call"

    folder.mkdir(parents=True, exist_ok=True)
    existing = [int(p.name[:3]) for p in folder.glob("[0-9][0-9][0-9]_*.json")]
    n = max(existing, default=0) + 1
    while True:
        path = folder / f"{n:03d}_{slug(phase)}_{slug(label)}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return n, path
        except FileExistsError:
            n += 1


def fill(claim, folder: Path, files: int) -> float:
    """Seconds per claim, filling ``folder`` with ``files`` records (+ .md twins)."""
    start = time.perf_counter()
    for i in range(files):
        _, path = claim(folder, "phase2", f"code_{i % 7}")
        path.with_suffix(".md").write_text("")
    return (time.perf_counter() - start) / files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.files, args.rounds = 20, 1
    new, old = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            old.append(fill(_old_claim, Path(tmp) / f"old{r}", args.files))
            new.append(fill(claim_numbered, Path(tmp) / f"new{r}", args.files))
    m_old, m_new = statistics.median(old), statistics.median(new)
    print(f"{args.files} records per folder, {args.rounds} rounds, median per claim:")
    print(f"  old (glob + O_EXCL, no lock):                 {m_old * 1e6:8.1f} us")
    print(f"  claim_numbered (scan + flock + O_EXCL):       {m_new * 1e6:8.1f} us")
    print(f"  ratio claim_numbered / old: {m_new / m_old:.2f}x")


if __name__ == "__main__":
    main()
