"""Issue 28, relay runs s8 ln2 / ln3 / mm2 (report side, session 9): what the aggregation call, the
paper's figure reviews and the writer are shown, and what the paper's checks report back. Every
expectation is read from what a scripted report really sent (its prompt logs) and the files the
run wrote (the stage summaries, the nodes' programs and data, paper.tex, chktex's own output)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from components import needs_latex
from test_report_support import SECTIONS, default_responder, report_cfg

from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "examples" / "label_noise" / "references.bib"


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _logs(run: Path) -> set[Path]:
    return set((run / "nodes").glob("*/prompt_logs/*.json"))


def _records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(_logs(run) - before)]


def _aggregate(run: Path, tmp_path: Path, respond: Any = None) -> list[dict[str, Any]]:
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots

    answer = respond or default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    return _records(run, before)


def _summarise(run: Path, stage: int, **fields: str) -> None:
    """The stage-end summary of ``stage`` with these prose fields (the summary role's answer)."""
    path = RunPaths(run).stage_summary(stage)
    data = json.loads(path.read_text())
    data["summary"] = {**(data.get("summary") or {}), **fields}
    path.write_text(json.dumps(data))


def _manifest_ids(user: str) -> list[str]:
    block = user[user.index('{"nodes": [') :].split("\n```", 1)[0]
    return [e["node_id"] for e in json.loads(block)["nodes"]]


def test_a_node_the_stage_summaries_name_is_in_the_aggregation_manifest(tmp_path: Path, run_copy):
    # relay s8 ln3 032: the stage-2 summary highlighted a node the manifest did not list (the later
    # stages' nodes, chosen first, had filled the manifest's room), so no figure could show it
    from ai_scientist.reporting.runread import load_run

    run = run_copy(tmp_path)
    view = load_run(run)
    bests = {str(n["id"]) for n in view.best_per_stage().values()}
    stage2 = [str(n["id"]) for n in view.ranked_good(2) if str(n["id"]) not in bests]
    assert stage2, "the scripted run has a stage-2 node besides the best"
    named = stage2[-1]  # the lowest ranked: the one a full manifest leaves out first
    # the later stages' nodes and the named one saved many result files of their own layouts (a
    # grid's runs): each node's entry takes a good part of the manifest's room
    later = [str(n["id"]) for s in (3, 4) for n in view.ranked_good(s) if str(n["id"]) not in bests]
    assert later
    for k, nid in enumerate([*later, named]):
        ws = RunPaths(run).node(nid).root / "workspace"
        for j in range(30):
            record = {f"cond_{k}_{j}_{i}_accuracy_per_epoch": [0.5 + i / 100] * 3 for i in range(30)}
            (ws / f"grid_{j}.json").write_text(json.dumps({"runs": record}))
    _summarise(run, 2, worked=f"{named} (a smaller learning rate) gave the best clean accuracy of the stage.")
    rec = next(r for r in _aggregate(run, tmp_path) if r["label"].startswith("aggregate"))
    user = _text(rec["messages"][-1])
    saved = json.loads((RunPaths(run).figures / "manifest.json").read_text())
    listed = [e["node_id"] for e in saved["nodes"]]
    good = [str(n["id"]) for s in view.by_stage() for n in view.ranked_good(s)]
    left_out = [nid for nid in good if nid not in listed]
    assert left_out, (listed, good)  # the room was full: nodes of the run were left out
    assert named in listed
    shown = _manifest_ids(user)
    assert named in shown, shown
    assert f"- Stage 2: worked: {named}" in user  # the summary that names it, in the same call


def _write(run: Path, tmp_path: Path, respond: Any, **report: Any) -> list[dict[str, Any]]:
    from ai_scientist.reporting.writeup import ReportOptions, write_paper

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], **report)
    before = _logs(run)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    return _records(run, before)


def _sections_answer(messages, schema, ctx):
    if ctx.label.startswith("citation"):
        return json.dumps({"queries": ["label noise regularisation"]})
    return json.dumps(SECTIONS)


def _program(run: Path, nid: str) -> dict[str, str]:
    data = json.loads(RunPaths(run).node(nid).file("code_answer.json").read_text())
    return {f["path"]: f["content"] for f in data["files"]}


@needs_latex(("pdflatex",))
def test_the_writer_sees_how_the_program_of_a_node_the_summaries_name_differs_from_the_best(
    tmp_path: Path, run_copy
):
    # relay s8 ln2 042, ln3 041: the paper's central result was another node's (a stage-2 setting
    # the summaries highlighted) and the writer was shown only the best node's program, so the
    # Method section described the best's settings for it
    from ai_scientist.reporting.runread import load_run

    run = run_copy(tmp_path)
    view = load_run(run)
    best = str(list(view.best_per_stage().values())[-1]["id"])
    named = next(str(n["id"]) for n in view.ranked_good(2) if str(n["id"]) != best)
    _summarise(run, 2, worked=f"{named} gave the clearest gain of the stage.")
    mine, theirs = _program(run, best), _program(run, named)
    changed = [
        line
        for path, text in theirs.items()
        for line in text.splitlines()
        if line.strip() and line not in mine.get(path, "").splitlines()
    ]
    assert changed, "the scripted tune node changed its parent's program"
    recs = _write(run, tmp_path, _sections_answer, compile_fix_rounds=0)
    user = _text(next(r for r in recs if r["label"] == "sections")["messages"][-1])
    block = user.split(f"# The program of the run's best node ({best})", 1)[1]
    section = block.split(f"\n## {named}\n", 1)[1]
    for line in changed:  # every line the named node's program has and the best's does not
        assert f"+{line}" in section, (line, section[:2000])
    assert f"how each one's program differs from {best}'s" in block
    # the writer's inputs (the claims check's source) hold it too
    assert f"## {named}" in (RunPaths(run).paper / "writer_inputs.md").read_text()


# a capable model's stage-end account (relay s8 mm2: a run of measurements, each with its spread)
_WORKED = " ".join(
    f"Tile {t} reached {3.1 + t / 100:.3f} GFLOP/s (best of 3, spread {0.01 * t:.3f}) at n = 1024, "
    f"a speed-up of {1.5 + t / 50:.4f} over the naive kernel."
    for t in (8, 16, 32, 64, 128, 256, 512)
)


def test_findings_reach_the_aggregation_call_and_the_writer_uncut_or_cut_at_a_word_with_a_marker(
    tmp_path: Path, run_copy
):
    # relay s8 mm2 037, 048: a stage's findings cut mid-metric without a marker, in the aggregation
    # call (each stage's "worked" cut to 600 characters) and in the writer's memory notes (an event
    # cut at 300): never inside a number, and a cut says what it left out
    from ai_scientist.base.config import validate
    from ai_scientist.memory.digest import digest_markdown
    from ai_scientist.memory.store import MemoryStore
    from ai_scientist.reporting.writeup import ReportOptions, write_paper

    run = run_copy(tmp_path)
    assert 600 < len(_WORKED) <= 1000  # within the summary schema's bound for "worked"
    _summarise(run, 2, worked=_WORKED)
    rec = next(r for r in _aggregate(run, tmp_path) if r["label"].startswith("aggregate"))
    line = next(x for x in _text(rec["messages"][-1]).splitlines() if x.startswith("- Stage 2:"))
    assert f"worked: {_WORKED}" in line, line  # whole
    # the writer's notes: the run's memory, with an event longer than a note is shown
    state = json.loads((run / "state.json").read_text())
    best = [v["best"]["node_id"] for _, v in sorted(state["stages"].items()) if v.get("best")][-1]
    store = MemoryStore.open_run(run, validate(json.loads(json.dumps({"llm": {"backend": "openai"}}))))
    try:
        # what an agent noted during the run, not in the stage accounts
        event = "Timings re-measured under load, " + _WORKED.replace("GFLOP/s", "GFLOP/s under load")
        store.recall_append(best, "note", event, best)
        digest = digest_markdown(store, best)
    finally:
        store.close()
    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], compile_fix_rounds=0)
    before = _logs(run)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(_sections_answer))
    write_paper(run, cfg, llm, memory_digest=digest, options=ReportOptions(environ={}))
    writer = next(r for r in _records(run, before) if r["label"] == "sections")
    user = _text(writer["messages"][-1])
    shown = next(x for x in user.splitlines() if "[note] Timings re-measured under load" in x)
    text = shown.split("[note] ", 1)[1]
    cut = re.fullmatch(r"(.*) \[\.\.\. (\d+) more characters\]", text)
    assert cut, text  # the event is longer than a note is shown: cut, and the cut says so
    kept, more = cut.group(1), int(cut.group(2))
    assert event.startswith(kept) and event[len(kept)] == " ", (kept, event)  # at a word
    assert more == len(event) - len(kept)
    # the stage's own account reaches the writer whole too
    assert f"- worked: {_WORKED}" in user


@needs_latex(("pdflatex",))
def test_a_number_the_paper_quotes_from_the_idea_as_a_power_of_ten_is_traced_to_the_idea(
    tmp_path: Path, run_copy
):
    # relay s8 mm2: the idea's correctness tolerance (1e-9), printed by the writer as $10^{-9}$, was
    # read as a 10 and a 9 and flagged as a number no record holds; a number quoted from the idea
    # is the idea's, and a power of ten is one number
    from ai_scientist.reporting.claims import check_claims, extract_numbers

    run = run_copy(tmp_path)
    idea = (ROOT / "examples" / "blocked_matmul" / "idea.md").read_text()
    (run / "idea.md").write_text(idea)  # a run of the project's benchmark example
    found = re.search(r"(\d+)e-(\d+)", idea)
    assert found and found.group(1) == "1", found
    power = found.group(2)
    math, prose = f"$10^{{-{power}}}$", f"10^-{power}"
    # and in Unicode superscripts, which the escaping once printed as "10?9"
    sup = "10" + "".join("⁻⁰¹²³⁴⁵⁶⁷⁸⁹"["-0123456789".index(c)] for c in f"-{power}")
    results = (
        f"Every kernel's result agreed with the naive kernel's within {math} of the norm, the "
        f"tolerance the study set (written {prose} in its plan, {sup} in its summary)."
    )

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["cache blocking matrix multiplication"]})
        return json.dumps(dict(SECTIONS, results=results))

    _write(run, tmp_path, respond, compile_fix_rounds=0)
    check_claims(run, "model")  # the report's claims step after the writeup
    claims = json.loads((RunPaths(run).paper / "claims.json").read_text())
    said = [c for c in claims["claims"] if "tolerance the study set" in c["context"]]
    assert len(said) == 3, said  # the three printings, each one number
    assert f"{sup} in its summary" not in (RunPaths(run).paper / "paper.tex").read_text(encoding="utf-8")
    assert f"10\\textsuperscript{{-{power}}}" in (RunPaths(run).paper / "paper.tex").read_text(
        encoding="utf-8"
    )
    held = {c.value for c in extract_numbers(idea)}
    for c in said:
        assert c["kind"] == "idea" and c["source"] == "idea.md", c
        assert c["value"] == float(f"1e-{power}") and c["value"] in held, c
    assert not [c for c in claims["claims"] if c["source"] is None and "tolerance" in c["context"]]


@needs_latex(("pdflatex", "chktex"))
def test_chktex_warnings_reach_the_writer_only_on_text_it_wrote(tmp_path: Path, run_copy):
    # relay s8 mm2 047: the writer was told of chktex warnings on text the escaping had made ("…"
    # set as "...", "×" as "x": "use \ldots", "$\times$ may look prettier"), text it never wrote;
    # a warning on its own text (straight double quotes) still reaches it
    from ai_scientist.reporting.latex import unescaped
    from ai_scientist.reporting.reflection import _token_at

    run = run_copy(tmp_path)
    results = (
        "The blocked kernel ran 2.3× faster on 1024×1024 matrices … and the naive kernel stayed "
        'the slowest, the "reference" of every comparison; see Figure \\ref{fig:1}.'
    )
    written = dict(SECTIONS, results=results)

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["cache blocking matrix multiplication"]})
        return json.dumps(written)  # every round: the same sections

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0, writeup_reflections=1)
    reflect = next(r for r in recs if r["label"] == "reflect_1")
    user = _text(reflect["messages"][-1])
    line = next(x for x in user.splitlines() if "LaTeX style warnings (chktex) in your text:" in x)
    tex = (RunPaths(run).paper / "paper.tex").read_text(encoding="utf-8").splitlines()
    ours = [str(v) for k, v in written.items()]
    reported = re.findall(r'on the line "([^"]*(?:"[^"]*"[^"]*)*?)": ((?:column \d+[^|]*)+)', line)
    assert reported, line
    for start, found in reported:
        row = next(x for x in tex if x.strip().startswith(start.removesuffix(" ...")[:60]))
        for col in map(int, re.findall(r"column (\d+)", found)):
            piece = unescaped(_token_at(row, col))
            assert any(piece in x for x in ours), (col, piece, found)  # the writer's own text
    assert "alternative to `\"'" in line, line  # its straight quotes: its own, reported
    assert "to achieve an ellipsis" not in line and "may look prettier" not in line, line
    # the escaping now sets them as LaTeX expects: chktex itself no longer warns of them
    warnings = json.loads((RunPaths(run).paper / "writeup.json").read_text())["chktex_warnings"]
    assert not [w for w in warnings if "\\ldots" in w or "\\times" in w], warnings


def test_a_figure_review_gets_the_nodes_and_the_loss_values_the_figures_script_reads(
    tmp_path: Path, run_copy
):
    # relay s8 ln3 034, 038: a report figure review listed only the nodes its caption named, and a
    # loss-curve figure's review had no loss value to check the curves against; the review now
    # lists every node whose result files the figure's part of the aggregation script reads, with
    # each list of numbers it plots (key path, length, first, last, lowest, highest)
    from ai_scientist.reporting.runread import load_run
    from ai_scientist.reporting.vlm import review_figures

    run = run_copy(tmp_path)
    _aggregate(run, tmp_path)  # the pipeline's test plotter: every node's results.json curves
    fig_dir = RunPaths(run).figures
    figures = json.loads(RunPaths(run).figures_json.read_text())["figures"]
    script = (fig_dir / json.loads(RunPaths(run).figures_json.read_text())["script"]).read_text()
    glob = re.search(r'glob\.glob\("([^"]+)"\)', script).group(1)  # what the script reads
    read = sorted(p.relative_to(fig_dir).as_posix() for p in fig_dir.glob(glob))
    assert len(read) > 1, read
    view = load_run(run)
    owners = []
    for rel in read:
        node = view.nodes[rel.split("/")[1]]
        nid = node["parent_id"] if node.get("operation") == "seed_eval" else node["id"]
        if nid not in owners:
            owners.append(nid)
    fig = figures[0]
    caption = f"Training loss per epoch; {owners[0]} is the best run."  # names one node only
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(run, cfg, llm, [{"file": fig["file"], "caption": caption}], phase="review")
    (rec,) = _records(run, before)
    user = _text(rec["messages"][-1])
    for nid in owners:  # every node whose results the figure draws, not only the caption's
        assert any(x.startswith(f"- {nid}: ") for x in user.splitlines()), (nid, user[:3000])
    # the protocols of those nodes' stages, not only of the caption's node's stage
    from ai_scientist.base.fileio import read_jsonl

    fixed = {int(e["stage"]) for e in read_jsonl(RunPaths(run).events) if e.get("type") == "eval_protocol"}
    stages = {int(view.nodes[n]["stage"]) for n in owners} & fixed
    block = user[user.index("The evaluation protocol") :]
    said = {
        int(x)
        for ln in block.splitlines()
        if ln.startswith("- stage")
        for x in re.findall(r"\d+", ln.split("(")[0])
    }
    assert len(stages) > 1 and stages <= said, (stages, block[:1500])
    # the loss values it plots, from each file it reads, as the file holds them
    for rel in read:
        data = json.loads((fig_dir / rel).read_text())
        for key, values in data.items():
            if not (isinstance(values, list) and len(values) > 2 and "loss" in key):
                continue
            line = next(x for x in user.splitlines() if x.startswith(f"- {rel} {key}: "))
            assert f"{len(values)} values, first " in line, line
            first = float(line.split("first ", 1)[1].split(",", 1)[0])
            last = float(line.split("last ", 1)[1].split(",", 1)[0])
            low = float(line.split("lowest ", 1)[1].split(",", 1)[0])
            assert abs(first - values[0]) <= 5e-4 * abs(values[0]), (first, values[0])
            assert abs(last - values[-1]) <= 5e-4 * abs(values[-1]), (last, values[-1])
            assert abs(low - min(values)) <= 5e-4 * abs(min(values)), (low, min(values))


@needs_latex(("pdflatex",))
def test_the_programs_of_many_named_nodes_are_bounded_and_the_rest_named(tmp_path: Path, run_copy):
    # the same finding (ln2 042, ln3 041) at scale: summaries naming every node of a run whose
    # programs were rewritten show each difference up to its share, and the nodes past the room
    # are named, not dropped silently
    from ai_scientist.reporting.runread import load_run
    from ai_scientist.reporting.writeup import OTHER_CODE_CHARS, OTHER_CODE_TOTAL

    run = run_copy(tmp_path)
    view = load_run(run)
    best = str(list(view.best_per_stage().values())[-1]["id"])
    others = [
        str(n["id"]) for s in sorted(view.by_stage()) for n in view.ranked_good(s) if str(n["id"]) != best
    ]
    assert len(others) * OTHER_CODE_CHARS > OTHER_CODE_TOTAL, others
    for k, nid in enumerate(others):  # each rewrote its program (a long block of its own)
        path = RunPaths(run).node(nid).file("code_answer.json")
        data = json.loads(path.read_text())
        for f in data["files"]:
            f["content"] += "".join(
                f"GRID_{k}_{i} = {0.001 * (i + k):.4f}  # condition {i}\n" for i in range(150)
            )
        path.write_text(json.dumps(data))
    _summarise(run, 4, worked=", ".join(others) + " each measured one condition.")
    recs = _write(run, tmp_path, _sections_answer, compile_fix_rounds=0)
    user = _text(next(r for r in recs if r["label"] == "sections")["messages"][-1])
    block = user.split(f"how each one's program differs from {best}'s", 1)[1]
    shown = [nid for nid in others if f"\n## {nid}\n" in block]
    rest = [nid for nid in others if nid not in shown]
    assert shown and rest, (shown, rest)
    assert f"(not shown for room: how the programs of {', '.join(rest)} differ)" in block
    body = block.split("(not shown for room", 1)[0]
    assert len(body) <= OTHER_CODE_TOTAL + OTHER_CODE_CHARS + 200 * len(shown)
    for nid in shown:  # a cut difference says what it left out
        part = body.split(f"\n## {nid}\n", 1)[1].split("\n## ", 1)[0]
        assert "more characters of the difference not shown" in part or len(part) < OTHER_CODE_CHARS
