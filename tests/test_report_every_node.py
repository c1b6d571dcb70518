"""Issue 28 (report side): what a capable model found missing in the report's inputs — every good
node and its seed re-runs reach the aggregation manifest, the stage summary, the writer and the
reviewer, with one seed statistic; every number the writer was given is a source for the number
check; the page-overflow message's word budget fits the measured overflow; the writer's context
shows each node's findings once.

Every expectation is read from a scripted run's own files (journal.jsonl, figures/manifest.json,
paper/*, the prompt logs whose ``messages`` are exactly what was sent), never from constants of
the code under test.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import PAPER_SECTIONS, ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run

from ai_scientist.reporting.claims import WRITER_INPUT, extract_numbers, match_claim, run_measurements
from ai_scientist.reporting.manifest import _compact_metrics, describe_file

CAVEAT = "Caveat: {nid} measured one draw of the data, so its value moves with the seed it ran under."


class EveryNodeResponder(ExampleResponder):
    """The example's answers; each review's summary carries a long caveat naming its node (a
    capable model's findings run to several sentences), and the writer states one non-best node's
    seed-re-run mean and standard error, read from its own prompt (as a model reads them), and
    one number the run never produced."""

    def __init__(self) -> None:
        super().__init__()
        self.stated: list[str] = []

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["findings"] = f"{review['findings']}. {CAVEAT.format(nid=ctx.node_id)}"
        return json.dumps(review)

    def _writeup(self, text: str, ctx: Any) -> str:
        if "citation" in ctx.label or ctx.label != "sections":
            return super()._writeup(text, ctx)
        # each node's re-run line: "Its 2 seed re-runs (...), mean ± s.e. ...: [..] name=M ± S (v1, v2)"
        found = re.findall(r"^- (n\d+) [^\n]*\n  Over \d+ seed re-runs \([^)]*\), [^:]*: "
                           r"\w+=([0-9.]+) ± ([0-9.]+)", text, re.M)  # fmt: skip
        assert found, "the writer's prompt shows no node's seed re-runs"
        self.stated = [x for _, mean, se in found for x in (mean, se)]
        results = " ".join(
            f"Over its seed re-runs {nid} reached {mean} $\\pm$ {se}." for nid, mean, se in found
        )
        return json.dumps(
            {**PAPER_SECTIONS, "results": results + " An unmeasured 0.3141 is printed as well."}
        )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, EveryNodeResponder]:
    latex_or_skip()
    matplotlib_or_skip()
    responder = EveryNodeResponder()
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("every_node"),
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=2",
        "agent.stages.stage4_max_iters=1",
        responder=responder,
    )
    assert code == 0, run_dir
    return run_dir, responder


def _good_search(nodes: dict[str, dict]) -> list[dict]:
    return [n for n in nodes.values() if n["status"] == "good" and n["operation"] != "seed_eval"]


def _reruns(nodes: dict[str, dict], nid: str) -> list[dict]:
    return [n for n in nodes.values() if n["operation"] == "seed_eval" and n["parent_id"] == nid]


def _one(records: list[dict], phase: str, label: str) -> dict:
    (rec,) = [r for r in records if r["phase"] == phase and r["label"] == label]
    return rec


# 1 -------------------------------------------------------------------------------------------


def test_every_good_node_and_its_seed_reruns_reach_the_aggregation_manifest(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    manifest = json.loads((run_dir / "figures" / "manifest.json").read_text())
    listed = {e["node_id"]: e for e in manifest["nodes"]}
    good = _good_search(nodes)
    assert {n["stage"] for n in good} == {1, 2, 3, 4}
    assert any(_reruns(nodes, n["id"]) for n in good if listed.get(n["id"], {}).get("role") == "stage_node")
    for n in good:  # the run has at most 3 good nodes a stage besides its best: all of them
        assert n["id"] in listed, n["id"]
        for r in _reruns(nodes, n["id"]):
            assert listed[r["id"]]["role"] == "seed_run" and listed[r["id"]]["seed_of"] == n["id"]
            assert listed[r["id"]]["seed"] == r["seed"]
    # entries in stage order; a node's metrics as the journal records them (name -> value)
    stages = [e["stage"] for e in manifest["nodes"]]
    assert stages == sorted(stages)
    for e in manifest["nodes"]:
        written = nodes[e["node_id"]]["metrics"] or [nodes[e["node_id"]]["metric"]]
        expect = {_key(m, written): float(f"{m['value']:.6g}") for m in written}
        if e["role"] == "seed_run":  # a seed re-run: its values by name, labelled by its seed
            assert not {"metric_values", "operation", "summary"} & set(e)
        assert e["metrics"] == expect
    # the plotter's prompt shows them all, and the one seed statistic
    plot = _one(prompt_records(run_dir), "plots", "aggregate_r0")
    sent = record_text(plot)
    for e in manifest["nodes"]:
        assert f'"node_id": "{e["node_id"]}"' in sent
    assert manifest["seed_statistic"] in plot["messages"][0]["content"]


def _key(m: dict, written: list[dict]) -> str:
    """A metric's key in the manifest: its name, with its dataset when the node has several."""
    several = len({w.get("dataset") for w in written}) > 1
    return f"{m['name']} [{m.get('dataset') or '-'}]" if several else m["name"]


def test_one_metric_name_on_several_datasets_keeps_every_value():
    # a relay run's manifest keyed metrics by name: n0011's accuracy at 40 % noise stood for 20 %
    written = [
        {"name": "val_accuracy", "value": 0.7405, "direction": "maximize", "dataset": "noise_0.2"},
        {"name": "val_accuracy", "value": 0.5965, "direction": "maximize", "dataset": "noise_0.4"},
        {"name": "train_loss", "value": 0.31, "direction": "minimize", "dataset": "noise_0.2"},
    ]
    shown = _compact_metrics(written)
    assert shown["metrics"] == {_key(m, written): m["value"] for m in written}
    assert shown["metrics"]["val_accuracy [noise_0.2]"] == 0.7405 and shown["lower_is_better"] == [
        "train_loss [noise_0.2]"
    ]


def test_a_json_structure_every_key_shares_is_described_once(run, tmp_path):
    """The run's nodes' results.json files under one object (as a grid's runs are saved): the
    outline says the structure once, for every key."""
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    files = {nid: run_dir / "nodes" / nid / "workspace" / "results.json" for nid in nodes}
    files = {nid: p for nid, p in files.items() if p.exists()}
    # the nodes whose results share the first one's structure (a node may train longer: its
    # lists are longer and its structure is its own)
    one = describe_file(next(iter(files.values())))["structure"]
    files = {nid: p for nid, p in files.items() if describe_file(p)["structure"] == one}
    assert len(files) >= 3
    combined = tmp_path / "grid.json"
    combined.write_text(json.dumps({nid: json.loads(p.read_text()) for nid, p in files.items()}))
    structure = describe_file(combined)["structure"]
    ((key, value),) = structure.items()
    assert key == f"<each of {len(files)} keys: {', '.join(files)}>"
    assert value == one
    assert len(json.dumps(structure)) < len(files) * len(json.dumps(one)) / 2


# 2 -------------------------------------------------------------------------------------------


def _stat(values: list[float]) -> tuple[str, str]:
    """mean (4 significant digits) and standard error (2) as the prompts print them: the mean
    over the re-runs only, the sample standard deviation over sqrt(n)."""
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.4g}", f"{se:.2g}"


def test_every_nodes_seed_reruns_reach_the_summary_writer_and_reviewer(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    records = prompt_records(run_dir)
    writer = record_text(_one(records, "writeup", "sections"))
    reviewer = record_text(_one(records, "review", "review_1"))
    summaries = {r["label"]: record_text(r) for r in records if r["phase"] == "summary"}
    checked = 0
    for n in _good_search(nodes):
        reruns = [r for r in _reruns(nodes, n["id"]) if r["status"] == "good"]
        if len(reruns) < 2:
            continue
        mean, se = _stat([r["metric"]["value"] for r in reruns])
        who = ", ".join(f"{r['id']} seed {r['seed']}" for r in reruns)
        stated = f"{n['metric']['name']}={mean} ± {se}"
        # the writer and the reviewer: on the node's own line, with the re-runs named
        head = f"{len(reruns)} seed re-runs ({who})"
        for name, text in (("writer", writer), ("reviewer", reviewer)):
            line = next((x for x in text.splitlines() if head in x), None)
            assert line and stated in line, (name, n["id"], stated)
        # the stage summary's table: in the node's row
        row = next(x for x in summaries[f"stage{n['stage']}"].splitlines() if x.startswith(f"| {n['id']} |"))
        assert head in row and stated in row, row
        checked += 1
    assert checked >= 4  # the drafts' best, the tuning nodes, the stage-3 nodes
    # one seed statistic, said the same way to the writer, the reviewer and the plotter
    manifest = json.loads((run_dir / "figures" / "manifest.json").read_text())
    for text in (writer, reviewer):
        assert f"Every seed statistic here is the {manifest['seed_statistic']}" in text
    # each stage's seed-noise estimate (its last re-ranking event), sigma and band, in its section
    reranks = {e["stage"]: e for e in events(run_dir) if e["type"] == "seed_rerank" and e.get("noise")}
    assert reranks
    sections = writer.split("\n## Stage ")
    for stage, e in reranks.items():
        (section,) = [x for x in sections if x.startswith(f"{stage} (")]
        assert f"Seed noise at this stage's end: sigma {e['noise']['sigma']:.4g} (" in section
        assert f"within {e['threshold']:.4g} of each other" in section


def test_the_aggregation_call_gets_what_each_stage_found(run):
    """A relay run's plotter had twelve nodes' hundred metrics and guessed which mattered: the
    aggregation call names what each stage's end summary says worked and failed."""
    from ai_scientist.treesearch.tried import sentences

    run_dir, _ = run
    (agg,) = [r for r in prompt_records(run_dir) if r["phase"] == "plots" and r["label"] == "aggregate_r0"]
    sent = record_text(agg)
    written = [json.loads(p.read_text()) for p in sorted((run_dir / "stage_summaries").glob("stage*.json"))]
    said = [w for w in written if (w.get("summary") or {}).get("worked")]
    assert said
    for w in said:
        assert f"- Stage {w['stage']}: worked: {sentences(w['summary']['worked'], 600)}" in sent


# 3 -------------------------------------------------------------------------------------------


def test_numbers_the_writer_was_given_are_traced_and_others_are_not(run):
    """The writer states a tuning node's seed-re-run mean and standard error (no single
    measurement: the run's records hold them only as the findings it gave the writer) and a number
    the run never produced: the first round's number check flags only the latter."""
    run_dir, responder = run
    assert responder.stated
    inputs = (run_dir / "paper" / "writer_inputs.md").read_text()
    sent = record_text(_one(prompt_records(run_dir), "writeup", "sections"))
    assert inputs in sent  # the kept inputs are exactly what the writer got
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    first = writeup["reflections"][0]
    assert first["unmatched"] == ["0.3141"], first
    reflect = record_text(_one(prompt_records(run_dir), "writeup", "reflect_1"))
    assert '"0.3141" in' in reflect and not any(f'"{x}" in' in reflect for x in responder.stated)
    # some of them no measurement of the run matches: only the findings the writer was given
    others = [m for m in run_measurements(run_dir) if m.kind != WRITER_INPUT]
    only_given = [c.text for x in responder.stated for c in extract_numbers(x) if not match_claim(c, others)]
    assert only_given, "every stated number had another source: the run does not test the writer's inputs"


# 4 -------------------------------------------------------------------------------------------

FIVE_FIGURES = """
import glob, json
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
paths = sorted(glob.glob("data/*/results.json"))
for i in range(1, 6):
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for path in paths[: i + 1]:
        losses = json.load(open(path))["train_loss"]
        ax.plot(range(1, len(losses) + 1), [v * i for v in losses], label=path.split("/")[1])
    ax.set_xlabel("epoch"); ax.set_ylabel(f"training loss x {i}"); ax.set_title(f"view {i}")
    ax.legend(fontsize=6); fig.tight_layout(); fig.savefig(f"fig_{i}.png", dpi=100); plt.close(fig)
"""
WORDS = (
    "The penalty shrinks the weights toward zero while noisy labels pull single points across the "
    "boundary, and each grid point of the study was trained from the same draw of the data with its "
    "own learning rate and number of epochs before its clean accuracy was read on held out points. "
)


def _words(sections: dict) -> int:
    return sum(len(str(sections.get(k, "")).split()) for k in (*SECTIONS_OF_TEXT, "abstract"))


SECTIONS_OF_TEXT = ("introduction", "related_work", "method", "experiments", "results", "conclusion")


class LongPaperResponder(ExampleResponder):
    """Five figures; a first paper far over its pages; each length fix cut to exactly the word
    budget the message gives (whole words from each section's start, in proportion)."""

    def __init__(self) -> None:
        super().__init__()
        self.budgets: list[int] = []
        self.answers: list[dict] = []

    def _plots(self, text: str, ctx: Any) -> str:
        figures = [{"file": f"fig_{i}.png", "caption": f"Training loss, view {i}."} for i in range(1, 6)]
        return json.dumps({"script": FIVE_FIGURES, "figures": figures})

    def _writeup(self, text: str, ctx: Any) -> str:
        if "citation" in ctx.label:
            return super()._writeup(text, ctx)
        if ctx.label == "sections":
            refs = " ".join(f"Figure \\ref{{fig:{i}}} shows view {i}." for i in range(1, 6))
            long = {k: (WORDS * 7).strip() for k in SECTIONS_OF_TEXT}
            answer = {**PAPER_SECTIONS, **long, "results": long["results"] + " " + refs}
        else:
            budget = int(re.findall(r"to at most (\d+) words in all", text)[-1])
            current = json.loads(re.findall(r"^Your current sections \(JSON\):\n(.*)$", text, re.M)[-1])
            keep = budget / _words(current)
            answer = {
                k: " ".join(v.split()[: int(len(v.split()) * keep)])
                if k in (*SECTIONS_OF_TEXT, "abstract")
                else v
                for k, v in current.items()
            }
            self.budgets.append(budget)
        self.answers.append(answer)
        return json.dumps(answer)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory) -> tuple[Path, LongPaperResponder]:
    latex_or_skip()
    matplotlib_or_skip()
    responder = LongPaperResponder()
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("long_paper"),
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=0",
        "report.page_limit=4",
        "report.max_figures=5",
        "report.writeup_reflections=0",
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        responder=responder,
    )
    assert code == 0, run_dir
    return run_dir, responder


def test_a_paper_cut_to_its_word_budget_fits_its_pages(long_run):
    run_dir, responder = long_run
    writeup = json.loads((run_dir / "paper" / "writeup.json").read_text())
    assert len(writeup["figures"]) == 5
    records = prompt_records(run_dir)
    fixes = [r for r in records if r["phase"] == "writeup" and r["label"].startswith("fix")]
    assert fixes, "the long first paper did not overflow"
    first = writeup["problems"][0]
    # the message: pages over, the overflow in pages and in words, how words are counted, the
    # sections' words as counted, and leaving a figure out as the other way
    assert re.search(r"the limit is 4 pages, so it is \d+ pages? over. About [0-9.]+ pages? of content must go: "
                     r"some \d+ words", first), first  # fmt: skip
    assert "Words are counted as the whitespace-separated pieces" in first
    assert f"Your sections hold {_words(responder.answers[0])} words" in first
    assert "Leaving a figure out is the other way: list its label in omit_figures" in first
    # the budget met is a paper that fits: one length fix, no second
    assert len(responder.budgets) == len(fixes) == 1, writeup["problems"]
    assert _words(responder.answers[1]) <= responder.budgets[0]
    assert not writeup["over_page_limit"] and writeup["main_pages"] <= 4, writeup["main_pages"]


def test_a_figure_the_writer_leaves_out_is_not_in_the_paper(long_run, tmp_path):
    """The writer's ``omit_figures``: the .tex assembled from its sections has the other figures
    only, and a \\ref to the one left out is not a reference."""
    from ai_scientist.reporting.writeup import assemble

    run_dir, responder = long_run
    figures = json.loads((run_dir / "paper" / "writeup.json").read_text())["figures"]
    sections = {**responder.answers[0], "omit_figures": [figures[1]["label"]]}
    tex = assemble(sections, figures, [], 4)
    assert f"figures/{figures[1]['file']}" not in tex
    assert all(f"figures/{f['file']}" in tex for f in figures if f is not figures[1])
    assert f"\\ref{{{figures[1]['label']}}}" not in tex and f"\\ref{{{figures[0]['label']}}}" in tex


# 5 -------------------------------------------------------------------------------------------


def test_the_writer_sees_each_nodes_findings_once(run):
    run_dir, _ = run
    nodes = journal_nodes(run_dir)
    writer = record_text(_one(prompt_records(run_dir), "writeup", "sections"))
    for n in _good_search(nodes):
        caveat = CAVEAT.format(nid=n["id"])
        assert writer.count(caveat) == 1, (n["id"], writer.count(caveat))
    # the notes the agents kept hold only the journal's events, each in the stage results: not sent
    # (issue 28, relay s7 ln1 040; tests/test_relay_s7_report.py sends notes that add something)
    assert "# Notes the agents kept during the run" not in writer


def test_a_list_of_records_is_outlined_over_every_record():
    """A relay run's manifest showed a list of conditions as its first record (a linear model's
    two weights) and hid the other records' keys and lengths (a feature map's 202 weights)."""
    from ai_scientist.reporting.manifest import _json_outline

    conditions = [
        {"name": "linear", "weights": [0.1, 0.2], "loss": [1.0, 0.9]},
        {"name": "rff", "weights": [0.0] * 202, "features": 40, "loss": [1.0, 0.8]},
        {"name": "rff2", "weights": [0.0] * 50, "features": 80, "loss": [1.0, 0.7]},
    ]
    item = _json_outline({"conditions": conditions})["conditions"]["item"]
    lens = [len(c["weights"]) for c in conditions]
    assert item["weights"] == {"list_len": f"{min(lens)}-{max(lens)}", "item": "float"}
    assert item["features"] == {"in": "2 of 3 records", "type": "int"}
    assert item["loss"] == {"list_len": 2, "item": "float"} and item["name"] == "str"
