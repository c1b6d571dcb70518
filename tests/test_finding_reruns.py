"""Issue 28 (relay s6 "Still open"): a stage-3 finding measured in extra metrics is re-run over seeds.

Seed re-runs follow the headline, which a node adding a condition leaves unchanged: a relay run's
no-noise control, measured only in metrics its parent did not report, got no re-run and reached no
later prompt with a spread. Here every stage-3 node adds a metric named after itself (new to any
parent, moving with SEED) and scores a little lower than its parent, so it is never the stage's
best; the stage end re-runs up to ``agent.multi_seed_eval.finding_reruns`` of them over the same
seeds. ``rerank_candidates=0`` keeps the headline's runners-up out, so every re-run of a stage-3
node comes from this rule. Expectations are read from the run's journal, events, state and prompt
logs.
"""

from __future__ import annotations

import json
import re

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, prompt_records, start_run

from ai_scientist.treesearch.best import rank_nodes
from ai_scientist.treesearch.journal import Journal
from ai_scientist.treesearch.seeds import new_metrics, num

# appended to the example's program in stage 3: a control metric of its own, moving with SEED
CONTROL = """
import json as _j, os as _o
_m = _j.load(open("metrics.json"))
_s = int(_o.environ.get("SEED", "0"))
_m["metrics"][0]["value"] = round(_m["metrics"][0]["value"] - 0.05, 6)
_m["metrics"].append({{"name": "control_{nid}_acc", "value": round(0.61 + 0.013 * _s + 0.001 * {k}, 6),
                      "direction": "maximize", "dataset": "synthetic"}})
_j.dump(_m, open("metrics.json", "w"))
"""


class StageThreeControls(ExampleResponder):
    """Every stage-3 code answer adds ``control_<node>_acc`` and lowers the headline a little."""

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        if ctx.stage == "stage3" and answer.get("files"):
            k = int(ctx.node_id[1:])
            answer["files"][0]["content"] += CONTROL.format(nid=ctx.node_id, k=k)
        return json.dumps(answer)


COMMON = (
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=3",
    "agent.stages.stage4_max_iters=0",
    "agent.multi_seed_eval.rerank_candidates=0",
)


def _stage3_controls(view: Journal) -> list[str]:
    """The good stage-3 search nodes reporting a metric their parent did not (from the journal)."""
    out = []
    for nid in view.ids("search", 3):
        n = view.get(nid)
        parent = view.get(n.parent_id) if n.parent_id and n.parent_id in view else None
        if n.is_good and new_metrics(n, parent):
            out.append(nid)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    latex_or_skip(("pdflatex",))
    matplotlib_or_skip()
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("findings"),
        *COMMON,
        "agent.multi_seed_eval.finding_reruns=1",
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=0",
        responder=StageThreeControls(),
    )
    assert code == 0
    return run_dir


def test_a_stage3_node_with_a_new_metric_is_re_run_over_the_same_seeds_within_the_cap(run_dir):
    view = Journal(run_dir / "journal.jsonl")
    controls = _stage3_controls(view)
    assert len(controls) >= 2, "the workload did not give two stage-3 nodes with a new metric"
    state = json.loads((run_dir / "state.json").read_text())
    best = state["stages"]["3"]["best"]["node_id"]
    (decision,) = [e for e in events(run_dir) if e["type"] == "finding_seeds" and e["stage"] == 3]
    assert decision["cap"] == 1 and len(decision["node_ids"]) == 1  # the cap holds
    eligible = [n for n in controls if n != best]
    # every eligible node, the best-ranked first (headline, then creation order)
    assert decision["node_ids"] + decision["left_out"] == [
        n.id for n in rank_nodes([view.get(i) for i in eligible])
    ]
    (chosen,) = decision["node_ids"]
    best_seeds = sorted(r.seed for r in view.seed_runs(best))
    reruns = view.seed_runs(chosen)
    assert sorted(r.seed for r in reruns) == best_seeds == [1, 2]  # the same seeds as the headline's
    assert all(r.operation == "seed_eval" and r.stage == 3 and r.is_good for r in reruns)
    for other in decision["left_out"]:
        assert view.seed_runs(other) == []
    # the stage's seed record (state.json and the seed_eval event) carries its new metric's aggregate
    rec = state["stages"]["3"]["seeds"]["findings"]
    assert rec["runs"][chosen] == [r.id for r in reruns]
    (agg,) = rec["aggregates"][chosen]
    values = [next(m.value for m in r.metrics if m.name == f"control_{chosen}_acc") for r in reruns]
    assert agg["name"] == f"control_{chosen}_acc" and agg["values"] == values
    assert values[0] != values[1]  # it moves with SEED: a spread to show


def test_its_new_metric_s_seed_values_and_spread_reach_the_stage_facts_and_the_writer(run_dir):
    view = Journal(run_dir / "journal.jsonl")
    (decision,) = [e for e in events(run_dir) if e["type"] == "finding_seeds" and e["stage"] == 3]
    (chosen,) = decision["node_ids"]
    node = view.get(chosen)
    reruns = view.seed_runs(chosen)
    name = f"control_{chosen}_acc"
    search = next(m.value for m in node.metrics if m.name == name)
    values = [next(m.value for m in r.metrics if m.name == name) for r in reruns]
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    (summary,) = [r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == "stage3"]
    facts = "\n".join(m["content"] for m in summary["messages"] if isinstance(m.get("content"), str))
    line = next(ln for ln in facts.splitlines() if ln.startswith("Re-run over seeds for its finding"))
    assert f": {chosen}, over {len(reruns)} seed re-runs" in line
    assert f"{name} [synthetic]: search {num(search)}, re-runs {', '.join(num(v) for v in values)}" in line
    assert f"mean {num(mean)} ± " in line and f"(sd {sd:.2g})" in line
    # the node left out by the cap is named with why
    for other in decision["left_out"]:
        assert re.search(rf"{other}[^.]* also reports? metrics .*finding_reruns", facts), facts[:4000]
    # its metric x seed table lists the new metric right after the primary
    table = facts.split(f"Seed re-runs of {chosen} (", 1)[1]
    assert table.splitlines()[4].startswith(f"| {name}")
    # the writer's prompt: the node's re-runs with the new metric's values (mean ± s.e., values)
    writer = [
        r
        for r in prompt_records(run_dir)
        if r["phase"] == "writeup" and r["label"] not in ("citation_queries",)
    ]
    assert writer
    text = "\n".join(m["content"] for m in writer[0]["messages"] if isinstance(m.get("content"), str))
    se = sd / len(values) ** 0.5
    assert f"{name}={num(mean)} ± {se:.2g} ({', '.join(num(v) for v in values)})" in text, text[:3000]


def test_zero_turns_finding_re_runs_off(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path,
        *COMMON,
        "agent.multi_seed_eval.finding_reruns=0",
        responder=StageThreeControls(),
    )
    assert code == 0
    view = Journal(run_dir / "journal.jsonl")
    controls = _stage3_controls(view)
    assert len(controls) >= 2
    best = json.loads((run_dir / "state.json").read_text())["stages"]["3"]["best"]["node_id"]
    assert not [e for e in events(run_dir) if e["type"] == "finding_seeds"]
    assert all(view.seed_runs(n) == [] for n in controls if n != best)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("-1", "agent.multi_seed_eval.finding_reruns: must be >= 0, got -1"),
        ("two", "agent.multi_seed_eval.finding_reruns"),
    ],
)
def test_a_malformed_cap_exits_2_naming_the_key(tmp_path, value, expected):
    from pipeline_support import IDEA, cli

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("{}\n")
    res = cli(
        "run",
        str(cfg),
        "--idea",
        str(IDEA),
        "--out",
        str(tmp_path / "out"),
        "--set",
        f"agent.multi_seed_eval.finding_reruns={value}",
    )
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr and "Traceback" not in res.stderr


KILLED_RUN = """
import sys
sys.path[:0] = [{tests!r}]
from pipeline_support import run_args
from test_finding_reruns import COMMON, StageThreeControls
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.cli.commands import execute, setup_run
from pathlib import Path
run, resources = setup_run(run_args(Path({tmp!r}), *COMMON, "agent.multi_seed_eval.finding_reruns=1"))
execute(run, resources=resources, backend=ScriptedBackend(StageThreeControls()))
"""


def test_a_resumed_stage_end_re_runs_the_recorded_node_not_the_next_one(tmp_path):
    """Killed once the finding re-runs are journaled (failpoint ``finding_seeds:3``): the resumed
    stage end reuses the recorded choice; recomputed, the node re-run in full would no longer
    qualify and the cap would move to the next node."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))],
        env={**os.environ, "AI_SCIENTIST_FAILPOINTS": "finding_seeds:3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    run_dir = tmp_path / "experiments" / "run"
    (before,) = [e for e in events(run_dir) if e["type"] == "finding_seeds" and e["stage"] == 3]
    view = Journal(run_dir / "journal.jsonl")
    (chosen,) = before["node_ids"]
    first = [r.id for r in view.seed_runs(chosen)]
    assert len(first) == 2 and all(view.get(i).is_good for i in first)

    from ai_scientist.cli.commands import execute, open_locked
    from ai_scientist.llm.scripted_backend import ScriptedBackend

    assert (
        execute(open_locked(str(run_dir), []), backend=ScriptedBackend(StageThreeControls()), resumed=True)
        == 0
    )
    after = [e for e in events(run_dir) if e["type"] == "finding_seeds" and e["stage"] == 3]
    assert [e["node_ids"] for e in after] == [[chosen]]  # recorded once, reused
    view = Journal(run_dir / "journal.jsonl")
    assert [r.id for r in view.seed_runs(chosen)] == first  # not run again
    assert all(view.seed_runs(n) == [] for n in before["left_out"])  # the cap did not move
    state = json.loads((run_dir / "state.json").read_text())
    assert list(state["stages"]["3"]["seeds"]["findings"]["runs"]) == [chosen]


# 3 -------------------------------------------------------------------------------------------
# the machine facts say where a working set leaves the last-level cache (relay s6 mm: a 24 MiB
# matrix under a 260 MiB L3, and no prompt said the protocol never left the cache)


def test_the_machine_facts_say_above_which_working_set_the_run_is_memory_bound(tmp_path):
    from test_environment_hpc_facts import _host_env, _sandbox

    from ai_scientist.execution.cpu_facts import last_level_cache
    from ai_scientist.execution.environment import machine_text, render_environment
    from ai_scientist.execution.sandbox_probe import parse_probe

    env = _host_env(tmp_path)  # a fake /sys tree: L1d, L1i, L2, L3 with their sizes and sharing
    caches = env["cpu"]["caches"]
    llc = last_level_cache(caches)
    # the highest level's data or unified cache, its size and sharing as /sys gave them
    top = max(caches, key=lambda n: int(n[1:].rstrip("diu")))
    assert llc == {"name": top, "bytes": caches[top]["bytes"], "shared_by": caches[top]["shared_by"]}
    mib = f"{caches[top]['bytes'] / 1048576:.1f}".replace(".0", "")
    want = f"- Working sets above {mib} MiB (the {top}) are memory-bound here"
    lines = machine_text(env).splitlines()
    assert any(ln.startswith(want) for ln in lines), lines
    assert "measures the cache regime only" in next(ln for ln in lines if ln.startswith(want))
    # the node prompts' environment block (the sandbox hides /sys: the host's caches) says it too
    env["sandbox"] = _sandbox(**parse_probe("os\tDebian"))
    assert want in render_environment(env)
    # an instruction cache is never the last level; no cache known: no line
    assert last_level_cache({"L1i": {"bytes": 32768}, "L1d": {"bytes": 49152}})["name"] == "L1d"
    assert last_level_cache({}) is None
    env["cpu"]["caches"] = {}
    env.pop("sandbox")
    assert "Working sets" not in machine_text(env)
