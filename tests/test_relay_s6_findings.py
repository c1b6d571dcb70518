"""Issue 28, relay run s6 (label noise, a capable model answering from the request alone): the
node-side gaps its critiques named. Each test runs a scripted pipeline and reads what the prompts
really carried (prompt logs), checked against the run's own files (reviews, journal, events)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run


def _section(text: str, heading: str) -> str:
    """The text of a prompt's ``## heading`` section, up to the next ``## `` heading."""
    start = text.find(f"## {heading}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 4)
    return text[start : end if end >= 0 else len(text)]


def _protocol_nodes(run_dir: Path) -> dict[int, str]:
    """Stage -> the node its evaluation protocol was fixed on (the last ``eval_protocol`` event)."""
    return {int(e["stage"]): str(e["node_id"]) for e in events(run_dir) if e["type"] == "eval_protocol"}


class HeadlineReview(ExampleResponder):
    """Reviews that say which configuration of a grid the headline is for (a capable model's
    review of a grid does), naming the node so each protocol node's answer is told apart."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["headline"] = f"L2=0.01, lr=0.1 as run by {ctx.node_id}"
        return json.dumps(review)


def test_the_protocol_carries_the_headline_configuration(tmp_path):
    """Every code prompt that shows a stage's evaluation protocol names the configuration the
    protocol node's review gave for its headline (read from its review.json), with its value
    (from the journal), and says how a node reports its own (relay s6: 001, 005, 016, 020)."""
    code, run_dir, _ = start_run(tmp_path, responder=HeadlineReview())
    assert code == 0
    nodes = journal_nodes(run_dir)
    fixed = _protocol_nodes(run_dir)
    assert len(fixed) >= 3, fixed
    checked: dict[int, int] = {}
    for rec in prompt_records(run_dir):
        if rec.get("phase") != "phase2":
            continue
        protocol = _section(record_text(rec), "Evaluation protocol")
        if not protocol:
            continue
        stage = int(nodes[rec["node_id"]]["stage"])
        ref = fixed[stage]
        review = json.loads((run_dir / "nodes" / ref / "review.json").read_text())
        metric = nodes[ref]["metric"]
        said = f"{ref}'s {metric['name']}={metric['value']:.6g} is for {review['headline']}"
        assert said in protocol, (rec["node_id"], protocol[:800])
        assert "Report each node's headline for this configuration" in protocol
        checked[stage] = checked.get(stage, 0) + 1
    assert len(checked) >= 2, checked  # stage 1's later draft and the later stages' nodes


def test_seed_statistics_say_what_they_are_over_and_show_pairs(tmp_path):
    """Where a prompt first gives a seed mean it says why the search run is left out, and that
    one SEED is the same data for every node (a paired comparison); a re-ranking that compares
    means shows them SEED by SEED with the paired differences — every figure read from the
    journal's seed re-runs (relay s6: 009, 015)."""
    from ai_scientist.treesearch.seeds import num

    code, run_dir, _ = start_run(tmp_path)
    assert code == 0
    nodes = journal_nodes(run_dir)
    reruns = [n for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"]
    assert reruns
    seeds = sorted({int(n["seed"]) for n in reruns})
    said = f"Seed statistics are over the seed re-runs only (SEED {', '.join(map(str, seeds))})"
    summaries = [r for r in prompt_records(run_dir) if r.get("phase") == "summary"]
    shown = 0
    for rec in summaries:
        full = record_text(rec)
        text = _section(full, "This stage")  # the stage's facts
        stage = int(rec["label"].removeprefix("stage"))
        if not any(n["stage"] == stage for n in reruns):
            continue
        assert said in text, rec["label"]
        first_mean = re.search(r"\bmean [-+]?\d|Means over", text)
        assert first_mean and text.index(said) < first_mean.start()
        # why the search run is apart: in the facts, or in an earlier stage's heading before them
        before = full[: full.index(text) + first_mean.start()]
        assert "bias the mean upwards" in before and "a paired comparison" in text
        shown += 1
    assert shown
    # each re-ranking that compared means: its values seed by seed, as the journal has them
    value = {(n["parent_id"], int(n["seed"])): n["metric"]["value"] for n in reruns}
    paired = 0
    for ev in events(run_dir):
        if ev["type"] != "seed_rerank" or not ev.get("means"):
            continue
        text = next(record_text(r) for r in summaries if r["label"] == f"stage{ev['stage']}")
        line = next(ln for ln in text.splitlines() if ln.startswith("Per SEED"))
        for s in seeds:
            have = [nid for nid in ev["means"] if (nid, s) in value]
            if len(have) >= 2:
                assert f"seed {s}: " + ", ".join(f"{nid} {num(value[(nid, s)])}" for nid in have) in line
        chosen = ev.get("chosen") or ev["node_id"]
        for nid in ev["means"]:
            common = [s for s in seeds if (nid, s) in value and (chosen, s) in value]
            if nid != chosen and common:
                diffs = ", ".join(f"{value[(nid, s)] - value[(chosen, s)]:+.4g}" for s in common)
                assert f"{nid} {diffs}" in line, line
        paired += 1
    assert paired, "no re-ranking compared means in this run"
    # the code prompts' protocol says which SEEDs every node gets
    code_calls = [_section(record_text(r), "Evaluation protocol") for r in prompt_records(run_dir)]
    with_seeds = [p for p in code_calls if "- seeds: every node's search run gets SEED=" in p]
    assert with_seeds and all(f"SEED={', '.join(map(str, seeds))}" in p for p in with_seeds)
    # said once a prompt
    for rec in prompt_records(run_dir):
        assert record_text(rec).count("bias the mean upwards") <= 1, (rec["node_id"], rec.get("label"))
    # the proposer's first mean (a heading of an earlier stage, the best node's) says why the
    # search run is apart, in its own line or before
    proposals = 0
    for rec in prompt_records(run_dir):
        text = record_text(rec)
        first_mean = re.search(r"\bmean [-+]?\d", text)
        if rec.get("phase") == "ideas" and first_mean:
            end = text.find("\n", first_mean.start())  # said by the end of that line
            assert "bias the mean upwards" in text[:end], text[max(0, end - 600) : end]
            proposals += 1
    assert proposals


LEVEL_HEADLINE = """
# every node's headline is the same on the search SEED; the re-runs (SEED > 0) measure higher with
# little spread: a relay run's stage-3 nodes equalled the best's search run, below its re-runs' mean
_m = json.load(open("metrics.json"))
_m["metrics"][0]["value"] = 0.7 + (0.05 + 0.001 * SEED if SEED else 0.0)
json.dump(_m, open("metrics.json", "w"))
print(f"val_accuracy={_m['metrics'][0]['value']:.4f}")
"""


class LevelHeadlines(ExampleResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        answer["files"][0]["content"] += LEVEL_HEADLINE
        return json.dumps(answer)


def test_stage_facts_name_the_nodes_without_seed_re_runs_and_why(tmp_path):
    """Every good search node without a seed re-run is named in its stage's facts with why (level
    with the best's search run on the same SEED, not a candidate, an ablation), and a decision
    that re-ran no runner-up says what they were judged against — its value — and that the level
    ones equal the best's search run (relay s6: 024, 030). Derived from the journal and the
    seed_rerank events."""
    from ai_scientist.treesearch.seeds import num

    code, run_dir, _ = start_run(tmp_path, responder=LevelHeadlines())
    assert code == 0
    nodes = journal_nodes(run_dir)
    reruns = {
        n["parent_id"] for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"
    }
    rerank = {int(e["stage"]): e for e in events(run_dir) if e["type"] == "seed_rerank"}
    summaries = {r["label"]: record_text(r) for r in prompt_records(run_dir) if r.get("phase") == "summary"}
    named = level_said = 0
    for stage in sorted({int(n["stage"]) for n in nodes.values()}):
        facts = _section(summaries[f"stage{stage}"], "This stage")
        bare = [
            n
            for n in nodes.values()
            if int(n["stage"]) == stage
            and n["operation"] != "seed_eval"
            and n["status"] == "good"
            and not n.get("incomparable")
            and n["id"] not in reruns
        ]
        line = next((ln for ln in facts.splitlines() if ln.startswith("No seed re-run: ")), "")
        if not bare:
            assert not line, line
            continue
        assert all(n["id"] in line.split(" (one seed")[0] for n in bare), (stage, line)
        named += len(bare)
        ev = rerank.get(stage)
        if ev is None or "threshold" not in ev:
            continue
        level = [n["id"] for n in bare if n["metric"]["value"] == ev["search_value"]]
        decision = next(ln for ln in facts.splitlines() if ln.startswith("Decision: "))
        if level:  # said level with the best's search run: in this line, or by the decision it points to
            assert f"{', '.join(level)}: {'its' if len(level) == 1 else 'their'} headline equals" in line or (
                f"{', '.join(level)}: level with" in line and "the same SEED" in decision
            ), line
        if not ev.get("means") and not ev.get("candidates"):
            assert num(float(ev["reference"]["value"])) in decision, decision
            assert ev["reference"]["from"] in decision
            ups = [u["node_id"] for u in ev["runners_up"] if u["value"] == ev["search_value"]]
            if ups and ev["reference"]["from"] != "search run":
                assert f"{', '.join(ups)} equal" in decision and "the same SEED" in decision, decision
                level_said += 1
    assert named and level_said, (named, level_said)
    # whose runners-up a re-ranking lists: the search-run leader's, named (a relay run read
    # "Runners-up: n0001" right after n0001 was named kept)
    listed = 0
    for stage, ev in rerank.items():
        if ev.get("runners_up"):
            facts = _section(summaries[f"stage{stage}"], "This stage")
            head = f"Runners-up on their search runs, behind {ev['node_id']}: "
            line = next(ln for ln in facts.splitlines() if ln.startswith("Runners-up"))
            assert line.startswith(head) and all(u["node_id"] in line for u in ev["runners_up"]), line
            listed += 1
    assert listed


class AdvisingPlans(ExampleResponder):
    """Plans whose guidance and risks advise changing the data later (a capable model's first
    draft did: "raise noise or lower N_TRAIN/SEP later")."""

    def _phase0(self, text: str, ctx: Any) -> str:
        plan = json.loads(super()._phase0(text, ctx))
        plan["phase_guidance"] = {"phase2": "write experiment.py; keep the SEED handling as it is"}
        plan["risks_and_mitigations"] = ["L2 may not matter: later stages can raise the noise level"]
        return json.dumps(plan)


def test_inherited_plan_advice_against_the_protocol_is_labelled(tmp_path):
    """A code prompt whose Plan advises (Guidance, Risks) changing a setting of its stage's
    evaluation protocol says that advice does not apply, naming each such setting; a line that
    names a setting without advising a change ("keep the SEED handling") is not labelled. The
    settings are the eval_protocol events' parameters (relay s6: 011, 016, 026)."""
    code, run_dir, _ = start_run(tmp_path, responder=AdvisingPlans())
    assert code == 0
    nodes = journal_nodes(run_dir)
    params = {
        int(e["stage"]): [str(p[0]).lstrip("-") for p in e.get("parameters") or []]
        for e in events(run_dir)
        if e["type"] == "eval_protocol"
    }
    labelled = 0
    for rec in prompt_records(run_dir):
        if rec.get("phase") != "phase2":
            continue
        text = record_text(rec)
        plan = _section(text, "Plan")
        if not plan or not _section(text, "Evaluation protocol"):
            continue
        lines = {
            ln.split(":", 1)[0]: ln for ln in plan.splitlines() if ln.startswith(("Guidance:", "Risks:"))
        }
        stage = int(nodes[rec["node_id"]]["stage"])

        def named(line: str, stage: int = stage) -> list[str]:
            words = set(re.findall(r"[a-z0-9_]+", line.lower()))
            return [p for p in params[stage] if p.lower() in words]

        advised, kept = named(lines.get("Risks", "")), named(lines.get("Guidance", ""))
        assert advised and kept, plan  # the run's protocol names both settings
        assert f"advise changing {', '.join(advised)}, it predates the evaluation protocol" in plan, plan
        assert not set(kept) & set(advised)  # SEED: named by a line that keeps it, so not in the label
        labelled += 1
    assert labelled  # the children of stages 2-4 inherit the draft's plan


DICT_SETTING = 'REF={"l2": 0.01, "lr": 0.1} EPOCHS=12'


class DictTunings(ExampleResponder):
    """Tuning ideas whose value is a dict with spaces (the form the proposal's text now allows)."""

    def _ideas(self, text: str, ctx: Any) -> str:
        if ctx.label != "tune":
            return super()._ideas(text, ctx)
        return json.dumps({"ideas": [DICT_SETTING, 'REF={"l2": 0.1, "lr": 0.05} LABEL="two words"']})


def test_a_tuning_value_with_spaces_stays_one_value(tmp_path):
    """The tuning-ideas call says how to write a dict or a value with spaces, and the stage's
    tried table reads such an idea back as whole values: the dict of each tune node's idea (from
    the journal, read with json here) is one cell entry, whole (relay s6: 010)."""
    from ai_scientist.treesearch.parameters import parse_settings

    code, run_dir, _ = start_run(tmp_path, responder=DictTunings())
    assert code == 0
    ideas = [r for r in prompt_records(run_dir) if r.get("phase") == "ideas" and r.get("label") == "tune"]
    assert ideas and all('as JSON, e.g. REF={"l2": 0.01, "lr": 0.1}' in record_text(r) for r in ideas)
    tunes = {nid: n for nid, n in journal_nodes(run_dir).items() if n["operation"] == "tune"}
    assert tunes
    rows = 0
    for rec in prompt_records(run_dir):
        for line in record_text(rec).splitlines():
            nid = line[2:7] if line.startswith("| n") else ""
            if nid not in tunes or "REF" not in line:
                continue
            idea = tunes[nid]["idea"]
            ref = json.loads(idea[idea.index("{") : idea.index("}") + 1])
            cell = next(c for c in line.split(" | ") if c.startswith("REF = "))  # tried table, stage facts
            shown = cell.split("REF = ", 1)[1].split("; ", 1)[0]
            assert json.loads(shown) == ref, line
            assert dict(parse_settings(idea) or []) == {
                k: v for k, v in (p.split(" = ", 1) for p in cell.split("; "))
            }
            rows += 1
    assert rows  # a later call of the stage showed an earlier tuning's row


def test_parse_settings_reads_quoted_bracketed_and_plain_values():
    from ai_scientist.treesearch.parameters import parse_settings

    assert parse_settings("lr=0.05, l2=0.1") == [("lr", "0.05"), ("l2", "0.1")]
    assert parse_settings('TILES=(16, 32) NAME=\'a b\'; D=[1, {"x": "}"}]') == [
        ("TILES", "(16, 32)"),
        ("NAME", "a b"),
        ("D", '[1, {"x": "}"}]'),
    ]
    for words in ("use a cosine schedule", "REF={'l2': 0.01", "LABEL=two words", ""):
        assert parse_settings(words) is None, words


def test_an_ablations_plotting_call_gets_its_baselines_values(tmp_path):
    """An ablation node's plotting call says the parent's files are not readable and gives the
    parent's primary metric (value from the journal) and its seed mean, to draw beside the
    ablation; no other node's plotting call does (relay s6: 028, 029)."""
    code, run_dir, _ = start_run(tmp_path)
    assert code == 0
    nodes = journal_nodes(run_dir)
    ablations = 0
    for rec in prompt_records(run_dir):
        if rec.get("phase") != "phase5_plot":
            continue
        node = nodes[rec["node_id"]]
        text = record_text(rec)
        if node["operation"] != "ablate":
            assert "The script can read this node's files only" not in text
            continue
        parent = nodes[node["parent_id"]]
        m = parent["metric"]
        brief = text[text.index(f"The script can read this node's files only, not {parent['id']}'s.") :]
        line = brief.splitlines()[0]
        assert f"{m['name']}={m['value']:.6g} ({m['dataset']})" in line, line
        reruns = [
            n["metric"]["value"]
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] == parent["id"] and n["status"] == "good"
        ]
        if reruns:
            mean = sum(reruns) / len(reruns)
            assert re.search(rf"mean {mean:.3g}", line) or f"mean {mean:.4g}" in line, line
        ablations += 1
    assert ablations
