"""Issue 28, relay runs s7_ln2 and s7_mm2 (report side): the writer's word budget, what its number
check accepts, the size of the report's inputs and what the report's figure reviews are told.
Every expectation is read from what a scripted report really sent (its prompt logs) and the files
it wrote (paper/writeup.json, the compile's log, the aggregation manifest, ...)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from components import needs_latex
from test_report_support import SECTIONS, _plot_png, default_responder, report_cfg

from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.reflection import SECTION_KEYS, word_count
from ai_scientist.reporting.writeup import ReportOptions, write_paper

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "examples" / "label_noise" / "references.bib"


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _report_records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    logs = sorted(set((run / "nodes").glob("*/prompt_logs/*.json")) - before)
    return [json.loads(p.read_text()) for p in logs]


def _write(run: Path, tmp_path: Path, respond: Any, **report: Any) -> list[dict[str, Any]]:
    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], **report)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    return _report_records(run, before)


def _sections_sent(user: str) -> dict[str, str]:
    """The sections a fix or reflection prompt shows the writer (its JSON line)."""
    line = user.split("Your current sections (JSON):\n", 1)[1].split("\n", 1)[0]
    return json.loads(line)


# prose as a capable writer wrote it (relay s7 ln2 042's results: paragraphs of 80-90 words,
# numbers with their spread, inline math; an abstract of 160-180 words)
_PROSE = (
    "Capacity. Figure 2 compares the linear model with the polynomial one trained in the same runs. "
    "The polynomial model improves from $\\lambda = 0$ to 0.1 on all three seeds (0.903 vs 0.907, 0.9 "
    "vs 0.909, 0.896 vs 0.9; means 0.898 ± 0.002 vs 0.9045 ± 0.0045), a gain of the hypothesised "
    "sign but within the seed noise, and it stays below the linear model at every $\\lambda$. The "
    "two models used different initial steps, so the gap mixes a feature effect with an optimiser "
    "setting; we report it as measured."
).split()


def _shaped(words: int, paragraph: int) -> str:
    ws = [_PROSE[i % len(_PROSE)] for i in range(words)]
    return "\n\n".join(" ".join(ws[i : i + paragraph]) for i in range(0, words, paragraph))


@needs_latex(("pdflatex",))
def test_the_word_budget_fits_a_writers_text_and_every_later_round_restates_it(tmp_path: Path, run_copy):
    # relay s7 ln2 042 -> 043: told 1251 words measured on one paragraph a section, the writer wrote
    # 1235 in 14 paragraphs and an abstract, and the paper ran a page over (the text held 568 words a
    # page, not 620); 044: a reflection round must say the budget and the draft's size again
    run = run_copy(tmp_path)
    paths = RunPaths(run)
    shown = [{"file": f"fig_{i}.png", "caption": f"Validation accuracy, condition {i}."} for i in range(1, 7)]
    for i, fig in enumerate(shown):
        _plot_png(paths.figures / fig["file"], seed=10 + 7 * i)
    paths.figures_json.write_text(json.dumps({"figures": shown}))
    budgets: list[int] = []

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        user = _text(messages[-1])
        if ctx.label == "sections":
            found = re.search(r"write at most (\d+) words in all", user)
            assert found, user[-1500:]
            budgets.append(int(found.group(1)))
            body = [k for k in SECTION_KEYS if k != "abstract"]
            abstract = 170
            each = (budgets[0] - abstract - 10) // len(body)  # 10: the figure sentences
            out = dict(SECTIONS, abstract=_shaped(abstract, abstract), **{k: _shaped(each, 80) for k in body})
            out["results"] = (
                " ".join(f"Figure \\ref{{{f}}} shows it." for f in ("fig:1", "fig:2")) + " " + out["results"]
            )
            return json.dumps(out)
        return json.dumps(_sections_sent(user))  # later rounds: the sections unchanged

    recs = _write(run, tmp_path, respond, compile_fix_rounds=2, writeup_reflections=1)
    writer = [r for r in recs if r["phase"] == "writeup" and not r["label"].startswith("citation")]
    labels = [r["label"] for r in writer]
    assert labels[0] == "sections" and not any(x.startswith("fix_") for x in labels), (
        labels
    )  # no length round
    report = json.loads((paths.paper / "writeup.json").read_text())
    assert report["main_pages"] <= report["page_limit"], report
    written = word_count(report["sections"])
    assert budgets[0] * 0.95 <= written <= budgets[0], (budgets, written)
    # the budget was measured by building: the draft prompt says so, and the figures' share it names
    # is the compile log's
    draft = _text(writer[0]["messages"][-1])
    assert "measured by building the paper with the figures" in draft
    # every later round (a reflection here: 4 figures never referenced) restates the size of the
    # sections it shows, as the budget counts words, and the budget for them
    later = writer[1:]
    assert later and all(r["label"].startswith("reflect_") for r in later), labels
    for rec in later:
        user = _text(rec["messages"][-1])
        sent = _sections_sent(user)
        assert f"Your sections hold {word_count(sent)} words" in user, user[-2500:]
        said = re.search(r"at most (\d+) words in all", user)
        assert said and int(said.group(1)) >= word_count(sent), user[-2500:]
    # the room it promises follows the build's log (the sections came back unchanged: the last
    # build is the one the round was told of): where the text ends on the last allowed page
    # unmeasured (a figure floated after it), no words are promised (ln2 044: "about 0 more fit")
    from ai_scientist.reporting import latex

    log = (paths.paper / "paper.log").read_text(encoding="utf-8", errors="replace")
    end = latex.last_page_fill(log)
    main = latex.main_body_pages(paths.paper / "paper.aux")
    unmeasured = not (end and end[0] == main)
    user = _text(later[-1]["messages"][-1])
    if main == report["page_limit"] and unmeasured:
        assert "no more words can be promised" in user, user[-2500:]
    else:
        assert re.search(r"words; about \d+ more fit", user), user[-2500:]


def _cut_to(text: str, factor: float) -> str:
    """``text`` with each paragraph cut to ``factor`` of its words (never inside a math span)."""
    out = []
    for para in text.split("\n\n"):
        ws = para.split()
        keep = ws[: max(1, int(len(ws) * factor))]
        while keep and " ".join(keep).count("$") % 2:
            keep.pop()
        out.append(" ".join(keep))
    return "\n\n".join(out)


@needs_latex(("pdflatex",))
def test_relay_s7_ln2s_draft_cut_to_the_first_budget_fits_its_figures(tmp_path: Path, run_copy):
    # relay s7 ln2 042 -> 043, replayed: the writer's own draft (1235 words) and its six figures'
    # captions and sizes; the budget it was given then (1251 words, from one placeholder paragraph a
    # section and a rate per page) let the whole draft through, and the paper ran a page over. The
    # budget now measures the writer-shaped text at its own size with these floats: the draft cut to
    # it fits without a length round.
    from PIL import Image
    from test_report_support import _plot_png

    data = json.loads((ROOT / "tests" / "fixtures" / "relay_s7_ln2_writer.json").read_text(encoding="utf-8"))
    run = run_copy(tmp_path)
    paths = RunPaths(run)
    for i, fig in enumerate(data["figures"]):
        _plot_png(paths.figures / fig["file"], seed=3 + 5 * i)
        Image.open(paths.figures / fig["file"]).resize(tuple(fig["size"])).save(paths.figures / fig["file"])
    paths.figures_json.write_text(
        json.dumps({"figures": [{k: f[k] for k in ("file", "caption")} for f in data["figures"]]})
    )
    draft = data["draft"]
    asked: list[int] = []

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        user = _text(messages[-1])
        if ctx.label == "sections":
            asked.append(int(re.search(r"write at most (\d+) words in all", user).group(1)))
            factor = min(1.0, asked[0] / word_count(draft))
            return json.dumps({k: v if k == "title" else _cut_to(v, factor) for k, v in draft.items()})
        return json.dumps(_sections_sent(user))

    recs = _write(run, tmp_path, respond, compile_fix_rounds=1)
    labels = [r["label"] for r in recs if r["phase"] == "writeup" and not r["label"].startswith("citation")]
    report = json.loads((paths.paper / "writeup.json").read_text())
    assert labels == ["sections"], (labels, asked, report["problems"])  # no length round
    assert report["main_pages"] <= report["page_limit"], report
    assert word_count(report["sections"]) <= asked[0] < word_count(draft), (asked, word_count(draft))


@needs_latex(("pdflatex",))
def test_the_writer_is_told_which_rounded_and_derived_numbers_pass_as_the_check_decides(
    tmp_path: Path, run_copy
):
    # relay s7 ln2 042/044: "every number is checked against the run's records" did not say whether
    # "about 0.024" for 0.02417 or a difference computed from two means passes, so a careful writer
    # avoided any arithmetic; the instructions now state the checker's rule, and the checker
    # (claims.json, the reflection round) decides as they say
    from pipeline_support import journal_nodes

    from ai_scientist.reporting.claims import Claim, matches, run_measurements

    run = run_copy(tmp_path)
    nodes = journal_nodes(run)
    state = json.loads((run / "state.json").read_text())
    best = [v["best"]["node_id"] for _, v in sorted(state["stages"].items()) if v.get("best")][-1]
    values = [m["value"] for m in nodes[best]["metrics"] if isinstance(m["value"], float)]
    value = next(v for v in values if 0 < abs(v) < 1 and round(v, 2) != v)
    measured = run_measurements(run)

    def held(printed: str, decimals: int) -> bool:
        claim = Claim(printed, float(printed), decimals, False, 0, "")
        return any(matches(claim, m) for m in measured)

    # a derived number: the metric's value and an offset no record of the run holds at 4 decimals
    derived = next(
        f"{d:.4f}"
        for d in (value / k + 0.00013 * j for k in (3, 7, 11) for j in range(1, 40))
        if not held(f"{d:.4f}", 4)
    )
    rounded, percent = f"{value:.2f}", f"{abs(value) * 100:.1f}"
    text = (
        f"The best configuration reached {rounded} ({percent}%), and the gain over the second "
        f"configuration was {derived}."
    )

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        user = _text(messages[-1])
        if ctx.label == "sections":
            return json.dumps(dict(SECTIONS, results=text))
        return json.dumps(_sections_sent(user))

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0, writeup_reflections=1)
    writer = [r for r in recs if r["phase"] == "writeup" and not r["label"].startswith("citation")]
    said = " ".join(_text(writer[0]["messages"][0]).split() + _text(writer[0]["messages"][-1]).split())
    assert "a value rounded to fewer decimals passes" in said, said[:3000]
    assert "fraction printed as a percentage" in said
    assert "(a difference, a ratio, a speed-up, a relative change in %) passes only when the findings" in said
    claims = json.loads((RunPaths(run).paper / "claims.json").read_text())["claims"]
    verdict = {c["text"]: c["source"] for c in claims}
    assert verdict[rounded] is not None and verdict[percent + "%"] is not None, verdict
    assert verdict[derived] is None, verdict  # computed by the writer, held by no record
    reflect = next(r for r in writer if r["label"] == "reflect_1")
    assert f'"{derived}" in "' in _text(reflect["messages"][-1])


def _six(value: Any) -> Any:
    """A value as the run's manifest writes it (6 significant digits)."""
    return float(f"{value:.6g}") if isinstance(value, float) else value


def _figure_prompt(run: Path, tmp_path: Path, caption: str) -> str:
    from ai_scientist.reporting.vlm import review_figures

    _plot_png(RunPaths(run).figures / "fig_x.png", seed=len(caption))
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(run, cfg, llm, [{"file": "fig_x.png", "caption": caption}])
    (rec,) = _report_records(run, before)
    assert rec["label"].startswith("figure_"), rec["label"]
    return _text(rec["messages"][-1])


def test_a_paper_figure_review_gets_the_protocol_and_for_timings_the_machine_load(tmp_path: Path, run_copy):
    # relay s7 ln2 008: a figure reviewer without the evaluation protocol could take a metric under
    # its own dataset label for a protocol break; mm2 004-024: no machine load beside timings, so
    # noise and contention could not be told apart. Both are read from the run's own records: the
    # eval_protocol events and each command's run.json usage.
    from pipeline_support import journal_nodes

    from ai_scientist.base.artifacts import RunRecord, read_artifact
    from ai_scientist.base.fileio import read_jsonl

    run = run_copy(tmp_path)
    nodes = journal_nodes(run)
    fixed = {int(e["stage"]): e for e in read_jsonl(RunPaths(run).events) if e.get("type") == "eval_protocol"}
    nid = next(
        i
        for i, n in nodes.items()
        if n["status"] == "good" and n["operation"] != "seed_eval" and n["stage"] in fixed
    )
    protocol = fixed[nodes[nid]["stage"]]
    accuracy = _figure_prompt(run, tmp_path, f"Validation accuracy of {nid} per configuration.")
    block = accuracy[accuracy.index("The evaluation protocol") :]
    line = next(
        x for x in block.splitlines() if x.startswith("- stage") and f"(fixed by {protocol['node_id']})" in x
    )
    name, direction, dataset = protocol["metric"]
    assert f"headline {name} ({direction}" in line and (not dataset or f'dataset "{dataset}"' in line), line
    for pname, value in protocol["parameters"]:
        assert f"{pname} = {value}" in line, (pname, line)
    assert "another dataset label is an extra condition" in block
    # an accuracy figure of a training run: its claim does not rest on timings
    assert "machine load" not in accuracy
    # a figure of run times: the load during each measured command, as the run recorded it
    timed = _figure_prompt(run, tmp_path, f"Wall-clock time of {nid}'s training per configuration.")
    node_line = next(x for x in timed.splitlines() if x.startswith(f"- {nid}: "))
    assert "; machine load during its measured commands: " in node_line, node_line
    record = read_artifact(RunPaths(run).node(nid).file("run.json"), RunRecord)
    usages = [o.usage for o in record.outputs if o.usage]
    assert usages and all(u in node_line for u in usages[:4]), (usages, node_line)
    assert any("load " in u for u in usages), usages  # the fixture's commands recorded their load


def test_the_aggregation_call_shows_every_value_of_the_manifest_one_entry_a_line(tmp_path: Path, run_copy):
    # relay s7 ln2 033: a 47 kB request, the manifest pretty-printed and each seed re-run repeating
    # its node's layout; now one entry a line, a re-run's lower_is_better/datasets said once (its
    # node's) — and every metric value the figures (and the paper) may draw on still shown
    import sys

    from ai_scientist.base.templates import as_text
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots

    run = run_copy(tmp_path)
    answer = default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    rec = next(r for r in _report_records(run, before) if r["label"].startswith("aggregate"))
    user = _text(rec["messages"][-1])
    block = user[user.index("## Data manifest") :].split("```\n", 1)[1].split("\n```", 1)[0]
    shown = json.loads(block)
    saved = json.loads((RunPaths(run).figures / "manifest.json").read_text())
    assert [e["node_id"] for e in shown["nodes"]] == [e["node_id"] for e in saved["nodes"]]
    assert any(e["role"] == "seed_run" for e in saved["nodes"])
    assert any(f["path"].endswith("/metrics.json") for e in saved["nodes"] for f in e["files"])
    lines = block.splitlines()
    for e in saved["nodes"]:  # one line an entry, every value as written
        line = next(x for x in lines if x.startswith(f'{{"node_id": "{e["node_id"]}"'))
        mine = json.loads(line.rstrip(","))
        assert mine["metrics"] == e["metrics"], e["node_id"]
        for shown_file, f in zip(mine["files"], e["files"], strict=True):
            data = (
                json.loads((RunPaths(run).figures / f["path"]).read_text())
                if f["path"].endswith(".json")
                else None
            )
            items = data.get("metrics") if isinstance(data, dict) else data
            same = isinstance(items, list) and sorted(map(repr, (_six(m["value"]) for m in items))) == sorted(
                map(repr, e["metrics"].values())
            )
            if f["path"].endswith("/metrics.json") and same:
                # a metrics file holding the entry's metrics says so, not "same structure as" another
                # node's (relay s7 ln2 033: the names differed)
                assert shown_file["holds"].startswith("this entry's metrics"), shown_file
                assert "same_structure_as" not in shown_file, shown_file
            else:
                assert shown_file == f, (e["node_id"], shown_file)
        held = [x for x in mine["files"] if "holds" in x]
        assert len(held) <= 1, mine["files"]
        parent = next((p for p in saved["nodes"] if p["node_id"] == e.get("seed_of")), None)
        for key in ("lower_is_better", "datasets"):
            if parent is not None and e.get(key) == parent.get(key):
                assert key not in mine, (e["node_id"], key)
            else:
                assert mine.get(key) == e.get(key), (e["node_id"], key)
    assert any("holds" in f for e in shown["nodes"] for f in e["files"])  # the scripted run has no grader
    assert {k: v for k, v in shown.items() if k != "nodes"} == {
        k: v for k, v in saved.items() if k != "nodes"
    }
    assert len(block) < 0.8 * len(as_text(saved)), (len(block), len(as_text(saved)))


@needs_latex(("pdflatex",))
def test_the_writer_gets_each_stages_account_but_only_the_last_stages_next_step(tmp_path: Path, run_copy):
    # relay s7 ln2 042: each earlier stage's "next" (what the following stage should try) sat beside
    # the following stage's own results, which answer it; the last stage's "next" is still open
    run = run_copy(tmp_path)
    accounts = {}
    for path in sorted((run / "stage_summaries").glob("stage*.json")):
        data = json.loads(path.read_text())
        if isinstance(data.get("summary"), dict):
            # the scripted summaries are one word each ("text"): each stage's own words, told apart
            data["summary"] = {
                k: f"stage {data['stage']} {k}: measured the {k} of the condition." for k in data["summary"]
            }
            path.write_text(json.dumps(data))
            accounts[int(data["stage"])] = {
                k: " ".join(str(v).split()) for k, v in data["summary"].items() if v
            }
    assert len(accounts) >= 2 and all("next" in a for a in accounts.values()), accounts

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return json.dumps(SECTIONS)

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0)
    user = " ".join(_text(next(r for r in recs if r["label"] == "sections")["messages"][-1]).split())
    last = max(accounts)
    for stage, account in accounts.items():
        for key, text in account.items():
            shown = f"- {key}: {text[:200]}" in user
            assert shown == (key != "next" or stage == last), (stage, key)


def test_a_report_time_plot_critique_gets_its_stages_protocol(tmp_path: Path, run_copy):
    # the report critiques a stage's best node whose own critique is missing: like the paper's
    # figure reviews (relay s7 ln2 008) it is told the protocol its results were compared under,
    # read from the run's eval_protocol events; a training run's: no machine load
    from ai_scientist.base.fileio import read_jsonl
    from ai_scientist.base.paths import NodePaths
    from ai_scientist.reporting.runread import load_run
    from ai_scientist.reporting.vlm import critique_node_plots

    run = run_copy(tmp_path)
    fixed = {int(e["stage"]): e for e in read_jsonl(RunPaths(run).events) if e.get("type") == "eval_protocol"}
    view = load_run(run)
    stage, best = next((s, n) for s, n in view.best_per_stage().items() if s in fixed)
    nid = str(best["id"])
    paths = NodePaths(view.node_dir(nid))
    paths.file("vlm.json").unlink(missing_ok=True)
    if not list(paths.plots.glob("*.png")):
        _plot_png(paths.plots / "val.png", seed=7)
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    critique_node_plots(run, cfg, llm)
    rec = next(
        r for r in _report_records(run, before) if r["label"] == "plot_critique" and r["node_id"] == nid
    )
    text = _text(rec["messages"][-1])
    protocol = fixed[stage]
    line = next(
        x for x in text.splitlines() if x.startswith("Evaluation protocol of stage") and f"{stage}" in x
    )
    assert f"(fixed by {protocol['node_id']})" in line and f"headline {protocol['metric'][0]}" in line, line
    for pname, value in protocol["parameters"]:
        assert f"{pname} = {value}" in line, (pname, line)
    assert "Machine load" not in text
