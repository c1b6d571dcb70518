"""Stage inputs: stage-2 code prompts carry the settings tried with their metrics, stage-4 code
prompts the ablation plan and the ablations done, the idea proposer sees the metrics of what was
tried, and a tight per-layer budget cuts the worst rows first with a ledger entry.

Expectations come from the run's own journal and events (which nodes existed, their ideas and
metrics, which ablations were planned), never from typed values.
"""

from __future__ import annotations

import json
import re

import pytest
from ai_scientist_testing.scripted import ABLATE_IDEAS, TUNE_IDEAS, ExampleResponder
from pipeline_support import content_text, events, journal_nodes, prompt_records, record_text, start_run

from ai_scientist.context.tokens import counter_for, messages_tokens
from ai_scientist.treesearch.node import node_sort_key

# three nodes in stages 2 and 4, the proposer asked before each (one idea per answer)
LONGER = [
    "agent.stages.stage2_max_iters=3",
    "agent.stages.stage2_good_nodes=3",
    "agent.stages.stage4_max_iters=3",
]


class OneIdeaAtATime(ExampleResponder):
    """Tuning: offers one setting not yet in the prompt per call, so the proposer is asked again
    after each node and sees what the earlier ones scored. Ablations: the whole plan at once (stage
    4 ends when its plan is done)."""

    def _ideas(self, text, ctx):
        if ctx.label == "ablate":
            return json.dumps({"ideas": ABLATE_IDEAS})
        fresh = [i for i in TUNE_IDEAS if i not in text]
        return json.dumps({"ideas": fresh[:1] or TUNE_IDEAS[:1]})


def _section(record: dict, title: str) -> str | None:
    """The text of the ``## title`` section of the record's user message (None if absent)."""
    # a figure critique's message is a list of parts (its images between text parts)
    text = "\n".join(content_text(m.get("content")) for m in record["messages"])
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return m.group(1) if m else None


def _ledger(record: dict, layer: str) -> dict | None:
    return next((e for e in record["ledger"] if e["layer"] == layer), None)


def _metric(node: dict) -> str:
    m = node["metric"]
    return f"{m['name']}={m['value']:.6g}"


def _earlier_idea_nodes(nodes: dict, stage: int, before: str) -> list[dict]:
    """The stage's tune/ablate nodes created before node ``before``."""
    return [
        n
        for nid, n in nodes.items()
        if n["stage"] == stage and n["idea"] and node_sort_key(nid) < node_sort_key(before)
    ]


def _assert_ranked_rows(section: str, expected: list[dict]) -> None:
    """Every expected node has its row (idea, id, metric or failure); the rows are in creation
    order and the last line ranks the good ones best first."""
    for n in expected:
        row = next((line for line in section.splitlines() if f"| {n['id']} |" in line), None)
        assert row is not None, f"no row for {n['id']} in:\n{section}"
        assert n["idea"] in row
        if n["status"] == "good":
            assert _metric(n) in row, row
        else:
            assert "failed:" in row, row
    good = [n for n in expected if n["status"] == "good"]
    sign = -1 if good and good[0]["metric"]["direction"] == "maximize" else 1
    want = [
        n["id"] for n in sorted(good, key=lambda n: (sign * n["metric"]["value"], node_sort_key(n["id"])))
    ]
    rows = re.findall(r"^\| (n\d{4}) \|", section, re.M)
    assert rows == sorted(rows, key=node_sort_key), f"rows not in creation order: {rows}"
    # the ranking line (a cut table of one good row has none: the row is the ranking)
    ranking = next((line for line in section.splitlines() if line.startswith("Ranked best first: ")), None)
    shown = [i for i in re.findall(r"n\d{4}", ranking or "") if i in want] if len(want) > 1 else want
    assert shown == want, f"not ranked best first: {shown} vs {want}"


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stage_inputs")
    code, run_dir, _ = start_run(tmp, *LONGER, responder=OneIdeaAtATime())
    assert code == 0
    return run_dir


def test_stage2_code_prompts_carry_tried_settings_with_metrics(long_run):
    nodes = journal_nodes(long_run)
    records = [r for r in prompt_records(long_run) if r["phase"] == "phase2" and r["stage"] == "stage2"]
    assert records, "no stage-2 code prompt"
    checked = 0
    for r in records:
        me = nodes[r["node_id"]]
        if me["operation"] == "seed_eval":
            continue
        earlier = _earlier_idea_nodes(nodes, 2, me["id"])
        section = _section(r, "Hyper-parameters tried")
        if not earlier:
            assert section is None and _ledger(r, "tried_hyperparams")["action"] == "dropped"
            continue
        assert section is not None, f"{me['id']}: no tried settings"
        _assert_ranked_rows(section, earlier)
        # the baseline row names the node the stage started from, with its metric
        carried = nodes[me["parent_id"]] if me["operation"] == "tune" else None
        if carried is not None:
            assert f"{carried['id']} {_metric(carried)}" in section
        assert me["idea"] not in section or me["operation"] != "tune"  # its own idea is not "tried"
        assert _ledger(r, "tried_hyperparams")["action"] == "kept"
        checked += 1
    assert checked >= 2, "the run should have stage-2 nodes after the first"


def test_stage4_code_prompts_carry_the_ablation_plan_and_the_ablations_done(long_run):
    nodes = journal_nodes(long_run)
    evs = events(long_run)
    records = [r for r in prompt_records(long_run) if r["phase"] == "phase2" and r["stage"] == "stage4"]
    checked = 0
    for r in records:
        me = nodes[r["node_id"]]
        if me["operation"] != "ablate":
            continue
        # the plan at the node's creation: every stage-4 idea planned before its node_selected event
        upto = next(i for i, e in enumerate(evs) if e["type"] == "node_selected" and e["node_id"] == me["id"])
        planned = [
            i for e in evs[:upto] if e["type"] == "ideas_planned" and e["stage"] == 4 for i in e["new"]
        ]
        plan = _section(r, "Ablation plan")
        assert plan is not None and _ledger(r, "ablation_plan")["action"] == "kept"
        lines = [line for line in plan.splitlines() if re.match(r"\d+\. ", line)]
        assert [line.split(". ", 1)[1].split(" — ")[0] for line in lines] == planned
        assert f"{me['idea']} — this node" in plan
        earlier = _earlier_idea_nodes(nodes, 4, me["id"])
        for n in earlier:
            assert f"{n['idea']} — done ({n['id']}: " in plan
        done = _section(r, "Ablations done")
        if earlier:
            assert done is not None
            _assert_ranked_rows(done, earlier)
            checked += 1
    assert checked >= 2


def test_the_idea_proposer_sees_the_metrics_of_what_was_tried(long_run):
    nodes = journal_nodes(long_run)
    evs = events(long_run)
    props = [r for r in prompt_records(long_run) if r["phase"] == "ideas"]  # in call order
    planned = [i for i, e in enumerate(evs) if e["type"] == "ideas_planned"]  # one per proposal
    assert len(props) == len(planned) and {r["label"] for r in props} == {"tune", "research", "ablate"}
    seen = 0
    for r, at in zip(props, planned, strict=True):
        stage = evs[at]["stage"]
        assert r["stage"] == f"stage{stage}"
        # the stage's tune/ablate nodes selected before this proposal, each with its result
        before = {e["node_id"] for e in evs[:at] if e["type"] == "node_selected" and e["stage"] == stage}
        if r["label"] == "research":  # stage 3 has no tried table: each node is one line of the brief
            assert all(f"- {nid} (" in record_text(r) for nid in before)
            continue
        expected = [n for nid, n in nodes.items() if nid in before and n["idea"]]
        section = _section(r, "Hyper-parameters tried" if r["label"] == "tune" else "Ablations done")
        if not expected:
            assert section is None or "(none yet)" in section
            continue
        _assert_ranked_rows(section, expected)
        seen += sum(n["status"] == "good" for n in expected)
    assert seen >= 2, "the proposer was never shown a tried idea's metric"


def test_a_code_prompt_whose_parent_failed_carries_the_parents_error(tmp_path):
    # both drafts crash, so stage 1 debugs them; the later stages are skipped
    code, run_dir, _ = start_run(
        tmp_path,
        *(f"agent.stages.stage{n}_max_iters=0" for n in (2, 3, 4)),
        responder=ExampleResponder(buggy_nodes=("n0001", "n0002")),
    )
    assert code == 0
    nodes = journal_nodes(run_dir)
    checked = 0
    for r in prompt_records(run_dir):
        me = nodes.get(r["node_id"])
        if r["phase"] != "phase2" or me is None or not me["parent_id"]:
            continue
        parent = nodes[me["parent_id"]]
        section = _section(r, "Parent's failure")
        if parent["status"] != "buggy":
            assert section is None
            continue
        assert section is not None and section.strip() == parent["error"].strip()
        assert _ledger(r, "parent_error")["action"] == "kept"
        checked += 1
    assert checked >= 1, "the run should debug its buggy first draft"


def test_a_tight_layer_budget_cuts_the_worst_rows_and_the_ledger_says_so(tmp_path):
    # the whole plan at once (a proposer shown a cut table may offer a cut idea again: the repeat
    # is refused and the stage ends before its third node); caps that leave the best row or so
    caps = {"tried_hyperparams": 100, "tried_ablations": 90}
    code, run_dir, _ = start_run(
        tmp_path, *LONGER, *(f"context.layers.{layer}.max_tokens={cap}" for layer, cap in caps.items())
    )
    assert code == 0
    nodes = journal_nodes(run_dir)
    cut = {"tried_hyperparams": 0, "tried_ablations": 0}
    kept_rows = {"tried_hyperparams": 0, "tried_ablations": 0}
    titles = {"tried_hyperparams": "Hyper-parameters tried", "tried_ablations": "Ablations done"}
    for r in prompt_records(run_dir):
        for layer, title in titles.items():
            entry = _ledger(r, layer)
            if entry is None or entry["action"] == "dropped":
                continue
            cap = caps[layer]
            assert entry["tokens_after"] <= cap, entry
            counter = counter_for(r["model"])
            assert messages_tokens(r["messages"], counter) <= 6000  # context.max_prompt_tokens default
            if entry["action"] != "truncated":
                continue
            cut[layer] += 1
            assert (
                entry["tokens_before"] > cap and "rows" in entry["reason"] and "max_tokens" in entry["reason"]
            )
            section = _section(r, title)
            m = re.search(r"\[\.\.\. (\d+) lower-ranked rows cut \((\d+) total\) \.\.\.\]", section)
            assert m, section
            kept = re.findall(r"^\| (n\d{4}) \|", section, re.M)
            assert len(kept) + int(m.group(1)) == int(m.group(2))
            _assert_ranked_rows(section, [nodes[i] for i in kept])
            if r["phase"] == "phase2":  # a node's table: what the stage had tried before it
                me = nodes[r["node_id"]]
                earlier = _earlier_idea_nodes(nodes, me["stage"], me["id"])
                assert int(m.group(2)) == len(earlier)
                # the survivors are the best of them: every cut good node scores no better
                cut_good = [n for n in earlier if n["id"] not in kept and n["status"] == "good"]
                kept_good = [nodes[i] for i in kept if nodes[i]["status"] == "good"]

                def score(n):
                    return n["metric"]["value"] * (1 if n["metric"]["direction"] == "maximize" else -1)

                if kept_good:  # (a cap may leave the header alone)
                    assert all(score(c) <= min(map(score, kept_good)) for c in cut_good)
                kept_rows[layer] += len(kept_good)
    assert all(cut.values()), f"a layer never went over the tiny budget: {cut}"
    assert all(kept_rows.values()), f"the cap should leave the best row in some cut table: {kept_rows}"
