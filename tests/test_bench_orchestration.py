"""Smoke test of bench/orchestration.py: tiny sizes, checks the JSON it writes (no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_orchestration", ROOT / "bench" / "orchestration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_writes_every_figure(tmp_path, capsys):
    out = tmp_path / "orchestration.json"
    args = ["--quick", "--no-warmup", "--memory", "off", "--drafts", "4", "--latency", "0.02"]
    args += ["--hetero-drafts", "4", "--hetero-latency", "0.02", "--hetero-mean", "0.1"]
    _bench().main([*args, "--out", str(out)])
    data = json.loads(out.read_text())
    assert "partial" not in data

    assert [r["memory"] for r in data["overhead"]] == [False, False]
    for r in data["overhead"]:
        assert r["exit_code"] == 0
        assert r["nodes"] >= 10 and r["good"] >= 1
        assert r["llm_calls"] >= 2 * r["nodes"] - 10  # search nodes ask plan + code (+ review)
        assert r["exec_calls"] >= r["nodes"]  # every node ran its experiment through the timed executor
        # the parts add up: overhead is what the wall time leaves after LLM and sandbox time
        assert abs(r["wall_s"] - r["llm_s"] - r["exec_s"] - r["overhead_s"]) < 0.01
    small, large = data["overhead"]
    assert large["nodes"] > small["nodes"]
    assert {"tune", "improve", "ablate", "seed_eval", "draft"} <= set(large["operations"])

    t1, t4, t4b = data["throughput"]
    assert [(r["workers"], r["scheduler"]) for r in (t1, t4, t4b)] == [(1, "free"), (4, "free"), (4, "batch")]
    assert t1["nodes"] == t4["nodes"] == t4b["nodes"] == 4 + 4  # 4 drafts and 4 seed re-runs
    assert t1["llm_s"] >= 0.02 * t1["llm_calls"] * 0.9  # the simulated latency was really spent

    s = data["summary"]
    f = s["per_node_overhead"]["memory_off"]
    assert f["ratio_large_over_small"] == round(f["large_ms_per_node"] / f["small_ms_per_node"], 3)
    assert isinstance(f["flat"], bool) and isinstance(f["under_target"], bool)
    assert s["throughput"]["speedup"] == round(t4["nodes_per_s"] / t1["nodes_per_s"], 3)
    assert s["throughput"]["speedup_batch_scheduler"] == round(t4b["nodes_per_s"] / t1["nodes_per_s"], 3)

    # heterogeneous durations: 1 and 4 workers with each scheduler; the experiments really slept
    hetero = data["heterogeneous"]
    assert [(r["workers"], r["scheduler"]) for r in hetero] == [
        (1, "batch"),
        (1, "free"),
        (4, "batch"),
        (4, "free"),
    ]
    for r in hetero:
        assert r["exit_code"] == 0 and r["nodes"] == 4 + 4
        assert r["node_s"] > 0 and r["utilisation"] == round(r["node_s"] / (r["wall_s"] * r["workers"]), 3)
        assert r["llm_exec_share"] == round((r["llm_s"] + r["exec_s"]) / (r["wall_s"] * r["workers"]), 3)
        assert r["node_s"] >= r["exec_s"]  # a node's whole time counts, its experiments included
        # the idle worker-seconds by part add up to the capacity the nodes left
        idle = sum(r["idle_s"].values())
        assert abs(idle - (r["wall_s"] * r["workers"] - r["node_s"])) < 0.05 * r["wall_s"] * r["workers"]
    sleeps = sum(_bench().HeteroResponder(0, 0.1).duration(f"n{i:04d}") for i in range(1, 5))
    assert hetero[0]["exec_s"] >= sleeps  # the 4 drafts' drawn durations (seed re-runs sleep too)
    h = s["heterogeneous"]
    for sched in ("batch", "free"):
        one, four = (r for r in hetero if r["scheduler"] == sched)
        assert h[sched]["speedup"] == round(four["nodes_per_s"] / one["nodes_per_s"], 3)
    printed = capsys.readouterr().out
    assert "speed-up 4 vs 1 workers" in printed and "ms/node" in printed and "utilisation" in printed
