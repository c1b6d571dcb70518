"""Issue 32 / issue 30 item 4: every number of the paper matched against the run's measurements
(``paper/claims.json``); a model writer still writes the paper when its backend is not the
embedded one, and a number it types that no measurement has is listed and counted; the embedded
model writes no review."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from ai_scientist_testing.scripted import PAPER_SECTIONS, ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, journal_nodes, start_run
from test_report_support import REVIEW, ScriptedClient, default_responder, report_cfg

from ai_scientist.reporting.claims import (
    Claim,
    Measurement,
    check_claims,
    extract_numbers,
    match_claim,
    nearest,
    paper_body,
)
from ai_scientist.reporting.pipeline import LOCAL_REVIEW_SKIPPED, run_reporting
from ai_scientist.reporting.review import review_paper
from ai_scientist.reporting.writeup import stage_summaries


def _texts(tex: str) -> list[str]:
    body, _ = paper_body(tex)
    return [c.text for c in extract_numbers(body)]


def test_what_counts_as_a_number():
    tex = (
        "\\documentclass[10pt]{article}\\usepackage[margin=1in]{geometry}\n\\begin{document}\n"
        "Accuracy 0.851 over 3 seeds, 85.1\\% of 1,234 points; lr 1.2e-3.\n"
        "See Figure~\\ref{fig:1} and \\cite{smith2020}; \\label{tab:stage2}\n"
        "Node n0007, L2, GPT-4 and SmolLM2-135M are names. % a comment 42\n"
        "\\includegraphics[width=0.7\\linewidth]{figures/std_2.png}\n"
        "\\texttt{phase4: exit 1, line 23} \\begin{quote}lr=0.05 from the plan\\end{quote}\n"
        "\\begin{tabular}{llp{5.5cm}} a & b \\\\[2pt] \\end{tabular} stages 1-4.\n"
        # the template's figure measuring: a register and a log line, no claim
        "\\setbox0\\vbox{x}\\typeout{ai-scientist-figure fig:1 \\the\\dimexpr\\ht0+\\dp0\\relax}\\box0\n"
        "\\end{document}\n"
    )
    assert _texts(tex) == ["0.851", "3", "85.1%", "1,234", "1.2e-3", "1", "4"]
    body, first = paper_body(tex)
    claims = extract_numbers(body, first)
    assert claims[0].line == 3 and "Accuracy 0.851" in claims[0].context
    assert claims[2].percent and claims[3].value == 1234 and claims[4].decimals == 4


def _claim(text: str) -> Claim:
    body = f"x {text} y"
    return extract_numbers(body)[0]


@pytest.mark.parametrize(
    ("printed", "value", "ok"),
    [
        ("0.795", 0.7949999999999999, True),  # rounding to the printed precision
        ("0.8", 0.7925, True),
        ("0.79", 0.7975, False),
        ("0.018", 0.0175, True),
        ("85.1 %", 0.851, True),  # a fraction printed as a percentage
        ("85.1\\%", 85.1, True),  # a metric already in percent
        ("97.3 %", 0.851, False),
        ("2", 2, True),  # integers: exact
        ("2", 2.4, False),
        ("123", 123.4, True),  # a measured value >= 10 rounded to an integer
        ("1", 0.95, False),
        ("1.235e+04", 12345.6, True),
        ("-0.5", 0.5, True),  # the sign is not compared
    ],
)
def test_matching_rules(printed, value, ok):
    m = Measurement(float(value), "src", "metric", float(value).is_integer())
    assert (match_claim(_claim(printed), [m]) is not None) is ok


def test_closest_source_wins():
    ms = [
        Measurement(0.7925, "n0002 val_accuracy", "metric"),
        Measurement(0.79, "n0010 val_accuracy", "metric"),
    ]
    assert match_claim(_claim("0.79"), ms).source == "n0010 val_accuracy"


def test_nearest_names_results_first_one_per_value_and_never_the_config():
    ms = [
        Measurement(2000.0, "config memory.core_max_chars", "config", True),
        Measurement(0.81, "n0001 acc", "metric"),
        Measurement(0.97, "n0001/curve.json:[3]", "result file"),
        Measurement(0.815, "stage 1 seed re-runs of n0001: mean", "seed statistic"),
        Measurement(0.81, "n0002 acc (seed 1 re-run of n0001)", "metric", one_seed=True),
        Measurement(0.9, "n0004 acc (seed 2 re-run of n0001)", "metric", one_seed=True),
        Measurement(0.2, "n0003 acc", "metric"),  # more than NEAR away
    ]
    assert [m.source for m in nearest(_claim("97.3 %"), ms, k=4)] == [
        "stage 1 seed re-runs of n0001: mean",  # results first, the closest first
        "n0001 acc",  # (n0002's 0.81 is the same value: named once)
        "n0004 acc (seed 2 re-run of n0001)",  # one seed's value after the summaries, however close
        "n0001/curve.json:[3]",  # a saved file's number after the results, however close
    ]
    assert nearest(_claim("2019"), ms) == []  # the pipeline's config is no result a year stood for


def _best_of_last_stage(run) -> tuple[str, str, dict, dict]:
    """(last stage, its best node, that node's metric, its seed statistic) from the run's records."""
    stages = json.loads((run / "state.json").read_text())["stages"]
    last = max(stages, key=int)
    best = stages[last]["best"]["node_id"]
    return last, best, journal_nodes(run)[best]["metric"], stages[last]["seeds"]["aggregate"]


def test_check_claims_on_a_run(tmp_path, run_copy):
    run = run_copy(tmp_path)
    stage, best, metric, seeds = _best_of_last_stage(run)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text(
        f"\\begin{{document}}\nBest {metric['name']} {metric['value']:.4f} (stage {stage}), seeds "
        f"{seeds['mean']:.4f} $\\pm$ {seeds['stderr']:.4f} over {seeds['n']} re-runs; "
        "it beats 97.3\\% of baselines since 2031.\n\\end{document}\n"
    )
    result = check_claims(run, "model")
    saved = json.loads((run / "paper" / "claims.json").read_text())
    assert saved == result
    src = {c["text"]: c["source"] for c in result["claims"]}
    # a node whose metric has that value (the best, or a node tied with it)
    same = {
        nid for nid, n in journal_nodes(run).items() if (n["metric"] or {}).get("value") == metric["value"]
    }
    who, name = src[f"{metric['value']:.4f}"].split()[:2]
    assert best in same and who in same and name == metric["name"]
    assert src[f"{seeds['mean']:.4f}"].endswith(": mean") and src[f"{seeds['stderr']:.4f}"].endswith(
        ": stderr"
    )
    assert src[stage] == "stage number" and src[str(seeds["n"])]
    assert result["unmatched_numbers"] == ["97.3%", "2031"] and result["unmatched"] == 2
    assert all("nearest" in c for c in result["claims"] if c["source"] is None)
    assert all("nearest" not in c for c in result["claims"] if c["source"] is not None)


def _json_leaves(data, out):
    if isinstance(data, dict):
        for v in data.values():
            _json_leaves(v, out)
    elif isinstance(data, list):
        for v in data:
            _json_leaves(v, out)
    elif isinstance(data, float) and not isinstance(data, bool):
        out.append(data)
    return out


def test_numbers_of_any_good_node_and_of_its_codes_parameters_are_traced(tmp_path, run_copy):
    """The writer is given every good node's results: a number from a node that was no stage's
    best (its result file) or from a node's code (an epoch count stated as the setup) is traced."""
    from ai_scientist.reporting.claims import run_measurements
    from ai_scientist.treesearch.parameters import parameters

    run = run_copy(tmp_path)
    nodes = journal_nodes(run)
    state = json.loads((run / "state.json").read_text())
    best = {s["best"]["node_id"] for s in state["stages"].values() if s.get("best")}
    bests = best | {
        n["id"] for n in nodes.values() if n.get("parent_id") in best and n["operation"] == "seed_eval"
    }
    others = [
        n["id"]
        for n in nodes.values()
        if n["status"] == "good" and n["operation"] != "seed_eval" and n["id"] not in bests
    ]
    assert others, "the scripted run has good nodes that were no stage's best"
    # what was traced before: metrics, the best nodes' files, the config
    # what ranks before a code parameter (the lower-priority sources cannot take its claim)
    later = ("result file", "run output", "code parameter", "machine", "config", "idea", "reference")
    before = [m for m in run_measurements(run) if m.kind not in later]
    known = {f"{m.value:.4f}" for m in before}
    for nid in bests:
        for f in (run / "nodes" / nid / "workspace").rglob("*.json"):
            known |= {f"{v:.4f}" for v in _json_leaves(json.loads(f.read_text()), [])}
    fresh = [
        (nid, v)
        for nid in others
        for f in sorted((run / "nodes" / nid / "workspace").rglob("*.json"))
        if not any(part.startswith(".") for part in f.relative_to(run / "nodes" / nid / "workspace").parts)
        for v in _json_leaves(json.loads(f.read_text()), [])
        if f"{v:.4f}" not in known and abs(v) < 1e6
    ]
    assert fresh, "no value of a non-best node's result files is measured elsewhere"
    nid, value = fresh[0]
    # a parameter value of some good node's code that nothing else measured
    consts = [
        (n, p.name, c.text)
        for n in [nid, *others, *sorted(bests)]
        if nodes[n]["status"] == "good" and (run / "nodes" / n / "code_answer.json").exists()
        for p in parameters(
            {
                f["path"]: f["content"]
                for f in json.loads((run / "nodes" / n / "code_answer.json").read_text())["files"]
            }
        )
        for c in extract_numbers(p.value)
        if match_claim(c, before) is None
    ]
    assert consts, "no parameter value of the run's code is measured nowhere else"
    _, name, const = consts[0]
    (run / "paper").mkdir(exist_ok=True)
    (run / "paper" / "paper.tex").write_text(
        f"\\begin{{document}}\nThe other run reached {value:.4f}, trained with {const} as its {name.lower()}.\n"
        "\\end{document}\n"
    )
    result = check_claims(run, "model")
    src = {c["text"]: (c["source"], c["kind"]) for c in result["claims"]}
    assert src[f"{value:.4f}"][1] == "result file" and src[f"{value:.4f}"][0].startswith(nid + "/")
    assert src[const][1] == "code parameter" and src[const][0].endswith(f" code {name}"), src[const]
    assert result["unmatched"] == 0


class PrintsMore(ExampleResponder):
    """The example's answers; each program also prints a number it saves nowhere."""

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer.get("files") or []:
            if f["path"].endswith(".py"):
                f["content"] += "\nprint('weight norm', 7.251)\n"
        return json.dumps(answer)


def test_a_number_a_good_nodes_program_printed_is_traced(tmp_path):
    from ai_scientist.reporting.claims import run_measurements

    code, run, _ = start_run(tmp_path, "agent.stages.stage1_max_iters=1", "agent.stages.stage2_max_iters=1",
                             "agent.stages.stage3_max_iters=1", "agent.stages.stage4_max_iters=1",
                             responder=PrintsMore(buggy_nodes=()))  # fmt: skip
    assert code == 0
    rest = [m for m in run_measurements(run) if m.kind != "run output"]
    nodes = journal_nodes(run)
    printed = [
        (nid, c.text)
        for nid, n in sorted(nodes.items())
        if n["status"] == "good" and n["operation"] != "seed_eval"
        for f in sorted((run / "nodes" / nid / "exec").glob("*_phase4_*.json"))
        for c in extract_numbers(json.loads(f.read_text())["stdout"])
        if match_claim(c, rest) is None
    ]
    assert printed, "the programs printed a number nothing else holds"
    nid, number = printed[0]
    (run / "paper").mkdir(exist_ok=True)
    (run / "paper" / "paper.tex").write_text(
        f"\\begin{{document}}\nThe weight norm was {number}.\n\\end{{document}}\n"
    )
    claim = next(c for c in check_claims(run, "model")["claims"] if c["text"] == number)
    assert claim["kind"] == "run output" and claim["source"].startswith(f"{nid} output of "), claim


def test_the_reviewers_see_the_claims_of_the_paper_they_read_and_the_measurements(tmp_path, run_copy):
    run = run_copy(tmp_path)
    _, _, metric, _ = _best_of_last_stage(run)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text(
        f"\\begin{{document}}\nThe best {metric['name']} is {metric['value']:.4f}; the draft reached 0.3141."
        "\n\\end{document}\n"
    )
    # a claims file of an earlier paper (older than paper.tex) is not what the reviewers get
    (run / "paper" / "claims.json").write_text(json.dumps({"claims": [], "numbers": 0, "unmatched": 0}))
    os.utime(run / "paper" / "claims.json", (1, 1))
    client = ScriptedClient(lambda *a: json.dumps(REVIEW), supports_vision=False)
    review_paper(run, report_cfg(tmp_path, num_reviews=1, num_reflections=0), client)
    claims = json.loads((run / "paper" / "claims.json").read_text())  # checked again for the review
    assert claims["unmatched_numbers"] == ["0.3141"]  # no measurement of the run has it
    (call,) = client.calls
    measured = _layer({"messages": call["messages"]}, "What the run measured")
    (row,) = [c for c in claims["claims"] if c["source"] is None]
    near = "; ".join(f"{n['source']} = {n['value']:.6g}" for n in row["nearest"])
    assert f'- "0.3141" in "... {row["context"]} ..." (nearest measured: {near}).' in measured
    assert (
        "2 numbers in the paper's text, tables and captions: 1 traced to a measurement of the run, 1 not traced:"
        in measured
    )
    for stage in stage_summaries(run):  # each stage's best with the metrics its records hold
        if stage.get("best_node") and not stage.get("best_from_stage"):
            assert f"  Best: {stage['best_node']}: {stage['metrics']}" in measured


class TypingWriter(ExampleResponder):
    """The example's answers; the writer's paper states an accuracy and a year nobody measured."""

    def _writeup(self, text, ctx):
        if "citation" in ctx.label:
            return super()._writeup(text, ctx)
        return json.dumps(
            {**PAPER_SECTIONS, "results": "The penalty reaches 97.3 % accuracy, a first since 2019."}
        )


@pytest.mark.slow
def test_model_writer_still_writes_and_an_unmeasured_number_is_listed(tmp_path, capsys):
    latex_or_skip()
    matplotlib_or_skip()
    code, run_dir, responder = start_run(
        tmp_path,
        "report.enabled=true",  # report.writer: auto (the default), the scripted backend is not local
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        "agent.plots.critique=false",
        responder=TypingWriter(),
    )
    assert code == 0
    assert [e["writer"] for e in events(run_dir) if e["type"] == "report_writer"] == ["model"]
    assert [c for c in responder.calls if c[1] == "writeup"]  # the model was asked
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert writeup["writer"] == "model" and writeup["pdf"]
    assert "The penalty reaches 97.3" in (run_dir / "paper" / "paper.tex").read_text()
    claims = json.loads((run_dir / "paper" / "claims.json").read_text())
    assert claims["unmatched_numbers"] == ["97.3 %", "2019"]
    unmatched = [c for c in claims["claims"] if c["source"] is None]
    assert [c["kind"] for c in unmatched] == ["unmatched", "unmatched"]
    assert "97.3" in unmatched[0]["context"] and unmatched[0]["line"] > 0
    review = json.loads((run_dir / "review.json").read_text())
    assert review["reviews"] and not review.get("skipped")  # a capable reviewer still reviews
    # the reflection prompt really sent named each, where it stands; the reviewers were told
    logs = {p.stem.split("_", 1)[1]: json.loads(p.read_text()) for p in (run_dir / "nodes" / "run" / "prompt_logs").glob("*.json")}  # fmt: skip
    reflect = logs["writeup_reflect_1"]["messages"][-1]["content"]
    reviews = [r for k, r in logs.items() if k.startswith("review_review")]
    assert len(reviews) == 2  # the review and its reflection
    for c in unmatched:
        assert f'  - "{c["text"]}" in "... {c["context"]} ...": ' in reflect
        for r in reviews:
            assert f'- "{c["text"]}" in "... {c["context"]} ..."' in _layer(r, "What the run measured")
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert [r["unmatched"] for r in writeup["reflections"]] == [claims["unmatched_numbers"]]
    measured = _layer(reviews[0], "What the run measured")
    assert f"{claims['numbers']} numbers in the paper's text, tables and captions: 0 traced" in measured
    # the stage's best as its end chose it, with the metric its record holds
    state = json.loads((run_dir / "state.json").read_text())
    best1 = state["stages"]["1"]["best"]["node_id"]
    node = json.loads((run_dir / "nodes" / best1 / "node.json").read_text())
    assert f"  Best: {best1}: {node['metric']['name']}={node['metric']['value']:.6g}" in measured
    err = capsys.readouterr().err
    assert "  written by: the writer model; report.writer=auto" in err
    assert (
        f"  claims: {claims['numbers']} numbers in the paper, 2 unmatched by any measurement: 97.3 %, 2019"
        in err
    )


def test_a_review_of_a_run_whose_records_are_torn_still_runs_and_says_what_it_lacks(tmp_path, run_copy):
    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text("\\begin{document}\nLoss 0.25.\n\\end{document}\n")
    (run / "state.json").write_text('{"stages": {')  # a crash mid-write
    try:
        json.loads((run / "state.json").read_text())
    except ValueError as exc:
        why = f"{type(exc).__name__}: {exc}"
    client = ScriptedClient(lambda *a: json.dumps(REVIEW), supports_vision=False)
    result = review_paper(run, report_cfg(tmp_path, num_reviews=1, num_reflections=0), client)
    assert result["reviews"] == [REVIEW]
    measured = _layer({"messages": client.calls[0]["messages"]}, "What the run measured")
    assert f"Not available: the check of the paper's numbers failed ({why})." in measured
    assert f"Not available: the run's records could not be read ({why})." in measured


def _layer(record: dict, title: str) -> str:
    """The text of the layer titled ``title`` in a prompt-log record's messages."""
    parts = [[m["content"]] if isinstance(m["content"], str) else m["content"] for m in record["messages"]]
    text = "\n".join(p if isinstance(p, str) else p.get("text", "") for ps in parts for p in ps)
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_embedded_model_writes_no_review(tmp_path, run_copy):
    latex_or_skip()
    run = run_copy(tmp_path)
    (run / "paper").mkdir(exist_ok=True)  # the pipeline made it empty
    (run / "paper" / "paper.tex").write_text("\\begin{document}x\\end{document}\n")
    (run / "review.json").write_text(json.dumps({"decision": "Reject", "reviews": [{"overall": 4}]}))
    client = ScriptedClient(default_responder())
    client.backend = SimpleNamespace(name="local")  # type: ignore[attr-defined]
    out = run_reporting(run, report_cfg(tmp_path, num_reviews=1), client, None, from_phase="review")
    assert out["review"]["status"] == "skipped" and out["review"]["reason"] == LOCAL_REVIEW_SKIPPED
    assert client.calls == []
    review = json.loads((run / "review.json").read_text())
    assert (
        review["skipped"] == LOCAL_REVIEW_SKIPPED and review["decision"] is None and review["reviews"] == []
    )


def test_the_machines_numbers_are_traced_in_the_units_a_paper_prints(tmp_path, run_copy):
    """A benchmark's paper states its machine: the L2 and L3 sizes (recorded in bytes) in KiB or
    MiB, the core count (a C relay run's checker sent back the 260 MiB L3 as unmeasured)."""
    run = run_copy(tmp_path)
    cpu = json.loads((run / "environment.json").read_text())["cpu"]
    l3 = cpu["caches"]["L3"]["bytes"] / 1024**2
    l2 = cpu["caches"]["L2"]["bytes"] / 1024
    cores = cpu["usable_cores"]
    (run / "paper").mkdir(exist_ok=True)
    (run / "paper" / "paper.tex").write_text(
        f"\\begin{{document}}\nAn L3 of {l3:g} MiB and an L2 of {l2:g} KiB on {cores} cores.\n\\end{{document}}\n"
    )
    claims = {c["text"]: c for c in check_claims(run, "model")["claims"]}

    def caches_of(value: float) -> set[str]:
        # the caches whose size prints as this number in KiB or MiB: a machine whose L3 in MiB
        # equals its L1d in KiB (32) traces the number to either (the check reads no unit)
        return {k for k, c in cpu["caches"].items() if value in (c["bytes"] / 1024, c["bytes"] / 1024**2)}

    for value in (l3, l2):
        claim = claims[f"{value:g}"]
        assert claim["kind"] == "machine" and any(k in claim["source"] for k in caches_of(value)), claim
    assert claims[str(cores)]["source"] is not None
