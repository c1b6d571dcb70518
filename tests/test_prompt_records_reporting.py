"""Issue 14: the writeup's calls (citation rounds, the draft, a reflection round) go through the
one prompt path, read back from their prompt logs.

``write_paper`` with a recording client (scripted backend, prompt logs under ``nodes/run/``), a
Semantic Scholar stand-in on 127.0.0.1 and two citation rounds. Every expectation comes from the
logged ``messages`` and ledgers: each call has a ledger naming its declared prompt, fits the budget
counted again, and the calls of one prompt share everything before their own request (the
``node_brief`` section, last) byte for byte — the prefix a provider's cache can reuse.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from components import needs_latex
from pipeline_support import start_run
from test_report_support import FakeS2, default_responder, report_cfg

from ai_scientist.context import Budget, counter_for
from ai_scientist.context.spec import LAYERS, PROMPTS
from ai_scientist.context.tokens import IMAGE_TOKENS, messages_tokens
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.vlm import critique_node_plots, review_figures
from ai_scientist.reporting.writeup import ReportOptions, write_paper

BRIEF = f"\n\n## {LAYERS['node_brief'].heading}\n"


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


@needs_latex(("pdflatex",))
def test_writeup_and_citation_calls_are_assembled_budgeted_and_share_their_prefix(tmp_path: Path, run_copy):
    run = run_copy(tmp_path)
    answer = default_responder()
    queries = [["learning rate warm-up"], ["cosine schedules"]]

    def respond(messages, schema, ctx):
        if ctx.label == "citation_queries":
            return json.dumps({"queries": queries.pop(0) if queries else []})
        return answer(messages, schema, ctx, "writeup")

    cfg = report_cfg(tmp_path, citations={"rounds": 2}, writeup_reflections=1, compile_fix_rounds=0)
    server = FakeS2()
    try:
        searched = set((run / "nodes" / "run" / "prompt_logs").glob("*.json"))  # the search's own
        llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
        write_paper(run, cfg, llm, options=ReportOptions(s2_base_url=server.url, environ={}))
    finally:
        server.close()

    logs = sorted(set((run / "nodes" / "run" / "prompt_logs").glob("*.json")) - searched)
    recs = [json.loads(p.read_text()) for p in logs]
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        assert rec["ledger"], rec["call_id"]
        layers = [e["layer"] for e in rec["ledger"] if e["layer"] in LAYERS]
        names = [n for n, declared in PROMPTS.items() if declared == layers]
        assert len(names) == 1, (rec["call_id"], layers)
        counter = counter_for(rec["params"]["model"])
        assert messages_tokens(rec["messages"], counter) <= Budget.from_config(cfg.context).limit_for(counter)
        by_prompt.setdefault(names[0], []).append(rec)
    assert len(by_prompt.get("citation_queries", [])) == 2, sorted(by_prompt)
    writes = by_prompt.get("writeup", [])
    assert [r["label"] for r in writes] == ["sections", "reflect_1"], [r["label"] for r in writes]

    for name, calls in by_prompt.items():
        prefixes = set()
        for rec in calls:
            system, user = (_text(m) for m in rec["messages"])
            assert user.count(BRIEF) == 1, rec["call_id"]
            after = user[user.index(BRIEF) + len(BRIEF) :]
            assert not [n for n in LAYERS if f"\n\n## {LAYERS[n].heading}\n" in after], rec["call_id"]  # last
            prefixes.add(system + "\x00" + user[: user.index(BRIEF)])
        assert len(prefixes) == 1, name  # everything before the call's own request is shared
    # and the run's material is in that shared part: the idea, and for the writer the references
    citation_user = _text(by_prompt["citation_queries"][1]["messages"][1])
    assert "learning rate warm-up" in citation_user[citation_user.index(BRIEF) :]
    reflect_user = _text(writes[1]["messages"][1])
    assert "Reflection round 1 of 1" in reflect_user[reflect_user.index(BRIEF) :]
    assert (
        "# Citation keys you may use, as \\cite{KEY} (no other key exists)\n- "
        in reflect_user[: reflect_user.index(BRIEF)]
    )


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((run / "nodes").glob("*/prompt_logs/*.json"))]


def _declared(rec: dict[str, Any]) -> str:
    layers = [e["layer"] for e in rec["ledger"] if e["layer"] in LAYERS]
    names = [n for n, declared in PROMPTS.items() if declared == layers]
    assert len(names) == 1, (rec["call_id"], layers)
    return names[0]


class _FourPlots(ExampleResponder):
    """The bundled example's answers, except that each node's plotting script saves its figure
    under four names: the report-time critique then sends four images (each one counts)."""

    def _phase5_plot(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase5_plot(text, ctx))
        answer["script"] += "".join(f"img.save('node_plots/copy{k}.png')\n" for k in range(3))
        answer["figures"] += [
            {"file": f"copy{k}.png", "caption": "The same training loss."} for k in range(3)
        ]
        return json.dumps(answer)


def _stage_bests_run(root: Path) -> Path:
    """A scripted run whose stages hand over different best nodes, none critiqued in the loop.

    The session's ``scripted_run`` cannot show the report-time critique of several stages' best
    nodes: its seed re-ranking carries one node through every stage and the loop critiques every
    node's plots. Here re-ranking is off (stage 2's best single run is handed on) and the loop's
    critique too (``agent.plots.critique=false``: vlm.json says "skipped"), so every stage best is
    left for the report to critique."""
    code, run, _ = start_run(
        root,
        "agent.multi_seed_eval.rerank_candidates=0",
        "agent.plots.critique=false",
        responder=_FourPlots(),
    )
    assert code == 0, run
    return run


def _critique(run: Path, root: Path, max_prompt_tokens: int | None = None) -> tuple[Any, dict[str, Any]]:
    answer = default_responder()
    cfg = report_cfg(root)
    if max_prompt_tokens:
        context = cfg.context.model_copy(update={"max_prompt_tokens": max_prompt_tokens})
        cfg = cfg.model_copy(update={"context": context})
    backend = ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    return cfg, critique_node_plots(run, cfg, make_client(cfg, run, None, backend=backend))


def test_report_time_plot_critique_is_assembled_and_budgeted_with_its_images(tmp_path: Path):
    """The report-time critique of the stages' best nodes (none has a critique of its own in this
    run) goes through the one prompt path: prompt ``plot_critique``, a ledger, the budget kept with
    the images counted, the plots after the text, everything before the node's own lines shared.
    Then again under a budget that the largest request, as first sent, would exceed: the text is
    cut (ledger) so that text and images fit."""
    recorded = _stage_bests_run(tmp_path / "scripted")
    run = Path(shutil.copytree(recorded, tmp_path / "a" / "run"))
    cfg, critiques = _critique(run, tmp_path / "a")
    # the stage bests the run recorded (state.json); stage 4 hands on the node it ablated
    state = json.loads((run / "state.json").read_text())
    bests = {str(st["best"]["node_id"]) for st in state["stages"].values()}
    assert len(bests) >= 2, f"the run's stages should hand over different best nodes: {state['stages']}"
    assert all(json.loads((run / "nodes" / n / "vlm.json").read_text()).get("skipped") for n in bests)
    recs = [r for r in _records(run) if r["phase"] == "vlm"]
    assert {r["node_id"] for r in recs} == bests == set(critiques)
    title = (run / "idea.md").read_text().splitlines()[0].lstrip("# ").strip()
    prefixes, sizes = set(), []
    for rec in recs:
        assert rec["ledger"] and _declared(rec) == "plot_critique", rec["call_id"]
        counter = counter_for(rec["params"]["model"])
        sent = messages_tokens(rec["messages"], counter)
        assert sent <= Budget.from_config(cfg.context).limit_for(counter), rec["call_id"]
        sizes.append(sent)
        system, user = rec["messages"]
        parts = user["content"]
        images = [p for p in parts if p["type"] == "image_url"]
        # the shared text, the plots, then the node's own lines (node_brief) last
        assert [p["type"] for p in parts] == ["text", *["image_url"] * len(images), "text"]
        plots = sorted((run / "nodes" / rec["node_id"] / "plots").glob("*.png"))
        assert len(images) == len(plots) == 4
        shared, own = parts[0]["text"], parts[-1]["text"]
        assert own.startswith(BRIEF.lstrip("\n")) and BRIEF not in shared
        assert rec["node_id"] in own and ", ".join(p.name for p in plots) in own
        assert title in shared  # the idea, in the shared part
        prefixes.add(_text(system) + "\x00" + shared)
    assert len(prefixes) == 1
    assert min(sizes) > 4 * IMAGE_TOKENS  # the four-plot requests: the images dominate

    tight = max(sizes) - 20
    run = Path(shutil.copytree(recorded, tmp_path / "b" / "run"))
    cfg, critiques = _critique(run, tmp_path / "b", tight)
    recs = [r for r in _records(run) if r["phase"] == "vlm"]
    assert len(recs) == len(bests) and not any("error" in c for c in critiques.values())
    for rec in recs:
        counter = counter_for(rec["params"]["model"])
        assert messages_tokens(rec["messages"], counter) <= Budget.from_config(cfg.context).limit_for(counter)
    cut = [e for r in recs for e in r["ledger"] if e["action"] == "truncated"]
    assert cut, "the largest request needed a cut to fit with its images"


def test_a_figure_reviewed_with_two_captions_shares_everything_up_to_its_caption(tmp_path: Path, run_copy):
    """The figure review puts the image before the call's own lines (file and caption, node_brief):
    the same figure asked about again with another caption (the paper's, after the writeup) repeats
    the earlier request up to the caption, image included, byte for byte."""
    run = run_copy(tmp_path)
    shutil.copyfile(
        sorted(run.glob("nodes/*/plots/*.png"))[0], run / "figures" / "loss.png"
    )  # a node's figure
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    backend = ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    llm = make_client(cfg, run, None, backend=backend)
    for caption in ("Loss per epoch.", "Validation loss of the best node per stage."):
        review_figures(run, cfg, llm, [{"file": "loss.png", "caption": caption}])
    first, second = (r for r in _records(run) if r["phase"] == "vlm" and r["node_id"] == "run")
    assert _declared(first) == _declared(second) == "figure_review"
    assert first["messages"][0] == second["messages"][0]
    a, b = first["messages"][1]["content"], second["messages"][1]["content"]
    assert [p["type"] for p in a] == [p["type"] for p in b] == ["text", "image_url", "text"]
    assert a[:2] == b[:2] and a[2] != b[2]  # the same text and image; only the caption differs
    assert "Loss per epoch." in a[2]["text"] and a[2]["text"].startswith(BRIEF.lstrip("\n"))
