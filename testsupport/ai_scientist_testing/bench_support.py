"""What the benchmarks (``bench/*.py``) share: the recorded run they read prompts from and the
run size of their ``--smoke`` mode (``tests/test_bench_smoke.py`` runs every script with it)."""

from __future__ import annotations

from pathlib import Path

from ai_scientist.base.paths import RunPaths

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

# appended to a bench's own overrides in --smoke mode: one draft and one child in stage 1, the
# later stages empty, one seed re-run: every part of a node runs, nothing is measured
SMOKE_RUN = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
]


def recorded_run() -> Path:
    """The recorded scripted run (``tests/fixtures/run_<commit>``, ``scripts/record_fixture.sh``).

    Found by its name's pattern, so re-recording it (a new commit in the name) needs no edit here."""
    found = sorted(p for p in FIXTURES.glob("run_*") if RunPaths(p).journal.is_file())
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected one recorded run tests/fixtures/run_*/ (scripts/record_fixture.sh), found "
            f"{[p.name for p in found] or 'none'} under {FIXTURES}"
        )
    return found[0]
