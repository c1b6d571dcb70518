"""Smoke test of bench/call_tokens.py: a tiny run on both sides, the per-kind table it reports."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_call_tokens", ROOT / "bench" / "call_tokens.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_measures_every_call_kind_on_both_sides(capsys):
    report = _bench().main(["--smoke"])
    base, head = report["baseline"], report["head"]
    # the same code on both sides in smoke mode: the same call kinds, each counted
    assert set(base["kinds"]) == set(head["kinds"])
    assert any(k.startswith("phase2/") for k in head["kinds"]) and any(
        "exec_review" in k for k in head["kinds"]
    )
    assert all(v["calls"] >= 1 and v["mean_tokens"] > 0 for v in head["kinds"].values())
    assert head["search_nodes"] == 1 and head["input_tokens"] > 0 and head["usd_per_node"] > 0
    out = capsys.readouterr().out
    assert "per node at gpt-4o-mini prices" in out and "head / baseline" in out
