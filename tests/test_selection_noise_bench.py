"""bench/seed_rerank.py --smoke (issue 30): the figure "how often re-ranking over seeds changed a
stage's best" is counted from the runs' own records; checked here against the run's events."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from pipeline_support import ROOT, events, journal_nodes


def _bench():
    spec = importlib.util.spec_from_file_location("seed_rerank", ROOT / "bench" / "seed_rerank.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_smoke_counts_match_the_runs_events(tmp_path, capsys):
    out = tmp_path / "seed_rerank.json"
    assert _bench().main(["--smoke", "--workdir", str(tmp_path / "runs"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    run_dir = Path(run["run_dir"])
    nodes = journal_nodes(run_dir)
    searched = {n["stage"] for n in nodes.values() if n["operation"] != "seed_eval"} & {1, 2, 3}
    reranks = {e["stage"]: e for e in events(run_dir) if e["type"] == "seed_rerank"}
    bests = {e["stage"]: e["node_id"] for e in events(run_dir) if e["type"] == "stage_best"}
    assert [s["stage"] for s in run["stages"]] == sorted(searched)
    for s in run["stages"]:
        r = reranks[s["stage"]]
        assert s["best"] == bests[s["stage"]] and s["metric_choice"] == r["node_id"]
        assert s["candidates"] == r["candidates"] and s["changed"] == r["changed"]
        assert s["changed"] == (bests[s["stage"]] != r["node_id"])
        assert s["extra_seed_runs"] == sum(
            n["operation"] == "seed_eval" and n["parent_id"] in r["candidates"] and n["stage"] == s["stage"]
            for n in nodes.values()
        )
    summary = result["summary"]
    assert summary["stages"] == len(searched)
    assert summary["changed"] == sum(bests[k] != reranks[k]["node_id"] for k in searched)
    assert summary["seed_runs"] == sum(n["operation"] == "seed_eval" for n in nodes.values())
    assert f"best changed by the mean over seeds: {summary['changed']} of {summary['stages']}" in (
        capsys.readouterr().out
    )
