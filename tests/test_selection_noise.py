"""Selection that survives seed noise (issue 30): before a stage hands on its best, the runners-up
within the seed noise of it are re-run over the same seeds and ranked by their mean.

The scripted run's tuning node for the second proposed idea is lucky on the search seed: its program
adds 0.02 to its accuracy when SEED is 0 and takes 0.02 off otherwise, so it leads the stage on its
single search run and loses on the mean. Every expectation is computed from the run's records (the
journal's seed re-runs, the resolved config, the events), not from constants of this test.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import yaml
from ai_scientist_testing.scripted import TUNE_IDEAS, ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, start_run

from ai_scientist.cli.main import main
from ai_scientist.treesearch.node import Metric
from ai_scientist.treesearch.seeds import aggregate_seeds, noise_threshold, rank_by_mean, seed_noise

LUCKY_IDEA = TUNE_IDEAS[1]
ACCURACY_LINE = "    acc = correct / len(xva)\n"


class LuckySeed(ExampleResponder):
    """The example's answers; the node tuning ``LUCKY_IDEA`` scores higher on SEED 0 only."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.lucky: list[str] = []

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if f"This node's idea: {LUCKY_IDEA}" in text:
            self.lucky.append(ctx.node_id)
            for f in answer["files"]:
                assert ACCURACY_LINE in f["content"]
                f["content"] = f["content"].replace(
                    ACCURACY_LINE, ACCURACY_LINE + "    acc += 0.02 if SEED == 0 else -0.02\n"
                )
        return json.dumps(answer)


def _seed_values(nodes: dict[str, dict], node_id: str, key: list) -> list[float]:
    return [
        n["metric"]["value"]
        for n in nodes.values()
        if n["operation"] == "seed_eval"
        and n["parent_id"] == node_id
        and n["status"] == "good"
        and [n["metric"]["name"], n["metric"]["direction"], n["metric"]["dataset"]] == key
    ]


def test_candidates_within_seed_noise_are_rerun_and_ranked_by_their_mean(tmp_path, capsys):
    responder = LuckySeed(buggy_nodes=())
    code, run_dir, _ = start_run(tmp_path, responder=responder)
    assert code == 0
    cfg = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())["agent"]
    z = cfg["multi_seed_eval"]["noise_z"]
    limit = cfg["multi_seed_eval"]["rerank_candidates"]
    num_seeds = cfg["multi_seed_eval"]["num_seeds"]
    nodes = journal_nodes(run_dir)
    evs = events(run_dir)
    lucky = responder.lucky[0]
    stage = nodes[lucky]["stage"]
    rerank = next(e for e in evs if e["type"] == "seed_rerank" and e["stage"] == stage)
    key = rerank["metric"]

    # the lucky node led the stage on its single search run (the stage's pool: its good nodes and
    # the node it started from), so the metric alone picked it
    carried = next(e for e in evs if e["type"] == "stage_started" and e["stage"] == stage)["carried_id"]
    pool = [
        n
        for n in nodes.values()
        if ((n["stage"] == stage and n["operation"] != "seed_eval") or n["id"] == carried)
        and n["status"] == "good"
        and not n.get("incomparable")
    ]
    value = {n["id"]: n["metric"]["value"] for n in pool}
    assert rerank["node_id"] == lucky == max(value, key=lambda i: (value[i], -int(i[1:])))
    assert rerank["search_value"] == value[lucky]

    # the noise estimate: the journal's seed re-runs, pooled within nodes (its numbers recorded)
    groups = rerank["noise"]["groups"]
    assert groups and all(groups[nid] == _seed_values(nodes, nid, key) for nid in groups)
    multi = [v for v in groups.values() if len(v) >= 2]
    dof = sum(len(v) - 1 for v in multi)
    sigma = math.sqrt(sum(statistics.variance(v) * (len(v) - 1) for v in multi) / dof)
    assert rerank["noise"]["dof"] == dof and math.isclose(rerank["noise"]["sigma"], sigma)
    threshold = z * sigma * math.sqrt(2)
    assert math.isclose(rerank["threshold"], threshold)

    # the candidates: the runners-up not clearly worse than what the lucky node measures over its
    # seed re-runs (their mean, not the search run it was chosen on), best first, bounded
    lucky_mean = statistics.fmean(_seed_values(nodes, lucky, key))
    assert rerank["reference"]["value"] == lucky_mean
    ups = sorted((i for i in value if i != lucky), key=lambda i: (-value[i], int(i[1:])))
    # (a runner-up re-run over seeds before is ranked by its mean, never re-run)
    within = [i for i in ups if value[i] >= lucky_mean - threshold and i not in rerank["measured"]][:limit]
    assert rerank["candidates"] == within and len(within) >= 1

    # each was re-run over the same seeds; the means are the journal's, the best mean wins
    plan = [cfg["seed"] + i for i in range(1, num_seeds + 1)]
    for nid in [lucky, *within]:
        runs = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["parent_id"] == nid]
        assert sorted(n["seed"] for n in runs) == plan
        values = _seed_values(nodes, nid, key)
        assert rerank["means"][nid]["values"] == values
        assert math.isclose(rerank["means"][nid]["mean"], statistics.fmean(values))
    # compared: the lucky node, the candidates and the runners-up re-run before (their means)
    compared = [lucky, *within, *rerank["measured"]]
    means = {nid: statistics.fmean(_seed_values(nodes, nid, key)) for nid in compared}
    chosen = max(means, key=lambda i: (means[i], -compared.index(i)))
    assert rerank["chosen"] == chosen != lucky and rerank["changed"] is True
    assert means[chosen] > means[lucky]  # the lucky seed lost on the mean

    # the decision is what the stage hands on, and where it is recorded and shown
    best = next(e for e in evs if e["type"] == "stage_best" and e["stage"] == stage)
    assert best["node_id"] == chosen and best["method"] == "seed_mean"
    assert best["evidence"]["seed_rerank"] == {
        k: v for k, v in rerank.items() if k not in ("ts", "type", "stage")
    }
    state = json.loads((run_dir / "state.json").read_text())
    assert state["stages"][str(stage)]["best"]["node_id"] == chosen
    assert state["stages"][str(stage)]["seeds"]["node_id"] == chosen
    nxt = next(e for e in evs if e["type"] == "stage_started" and e["stage"] == stage + 1)
    assert nxt["carried_id"] == chosen
    summary = json.loads((run_dir / "stage_summaries" / f"stage{stage}.json").read_text())
    assert summary["best_node"] == chosen and summary["seed_rerank"]["chosen"] == chosen
    facts = next(
        r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == f"stage{stage}"
    )
    text = facts["messages"][-1]["content"]
    assert f"Decision: {rerank['decision']}." in text and "Means over the seed re-runs:" in text
    # the noise estimate names the re-runs it pooled, with their values
    pooled = "; ".join(
        f"{nid} {', '.join(f'{v:.4g}' for v in vals)}" for nid, vals in rerank["noise"]["groups"].items()
    )
    said = f"over the re-runs done before this decision: {pooled}"
    dof = rerank["noise"]["dof"]
    # a sigma pooled with fewer than 3 degrees of freedom is called rough, its dof said first
    assert said + ("); within the noise" if dof < 3 else f"; {dof} degrees of freedom") in text
    assert (f"rough: {dof} degree" in text) == (dof < 3)
    capsys.readouterr()
    assert main(["logs", str(run_dir), "stages"]) == 0
    out = capsys.readouterr().out
    assert f"stage {stage} best: {chosen} (seed_mean" in out and rerank["decision"] in out

    # the cost stays bounded: the stage's seed re-runs are num_seeds per re-run node at most
    stage_runs = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["stage"] == stage]
    assert len(stage_runs) <= num_seeds * (1 + limit)


def test_without_reranking_the_lucky_seed_is_handed_on(tmp_path):
    responder = LuckySeed(buggy_nodes=())
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.multi_seed_eval.rerank_candidates=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=responder,
    )
    assert code == 0
    evs = events(run_dir)
    lucky = responder.lucky[0]
    stage = journal_nodes(run_dir)[lucky]["stage"]
    assert not [e for e in evs if e["type"] == "seed_rerank"]
    best = next(e for e in evs if e["type"] == "stage_best" and e["stage"] == stage)
    assert best["node_id"] == lucky and best["method"] == "metric"


def test_noise_estimator_threshold_and_ranking():
    noise = seed_noise({"a": [0.80, 0.82, 0.84], "b": [0.70, 0.74], "c": [0.9]})
    # pooled: ((0.02^2 + 0 + 0.02^2) + (0.02^2 * 2)) / (2 + 1)
    assert noise.dof == 3 and math.isclose(noise.sigma, math.sqrt(0.0016 / 3))
    assert seed_noise({"c": [0.9]}).sigma is None
    assert math.isclose(noise_threshold(0.01, 2.0), 0.02 * math.sqrt(2))
    agg = lambda *v, d="maximize": aggregate_seeds([Metric("acc", x, d) for x in v])  # noqa: E731
    assert rank_by_mean([("a", agg(0.8, 0.8)), ("b", agg(0.9, 0.7)), ("c", None), ("d", agg(0.81))]) == [
        "d",
        "a",
        "b",
    ]
    assert rank_by_mean([("a", agg(1.0, d="minimize")), ("b", agg(0.5, d="minimize"))]) == ["b", "a"]


class FarLucky(LuckySeed):
    """The tuning node of the first proposed idea leads by far on the search seed only (beyond the
    seed noise of its stage, so no re-run of the others is triggered by its search value)."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(ExampleResponder._phase2(self, text, ctx))
        if f"This node's idea: {TUNE_IDEAS[0]}" in text:
            self.lucky.append(ctx.node_id)
            for f in answer["files"]:
                f["content"] = f["content"].replace(
                    ACCURACY_LINE, ACCURACY_LINE + "    acc += 0.3 if SEED == 0 else -0.05\n"
                )
        return json.dumps(answer)


def test_a_runner_up_re_run_before_is_ranked_by_its_mean(tmp_path):
    """The node a stage starts from was re-run over seeds at its own stage's end: at the next
    stage's end its mean is compared at no cost, however far its single search run lies behind."""
    responder = FarLucky(buggy_nodes=())
    code, run_dir, _ = start_run(tmp_path, "agent.stages.stage2_max_iters=1", responder=responder)
    assert code == 0 and responder.lucky
    lucky = responder.lucky[0]
    nodes = journal_nodes(run_dir)
    evs = events(run_dir)
    stage = nodes[lucky]["stage"]
    started = next(e for e in evs if e["type"] == "stage_started" and e["stage"] == stage)
    carried = started["carried_id"]
    rerank = next(e for e in evs if e["type"] == "seed_rerank" and e["stage"] == stage)
    key = rerank["metric"]
    assert rerank["node_id"] == lucky  # it led on its search run
    # the carried node lay beyond the noise by its search value: no candidate, yet compared
    assert abs(nodes[lucky]["metric"]["value"] - nodes[carried]["metric"]["value"]) > rerank["threshold"]
    assert carried not in rerank["candidates"] and carried in rerank["measured"]
    before = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["parent_id"] == carried]
    assert before and all(n["stage"] < stage for n in before)  # re-run at its own stage's end, not again
    means = {nid: statistics.fmean(_seed_values(nodes, nid, key)) for nid in (lucky, carried)}
    assert rerank["means"][carried]["mean"] == means[carried]
    chosen = max(means, key=lambda i: means[i])
    assert chosen == carried and rerank["chosen"] == carried and rerank["changed"] is True
    best = next(e for e in evs if e["type"] == "stage_best" and e["stage"] == stage)
    assert best["node_id"] == carried and best["method"] == "seed_mean"
    assert "re-run before" in rerank["decision"]
