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
    args += ["--schedulers", "free,batch"]
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
    assert t1["nodes"] == t4b["nodes"] == 4 + 4  # 4 drafts and 4 seed re-runs
    # 4 free workers may also re-run a provisional best that did not stay best (docs/pipeline.md)
    assert t4["nodes"] == 4 + t4["operations"]["seed_eval"] >= 4 + 4
    assert t1["llm_s"] >= 0.02 * t1["llm_calls"] * 0.9  # the simulated latency was really spent

    s = data["summary"]
    f = s["per_node_overhead"]["memory_off"]
    assert f["ratio_large_over_small"] == round(f["large_ms_per_node"] / f["small_ms_per_node"], 3)
    assert isinstance(f["flat"], bool) and isinstance(f["under_target"], bool)
    assert s["throughput"]["speedup"] == round(t4["nodes_per_s"] / t1["nodes_per_s"], 3)
    assert s["throughput"]["speedup_batch_scheduler"] == round(t4b["nodes_per_s"] / t1["nodes_per_s"], 3)

    # heterogeneous durations: 1 and 4 workers with each scheduler; the experiments really slept
    hetero = data["heterogeneous"]
    assert [(r["drafts"], r["workers"], r["scheduler"]) for r in hetero] == [
        (4, 1, "free"),
        (4, 1, "batch"),
        (4, 4, "free"),
        (4, 4, "batch"),
    ]
    for r in hetero:
        # 4 drafts, the best's 4 seed re-runs, and re-runs of a provisional best started early
        assert r["exit_code"] == 0 and r["nodes"] == 4 + r["seed_runs"]
        assert r["seed_runs"] == r["operations"]["seed_eval"] >= 4
        assert r["utilisation"] == round((r["llm_s"] + r["exec_s"]) / (r["wall_s"] * r["workers"]), 3)
        assert r["node_s"] > 0 and r["occupancy"] == round(r["node_s"] / (r["wall_s"] * r["workers"]), 3)
        assert r["node_s"] >= r["exec_s"]  # a node's whole time counts, its experiments included
        assert len(r["loadavg_before"]) == len(r["loadavg_after"]) == 3
        # the idle worker-seconds by part add up to the capacity the nodes left
        idle = sum(r["idle_s"].values())
        assert abs(idle - (r["wall_s"] * r["workers"] - r["node_s"])) < 0.05 * r["wall_s"] * r["workers"]
        if (
            r["workers"] == 1 or r["scheduler"] == "batch"
        ):  # only a free worker beside a running node starts one
            assert r["early_seed_runs"] == 0
    sleeps = sum(_bench().HeteroResponder(0, 0.1).duration(f"n{i:04d}") for i in range(1, 5))
    assert hetero[0]["exec_s"] >= sleeps  # the 4 drafts' drawn durations (seed re-runs sleep too)
    h = s["heterogeneous"]["drafts_4"]
    for sched in ("batch", "free"):
        one, four = (r for r in hetero if r["scheduler"] == sched)
        assert h[sched]["speedup"] == round(one["wall_s"] / four["wall_s"], 3)  # wall time, as a user sees it
        assert h[sched]["utilisation_4_workers"] == four["utilisation"]
    assert isinstance(h["free"]["met"], bool) and "met" not in h["batch"]
    printed = capsys.readouterr().out
    assert "speed-up 4 vs 1 workers" in printed and "ms/node" in printed and "utilisation" in printed
