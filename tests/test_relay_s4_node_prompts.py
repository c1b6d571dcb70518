"""Issue 28, relay run s4 (node-level findings): what a capable model still could not see.

Read from the prompt logs and files of one scripted run (FAST, three stage-3 nodes) whose
experiment writes a second per-epoch loss list holding nulls (non-finite losses written as null):

1. the seed-noise estimate (pooled sigma and the noise band) reaches the reviewers, the tuning
   and ablation code calls and the idea proposers of every stage after the first re-runs;
2. a data file's structure says a list holds nulls, and how many;
3. an ablation node's review and critique say chance level can be its finding, and the review
   criteria of every call say so for an ablated condition;
4. an improve node, told to build on what scored well, sees the best sibling's changes as code;
5. an execution review sees the head and tail of every loss list of the node's data files.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

# a second loss list, every seventh epoch's value null: what a program that maps NaN to None
# writes (train_loss stays whole: the scripted plotting script reads it)
NULL_LOSSES = """
import json as _json
with open("results.json") as _fh:
    _res = _json.load(_fh)
_res["val_loss"] = [None if i % 7 == 3 else 1.1 * v for i, v in enumerate(_res["train_loss"])]
with open("results.json", "w") as _fh:
    _json.dump(_res, _fh)
"""


class NullLossResponder(ExampleResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            if f["path"] == "experiment.py" and "results.json" in f["content"]:
                f["content"] += NULL_LOSSES
                if re.search(r"^Operation: improve$", text, re.M):  # each improvement its own epochs
                    epochs = f"EPOCHS = {3 + int(ctx.node_id[1:]) % 5}"
                    f["content"] = re.sub(r"^EPOCHS = \d+$", epochs, f["content"], flags=re.M)
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("relay_s4"),
        "agent.stages.stage3_max_iters=3",
        responder=NullLossResponder(),
    )
    assert code == 0
    return run_dir


def _pooled(groups: dict[str, list[float]]) -> tuple[float, int]:
    ss = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in groups.values() if len(v) >= 2)
    dof = sum(len(v) - 1 for v in groups.values() if len(v) >= 2)
    return math.sqrt(ss / dof), dof


# 1 -------------------------------------------------------------------------------------------


def test_the_seed_noise_reaches_reviewers_tuners_and_ablation_writers(run):
    """A call of stage S sees the noise of the seed re-runs of the stages before it (re-runs are
    made at a stage's end), with the band noise_z x sigma x sqrt 2 the re-ranking uses."""
    nodes = journal_nodes(run)
    cfg = yaml.safe_load((run / "config.resolved.yaml").read_text())
    z = cfg["agent"]["multi_seed_eval"]["noise_z"]
    seeds = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"]

    def expected(stage: int) -> tuple[float, int, float]:
        groups: dict[str, list[float]] = {}
        for n in seeds:
            if n["stage"] < stage:
                groups.setdefault(n["parent_id"], []).append(n["metric"]["value"])
        sigma, dof = _pooled(groups)
        return sigma, dof, z * sigma * math.sqrt(2)

    checked: set[str] = set()
    for rec in prompt_records(run):
        nid = rec["node_id"]
        if nid == "run":  # the idea proposers: tuning at stage 2's start, ablations at stage 4's
            stage = {"tune": 2, "ablate": 4}.get(str(rec.get("label")), 0)
            if rec.get("phase") != "ideas" or not stage:
                continue
            what = f"ideas_{rec['label']}"
        else:
            node = nodes[nid]
            stage = node["stage"]
            if stage < 2 or node["operation"] == "seed_eval":
                continue
            if rec["phase"] == "review":
                what = "review"
            elif rec["phase"] == "phase2" and node["operation"] in ("tune", "ablate", "improve"):
                what = node["operation"]
            else:
                continue
        sigma, dof, band = expected(stage)
        text = record_text(rec)
        said = (
            f"rough: {dof} degree{'s' if dof != 1 else ''} of freedom"
            if dof < 3
            else f"{dof} degrees of freedom"
        )
        assert f"sigma {sigma:.3g}" in text and said in text, (nid, what)
        assert f"closer than {band:.3g}" in text, (nid, what)
        checked.add(what)
    assert checked >= {"review", "tune", "ablate", "improve", "ideas_tune", "ideas_ablate"}, checked


def test_stage_one_calls_have_no_noise_estimate_yet(run):
    """No node has been re-run before stage 1's nodes: nothing is claimed."""
    nodes = journal_nodes(run)
    for rec in prompt_records(run):
        if rec["node_id"] != "run" and nodes[rec["node_id"]]["stage"] == 1:
            assert "seed noise of" not in record_text(rec)


# 2 -------------------------------------------------------------------------------------------


def test_a_list_holding_nulls_is_outlined_with_its_null_count(run):
    plots = [r for r in prompt_records(run) if r.get("phase") == "phase5_plot"]
    assert plots
    for rec in plots:
        data = json.loads((run / "nodes" / rec["node_id"] / "workspace" / "results.json").read_text())
        losses = data["val_loss"]
        nulls = sum(v is None for v in losses)
        assert nulls  # the experiment really wrote nulls
        text = record_text(rec)
        assert f'"val_loss": [{len(losses)} x float|null ({nulls} null)]' in text, rec["node_id"]
        assert f'"train_loss": [{len(data["train_loss"])} x float]' in text  # no null, none said


# 3 -------------------------------------------------------------------------------------------


def _brief(rec: dict) -> str:
    return record_text(rec).rsplit("## This call", 1)[-1]


def test_an_ablations_review_and_critique_say_chance_level_can_be_its_finding(run):
    nodes = journal_nodes(run)
    seen: dict[bool, set[str]] = {True: set(), False: set()}
    for rec in prompt_records(run):
        nid = rec["node_id"]
        if nid == "run" or rec["phase"] not in ("review", "phase5_vlm"):
            continue
        ablation = nodes[nid]["operation"] == "ablate"
        brief = _brief(rec)
        assert (
            "This node is an ablation: its headline measures the ablated" in brief
            and "A result at chance level" in brief
        ) == ablation, (
            nid,
            rec["phase"],
        )
        seen[ablation].add(rec["phase"])
        # the shared criteria: chance level is a bug, except as an ablation's finding
        text = record_text(rec)
        assert "accuracy at chance level" in text
        assert re.search(
            r"An ablation \(an ablation node, or an ablated condition[^)]*\) that ends at\s+chance level",
            text,
        )
    assert seen[True] == seen[False] == {"review", "phase5_vlm"}


# 5 -------------------------------------------------------------------------------------------


def _section(rec: dict, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", record_text(rec), re.S | re.M)
    return m.group(1) if m else ""


def test_a_review_sees_the_head_and_tail_of_each_loss_list(run):
    """The execution review's "Run result" shows each loss list of the node's data files with its
    length, null count and first and last values (read from the node's results.json)."""
    reviews = [r for r in prompt_records(run) if r["node_id"] != "run" and r["phase"] == "review"]
    assert reviews
    for rec in reviews:
        data = json.loads((run / "nodes" / rec["node_id"] / "workspace" / "results.json").read_text())
        shown = _section(rec, "Run result")
        # the file's record reporting the node's headline value is said to be what it measures
        head = json.loads((run / "nodes" / rec["node_id"] / "run.json").read_text())["metrics"][0]
        what = f"the condition {head['name']} reports; " if data.get(head["name"]) == head["value"] else ""
        for key in ("train_loss", "val_loss"):
            values = data[key]
            nulls = sum(v is None for v in values)
            # 4 significant digits, more where two of the values shown would read alike
            ends = [v for v in (values if len(values) <= 7 else values[:3] + values[-3:]) if v is not None]
            d = next(d for d in range(4, 18) if len({f"{v:.{d}g}" for v in ends}) == len(set(ends)))
            fmt = ["null" if v is None else f"{v:.{d}g}" for v in values]
            line = f"- results.json {key} ({what}{len(values)} values{f', {nulls} null' if nulls else ''}): "
            assert line in shown, (rec["node_id"], key, shown)
            row = shown.split(line, 1)[1].splitlines()[0]
            assert row.startswith(", ".join(fmt[:3])) and row.endswith(", ".join(fmt[-3:])), row
        # the criterion says where a loss's course is judged from
        assert "judge it from the per-step values or figures shown" in record_text(rec)


# 4 -------------------------------------------------------------------------------------------


def _files(run: Path, nid: str) -> dict[str, str]:
    answer = json.loads((run / "nodes" / nid / "code_answer.json").read_text())
    return {f["path"]: f["content"] for f in answer["files"]}


def test_an_improve_node_sees_the_best_siblings_changes_as_code(run):
    """The best working node of the stage (not the parent) finished before the node was scheduled
    (journal times, ranked by its metric, ties to the earlier node) is named in its own section before the siblings' table, with the lines its
    program changed from the node's parent's program (difflib on both nodes' code answers)."""
    nodes = journal_nodes(run)
    checked = 0
    for rec in prompt_records(run):
        nid = rec["node_id"]
        if nid == "run" or rec["phase"] != "phase2" or nodes[nid]["operation"] != "improve":
            continue
        node = nodes[nid]
        done = [
            n
            for n in nodes.values()
            if n["stage"] == node["stage"]
            and n["id"] not in (nid, node["parent_id"])  # the parent's program is shown as its own
            and n["operation"] not in ("seed_eval",)
            and n["status"] == "good"
            and n["finished_at"]
            and n["finished_at"] <= node["created_at"]
        ]
        # its own section, before the stage's tables (it changes only with a new best: the prefix
        # cache keeps it while the tables grow)
        text = _section(rec, "Best other node of this stage")
        if not done:
            assert not text
            continue
        best = sorted(done, key=lambda n: (-n["metric"]["value"], n["id"]))[0]
        assert f"besides the one you start from, {best['id']} (" in text, (nid, text)
        whole = record_text(rec)
        assert whole.index("## Best other node of this stage") < whole.index("## Other nodes of this stage")
        before, after = _files(run, node["parent_id"]), _files(run, best["id"])
        changed = [
            ln[1:]
            for ln in difflib.unified_diff(
                before["experiment.py"].splitlines(), after["experiment.py"].splitlines()
            )
            if ln.startswith("+") and not ln.startswith("+++")
        ]
        assert changed  # the sibling really changed the program
        for line in changed:
            assert f"+{line}" in text, (nid, line)
        checked += 1
    assert checked >= 1


# 1b ------------------------------------------------------------------------------------------


def test_a_best_node_line_gives_its_search_value_and_seed_mean_and_what_decided(run):
    """The stage facts' best-node line and the proposers' "Best node so far" quote the search run
    and the mean over the node's seed re-runs (journal), and the facts say which decided: the mean
    when the stage re-ranked over seeds (its seed_rerank event compared means), else the search
    run; the ablation stage (no seed_rerank event) decided nothing."""
    nodes = journal_nodes(run)
    reranked = {
        e["stage"]: bool(e.get("means"))
        for e in (json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines() if ln.strip())
        if e["type"] == "seed_rerank"
    }

    def mean_of(nid: str) -> tuple[int, float]:
        vals = [
            n["metric"]["value"]
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] == nid and n["status"] == "good"
        ]
        return len(vals), sum(vals) / len(vals)

    facts = 0
    for rec in prompt_records(run):
        if rec["node_id"] != "run":
            continue
        text = record_text(rec)
        if rec["phase"] == "ideas":
            m = re.search(r"^Best node so far: (n\d+): ", text, re.M)
            assert m, rec["label"]
            n, mean = mean_of(m.group(1))
            value = nodes[m.group(1)]["metric"]["value"]
            line = text[m.start() :].splitlines()[0]
            # the re-runs' mean, and why the search run is left out said by then (issue 28, relay s6)
            from ai_scientist.runloop.stage_facts import SEARCH_RUN_APART

            assert f"val_accuracy={value:.4g} is its search run; over its {n} seed re-runs" in line
            assert f": mean {mean:.4g}" in line
            assert SEARCH_RUN_APART in text[: m.start() + len(line)]
            continue
        m = re.search(
            r"^(?:Best node (?:handed to the next stage|of the run)|Node kept for the (?:next stage|run) "
            r"\(a tie within the seed noise(?: by a rough band, not settled)?\)): (n\d+)\b.*$",
            text,
            re.M,
        )
        if not m:
            continue
        n, mean = mean_of(m.group(1))
        line = m.group(0)
        assert (
            f"val_accuracy={nodes[m.group(1)]['metric']['value']:.4g} (maximize, synthetic) on its search run"
            in line
        )
        assert f"mean {mean:.4g} over its {n} seed re-runs" in line
        stage = int(re.search(r"stage(\d)", rec["label"] + rec["stage"]).group(1))
        if stage not in reranked:  # the ablation stage keeps its carried node: no choice made
            assert f"on its search run (mean {mean:.4g}" in line and "decided" not in line, line
        elif reranked[stage]:
            assert "which decided the choice (re-ranking over seeds, below)" in line, line
        else:
            assert "on its search run, which decided the choice (mean" in line, line
        facts += 1
    assert facts == 4


# 3b ------------------------------------------------------------------------------------------


def test_earlier_summaries_advice_on_protocol_settings_is_said_not_to_apply(run):
    """A code call showing the earlier stages' summaries and the evaluation protocol names the
    protocol's parameters (the node's frozen stage inputs) as settings the summaries' advice does
    not change; the summary call itself is told they are the protocol even where the idea calls
    them knobs (the bundled idea's Risks do)."""
    checked = 0
    for rec in prompt_records(run):
        nid = rec["node_id"]
        if nid == "run" or rec["phase"] != "phase2":
            continue
        inputs = json.loads((run / "nodes" / nid / "stage_inputs.json").read_text())
        params = (inputs.get("evaluation_protocol") or {}).get("parameters") or []
        previous = _section(rec, "Previous stages")
        if not previous.strip() or not params:
            continue
        names = ", ".join(p[0] for p in params)
        assert (
            f"Where these summaries advise changing {names} (the evaluation protocol, below), keep them"
            in previous
        )
        checked += 1
    assert checked
    idea = (run / "idea.md").read_text()
    assert "knobs to adjust" in idea
    summaries = [r for r in prompt_records(run) if r["node_id"] == "run" and r["phase"] == "summary"]
    assert summaries
    for rec in summaries:
        assert (
            "even where the research idea\n  calls them knobs to adjust: never advise changing them"
            in record_text(rec)
        )
