"""Issue 28, relay run s7_ln1 (report side): what the writer, the figure reviewers and the paper
reviewers are shown. Every expectation is read from what a scripted report really sent (its prompt
logs) and the files it wrote (the paper's references.bib, ...)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from components import needs_latex
from test_report_support import default_responder, report_cfg

from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
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


def _write(run: Path, tmp_path: Path, respond: Any = None, **report: Any) -> list[dict[str, Any]]:
    answer = default_responder()

    def fallback(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return answer(messages, schema, ctx, "writeup")

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], **report)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond or fallback))
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    return _report_records(run, before)


def _bib_authors(bib: str) -> dict[str, list[str]]:
    """key -> author names, as the run's own references.bib has them."""
    out = {}
    for m in re.finditer(r"@\w+\{([^,]+),(.*?)\n\}", bib, re.S):
        author = re.search(r"author\s*=\s*\{(.*)\},?\s*$", m.group(2), re.M)
        out[m.group(1)] = [a.strip() for a in re.split(r"\s+and\s+", author.group(1))] if author else []
    return out


@needs_latex(("pdflatex",))
def test_the_writers_references_name_their_first_author_and_year(tmp_path: Path, run_copy):
    # relay s7 ln1 040: "X et al." cannot be written from a key and a title alone
    run = run_copy(tmp_path)
    recs = _write(run, tmp_path, compile_fix_rounds=0)
    writer = next(r for r in recs if r["label"] == "sections")
    user = _text(writer["messages"][-1])
    listed = user[user.index("# Citation keys you may use") :].split("\n\n# ", 1)[0]
    entries = _bib_authors((RunPaths(run).paper / "references.bib").read_text(encoding="utf-8"))
    assert len(entries) >= 3, entries
    for key, names in entries.items():
        line = next(x for x in listed.splitlines() if x.startswith(f"- {key}: "))
        first = names[0]
        surname = first.split(",")[0].strip() if "," in first else first.split()[-1]
        year = re.search(r"(\d{4})", line)
        shown = f"{surname} et al." if len(names) > 1 else surname
        assert f"({shown}, {year.group(1) if year else ''}" in line, (key, line)


@needs_latex(("pdflatex", "chktex"))
def test_a_chktex_warning_past_the_shown_line_quotes_the_text_at_its_column(tmp_path: Path, run_copy):
    # relay s7 ln1 042: "column 820" of a line shown to its 160th character; the writer never
    # sees paper.tex, so the warning quotes the text at the column
    from test_report_support import SECTIONS

    run = run_copy(tmp_path)
    long = " ".join(["We measured the validation accuracy of every configuration on the same data."] * 4)
    sections = dict(
        SECTIONS, introduction=long + " It stabilises SGD. All runs agree. See Figure \\ref{fig:1}."
    )
    answer = default_responder(sections=(sections,))

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return answer(messages, schema, ctx, "writeup")

    recs = _write(run, tmp_path, respond, writeup_reflections=1, compile_fix_rounds=0)
    reflect = next(r for r in recs if r["label"] == "reflect_1")
    user = _text(reflect["messages"][-1])
    lines = (RunPaths(run).paper / "paper.tex").read_text(encoding="utf-8").splitlines()
    quoted = re.findall(r'on the line "([^"]+?) \.\.\.": ([^\n]*)', user)
    assert quoted, user[-3000:]
    checked = 0
    for start, warnings in quoted:
        line = next(x for x in lines if x.strip().startswith(start))
        for col, at in re.findall(r'column (\d+) \(at "([^"]+)"\)', warnings):
            c = int(col)
            lo, hi = max(c - 1 - 30, 0), min(c - 1 + 30, len(line))
            assert at.removeprefix("...").removesuffix("...") == line[lo:hi].strip(), (col, at)
            checked += 1
        assert checked, warnings  # every warning of a cut line says where it is
    assert any(c > 160 for start, w in quoted for c in map(int, re.findall(r"column (\d+)", w)))
    # the reflection gets the findings again, and says why (relay s7 ln1 042 after 041's "not
    # repeated here"): the same block the draft got
    draft = _text(next(r for r in recs if r["label"] == "sections")["messages"][-1])
    head = "# What each stage of the run found"
    block = draft[draft.index(head) :].split("\n\n## ", 1)[0]
    assert block in user and "gets the run's findings again (above)" in user


@needs_latex(("pdflatex",))
def test_the_first_writer_call_gets_a_word_budget_that_fits(tmp_path: Path, run_copy):
    # relay s7 ln1 040 -> 041: "fit in 4 pages" and six figures taking 1.9 of them; the draft ran a
    # page over and a length round followed. The first call now names the words that fit: a writer
    # that writes that many (other words than the measuring placeholder's) fits at once.
    from test_report_support import SECTIONS

    from ai_scientist.reporting import latex
    from ai_scientist.reporting.reflection import SECTION_KEYS, word_count

    def _sections_of(paper: Path) -> dict[str, str]:
        # the sections the writer sent, as the paper's claims check kept them
        return {k: v for k, v in json.loads((paper / "writeup.json").read_text()).get("sections", {}).items()}

    from test_report_support import _plot_png

    run = run_copy(tmp_path)
    paths = RunPaths(run)
    shown = [{"file": f"fig_{i}.png", "caption": f"Validation accuracy, condition {i}."} for i in range(1, 5)]
    for i, fig in enumerate(shown):
        _plot_png(paths.figures / fig["file"], seed=10 + 7 * i)
    paths.figures_json.write_text(json.dumps({"figures": shown}))
    prose = (
        "Regularisation of the weights changed the clean accuracy little in our setting, while the "
        "nuisance features made the penalty useful on every seed; we report each value as measured. "
    ).split()
    asked: list[int] = []

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        user = _text(messages[-1])
        found = re.search(r"write at most (\d+) words in all", user)
        assert found, user[-1500:]
        budget = int(found.group(1))
        asked.append(budget)
        body = [k for k in SECTION_KEYS if k != "abstract"]  # an abstract has its own length limit
        each = (budget - 30) // len(body)
        text = " ".join(prose[i % len(prose)] for i in range(each))
        out = dict(SECTIONS, abstract=" ".join(prose[:30]), **{k: text for k in body})
        out["introduction"] = text.replace("penalty", "penalty (Figure \\ref{fig:1})", 1)
        return json.dumps(out)

    recs = _write(run, tmp_path, respond, compile_fix_rounds=2)
    writer = [r for r in recs if r["phase"] == "writeup" and not r["label"].startswith("citation")]
    assert [r["label"] for r in writer] == ["sections"], [r["label"] for r in writer]  # no length round
    user = _text(writer[0]["messages"][-1])
    said = re.search(r"(\d+) figures? takes? about ([\d.]+) pages?.*?leaving ([\d.]+) for the text", user)
    paper = RunPaths(run).paper
    figs, n = latex.figure_pages((paper / "paper.log").read_text(encoding="utf-8", errors="replace"))
    assert said and int(said.group(1)) == n and float(said.group(2)) == round(figs or 0.0, 1), user[-800:]
    report = json.loads((paper / "writeup.json").read_text())
    assert report["main_pages"] <= report["page_limit"], report
    assert asked == [int(re.search(r"write at most (\d+) words in all", user).group(1))]
    assert asked[0] * 0.9 <= word_count(_sections_of(paper)) <= asked[0], asked


def _images(rec: dict[str, Any]) -> list[str]:
    """The image parts a call sent, as their data URLs, in order."""
    return [
        p["image_url"]["url"]
        for m in rec["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]


@needs_latex(("pdflatex",))
def test_every_paper_review_and_its_reflections_get_the_figures_the_first_got(tmp_path: Path, run_copy):
    # relay s7 ln1 044: the reflection round of the paper review lost the figure images (and their
    # list), so weaknesses about figures could not be checked against what is visible
    from test_report_support import _plot_png

    from ai_scientist.reporting.review import review_paper
    from ai_scientist.reporting.vlm import run_vlm

    run = run_copy(tmp_path)
    paths = RunPaths(run)
    shown = [{"file": f"fig_{i}.png", "caption": f"Validation accuracy, condition {i}."} for i in range(1, 4)]
    for i, fig in enumerate(shown):
        _plot_png(paths.figures / fig["file"], seed=3 + 11 * i)
    paths.figures_json.write_text(json.dumps({"figures": shown}))
    answer = default_responder()

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        role = ctx.phase if ctx.phase in ("review", "writeup") else "vlm_feedback"
        return answer(messages, schema, ctx, role)

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], num_reviews=2, num_reflections=1)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    run_vlm(run, cfg, llm)  # the figure reviews: what says the review model sees images
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    review_paper(run, cfg, llm)
    reviews = [r for r in _report_records(run, before) if r["phase"] == "review"]
    labels = [r["label"] for r in reviews]
    assert {"review_1", "review_2", "review_1_reflect_1", "review_2_reflect_1"} <= set(labels), labels
    first = _images(next(r for r in reviews if r["label"] == "review_1"))
    figures = json.loads(paths.writeup_json.read_text())["figures"]
    assert len(first) == len(figures) > 0, (len(first), figures)
    for rec in reviews:
        if rec["label"].startswith("review_") and rec["label"][7:8].isdigit():
            assert _images(rec) == first, rec["label"]
            text = _text(rec["messages"][-1])
            for f in figures:  # the list the images follow, in every round
                assert f"- {f['label']} = figures/{f['file']}: " in text, (rec["label"], f["label"])


def _six(value: Any) -> Any:
    """A value as the run's manifest writes it (6 significant digits)."""
    return float(f"{value:.6g}") if isinstance(value, float) else value


def test_a_figure_review_says_what_the_captions_nodes_are_and_what_they_measured(tmp_path: Path, run_copy):
    # relay s7 ln1 032-037: captions naming "n0007"/"n0001" and no value to check the drawing by
    from pipeline_support import journal_nodes
    from test_report_support import _plot_png

    from ai_scientist.reporting.vlm import review_figures

    run = run_copy(tmp_path)
    nodes = journal_nodes(run)
    reruns = {
        n["parent_id"] for n in nodes.values() if n["operation"] == "seed_eval" and n["status"] == "good"
    }
    named = [i for i, n in nodes.items() if n["status"] == "good" and n["operation"] != "seed_eval"][:2]
    named = sorted(named, key=lambda i: i not in reruns)  # one with seed re-runs first
    assert named and named[0] in reruns, (named, reruns)
    caption = f"Validation accuracy of {named[0]} and {' and '.join(named[1:])} per seed."
    _plot_png(RunPaths(run).figures / "fig_nodes.png", seed=5)
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(run, cfg, llm, [{"file": "fig_nodes.png", "caption": caption}])
    (rec,) = _report_records(run, before)
    text = _text(rec["messages"][-1])
    for nid in named:
        node = nodes[nid]
        line = next(x for x in text.splitlines() if x.startswith(f"- {nid}: "))
        assert f"stage {node['stage']} {node['operation']}" in line, line
        own = line.split("; seed re-runs: ")[0]
        for m in node["metrics"]:  # every value it measured, as measured
            assert f"={_six(m['value'])}" in own, (m, own)
        for r in nodes.values():
            if r["operation"] == "seed_eval" and r["parent_id"] == nid and r["status"] == "good":
                part = line.split(f"seed {r['seed']} ({r['id']}) ")[1].split(";")[0]
                headline = r["metrics"][0]
                assert f"{headline['name']}={_six(headline['value'])}" in part, part


@needs_latex(("pdflatex",))
def test_the_citer_sees_each_result_once_whole_and_one_query_limit(tmp_path: Path, run_copy):
    # relay s7 ln1 038/039: one best node's findings four times (stages 2-4 kept stage 1's best),
    # each cut mid-word at 800 characters; "at most 5 queries" in the system message, 10 in the schema
    from pipeline_support import journal_nodes

    run = run_copy(tmp_path)
    recs = _write(run, tmp_path, compile_fix_rounds=0, citations={"rounds": 2})
    cites = [r for r in recs if r["label"].startswith("citation")]
    assert cites, [r["label"] for r in recs]
    nodes = journal_nodes(run)
    for rec in cites:
        system, user = _text(rec["messages"][0]), _text(rec["messages"][-1])
        said = re.search(r"at most (\d+) queries", system)
        assert said and int(said.group(1)) == rec["params"]["schema"]["properties"]["queries"]["maxItems"]
        findings = user[user.index("# Results per stage") :]
        bullets = re.findall(r"^\s*- (?:Stage \d+ \([^)]*\), best node )?(n\d{4})", findings, re.M)
        assert bullets and len(bullets) == len(set(bullets)), bullets  # every node once
        for nid in bullets:
            summary = " ".join((nodes[nid].get("summary") or "").split())
            if summary and len(summary) <= 700:  # short enough to be shown whole everywhere
                assert summary.replace("|", "\\|") in findings, nid
        best = re.findall(r"best node (n\d{4}): (.*)", findings)
        for nid, shown in best:
            summary = " ".join((nodes[nid].get("summary") or "").split()).replace("|", "\\|")
            assert shown.strip() == summary or (len(summary) > 2000 and shown.endswith("[...]")), nid
    # what earlier rounds searched and found is promised only where it is shown (relay s7 ln2 040:
    # the first round said "what earlier rounds found follow" above nothing)
    for k, rec in enumerate(cites):
        text = "\n".join(_text(m) for m in rec["messages"])
        assert ("The queries searched so far" in text) == (k > 0), k
        assert "what earlier rounds found follow" not in text and (
            "from the second round on" in text or "earlier round" not in text
        ), k


@needs_latex(("pdflatex",))
def test_the_writer_gets_the_agents_notes_only_when_they_add_to_the_results(tmp_path: Path, run_copy):
    # relay s7 ln1 040/042: "Notes the agents kept" sent with "Core facts: (none)" and the best
    # node's creation, metric and success, all in the stage results already
    from pipeline_support import journal_nodes

    from ai_scientist.base.config import validate
    from ai_scientist.memory.digest import digest_markdown
    from ai_scientist.memory.store import MemoryStore

    run = run_copy(tmp_path)
    state = json.loads((run / "state.json").read_text())
    best = [v["best"]["node_id"] for _, v in sorted(state["stages"].items()) if v.get("best")][-1]
    failed = next(i for i, n in journal_nodes(run).items() if n["status"] == "buggy")
    store = MemoryStore.open_run(run, validate({}))
    try:
        store_digest = {b: digest_markdown(store, b) for b in (best, failed)}
        core = {b: store.core_entries(b) for b in (best, failed)}
    finally:
        store.close()
    answer = default_responder()

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return answer(messages, schema, ctx, "writeup")

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], compile_fix_rounds=0)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    sent = {}
    for branch, digest in store_digest.items():
        before = set((run / "nodes").glob("*/prompt_logs/*.json"))
        write_paper(run, cfg, llm, memory_digest=digest, options=ReportOptions(environ={}))
        writer = next(r for r in _report_records(run, before) if r["label"] == "sections")
        sent[branch] = _text(writer["messages"][-1])
    # the best node's notes: what each says is in the results (its events are the journal's)
    best_text = sent[best]
    if not core[best]:
        assert "# Notes the agents kept" not in best_text
        for line in store_digest[best].splitlines():
            m = re.match(r"- \S+ \[(\w+)\] (.*)", line)
            if m and m.group(1) == "phase":
                assert m.group(2).partition(": ")[2] in " ".join(best_text.split()), line
    # a branch whose notes hold what the results do not (its failure): they are sent
    error = next(x for x in store_digest[failed].splitlines() if "[error]" in x)
    assert "# Notes the agents kept" in sent[failed]
    assert error.split("] ", 1)[1][:60] in sent[failed]


def test_the_aggregation_manifest_keys_every_metric_one_way_and_labels_seed_values(tmp_path: Path, run_copy):
    # relay s7 ln1 031: keys with and without "[dataset]" in one node; a seed re-run's values as a
    # bare positional list
    from pipeline_support import journal_nodes

    from ai_scientist.reporting.manifest import build_manifest
    from ai_scientist.reporting.runread import load_run

    run = run_copy(tmp_path)
    nodes = journal_nodes(run)
    manifest = build_manifest(load_run(run), tmp_path / "figs")
    assert any(e["role"] == "seed_run" for e in manifest["nodes"])
    for e in manifest["nodes"]:
        node = nodes[e["node_id"]]
        written = node["metrics"]
        several = len({m.get("dataset") for m in written}) > 1
        suffixed = {k: k.endswith("]") and " [" in k for k in e["metrics"]}
        assert set(suffixed.values()) <= {several}, e["metrics"]  # one key form in the entry
        values = sorted(e["metrics"].values())
        assert values == sorted(_six(m["value"]) for m in written), e["node_id"]
        assert "metric_values" not in e
        if e["role"] == "seed_run":
            assert e["seed"] == node["seed"] and e["seed_of"] == node["parent_id"]
