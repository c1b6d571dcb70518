"""A working node's plots and their VLM critique, in the loop (issue 13, item 1).

Runs the bundled example with the scripted LLM: each working node's plotting code (a scripted
answer) runs in the sandbox against the data its experiment saved, the figures are checked, the
scripted vision model critiques them, and the critique reaches the node's children under the
``plot_feedback`` layer. Expectations are read from what was really sent and answered (the
prompt logs), never restated.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from ai_scientist_testing.scripted import BLANK_NODE_PLOT, ExampleResponder
from pipeline_support import content_text, events, journal_nodes, phase_records, start_run

from ai_scientist.base.images import check_figure
from ai_scientist.llm.backend import VisionUnsupported

SMALL = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.stages.stage2_good_nodes=1",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
]


def _section(user_text: str, title: str) -> str:
    """The body of the ``## <title>`` layer of a user message (up to the next layer heading)."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", user_text, re.S | re.M)
    assert m, f"no '## {title}' layer in the message"
    return m.group(1)


def test_plots_critique_reaches_the_child_and_blank_figure_is_rejected(tmp_path):
    responder = ExampleResponder(buggy_nodes=(), blank_plot_nodes=("n0001",))
    code, run_dir, _ = start_run(tmp_path, *SMALL, responder=responder)
    assert code == 0, [e for e in events(run_dir) if e["type"] in ("internal_error", "node_failed")]
    nodes = journal_nodes(run_dir)
    parent = nodes["n0001"]
    assert parent["status"] == "good" and {"phase5_plot", "phase5_vlm"} <= set(parent["phases_done"])
    pdir = run_dir / "nodes" / "n0001"

    # the blank figure of the first plotting answer was rejected with the reason, and the retry
    # was told that reason byte for byte
    plots = json.loads((pdir / "plots.json").read_text())
    assert plots["attempts"] == 2 and plots["error"] is None
    first = plots["history"][0]["rejected"]
    assert [r["file"] for r in first] == ["train_loss.png"] and "image is blank" in first[0]["reason"]
    plot_calls = phase_records(run_dir, "n0001", "phase5_plot")
    assert len(plot_calls) == 2
    assert json.loads(plot_calls[0]["response"]["raw"])["script"] == BLANK_NODE_PLOT
    retry_prompt = content_text(plot_calls[1]["messages"][-1]["content"])
    assert first[0]["reason"] in retry_prompt
    # the kept figure is the retry's: a real, non-blank image in nodes/<id>/plots/
    assert [f["file"] for f in plots["figures"]] == ["train_loss.png"]
    assert check_figure(pdir / "plots" / "train_loss.png") is None
    # the script read the data the experiment saved
    assert "results.json" in plots["data_files"]

    # the critique: the vision call carried the figure as an image part; vlm.json holds its answer
    vlm_calls = phase_records(run_dir, "n0001", "phase5_vlm")
    assert len(vlm_calls) == 1
    parts = vlm_calls[0]["messages"][-1]["content"]
    assert any(
        p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png") for p in parts
    )
    answered = json.loads(vlm_calls[0]["response"]["raw"])
    vlm = json.loads((pdir / "vlm.json").read_text())
    assert vlm["critique"] == answered and vlm["figures"] == ["train_loss.png"]

    # a child of the node got the critique, byte for byte, under the plot_feedback layer
    children = [n for n in nodes.values() if n["parent_id"] == "n0001" and n["operation"] != "seed_eval"]
    assert children, "the plotted node has a child"
    rec = phase_records(run_dir, children[0]["id"], "phase2")[0]
    feedback = _section(content_text(rec["messages"][-1]["content"]), "Plot feedback")
    # a tune's (one setting changed) keeps the verdict and counts what it left out (relay s6 mm)
    tune = children[0]["operation"] == "tune"
    whole = (answered["reason"],) if tune else (answered["shows"], answered["reason"], *answered["problems"])
    for text in whole:
        assert text in feedback
    if tune:
        assert f"its {len(answered['problems'])} problem" in feedback
    entry = next(e for e in rec["ledger"] if e["layer"] == "plot_feedback")
    assert entry["action"] == "kept" and entry["tokens_after"] > 0

    # the run-level vlm.json is not written here (report.enabled=false), but events say what happened
    kinds = {e["type"] for e in events(run_dir)}
    assert {"node_plots", "node_vlm"} <= kinds


class _AlwaysBlank(ExampleResponder):
    def _phase5_plot(self, text, ctx):
        return json.dumps(
            {"script": BLANK_NODE_PLOT, "figures": [{"file": "train_loss.png", "caption": "loss"}]}
        )


def test_plotting_gives_up_after_one_retry_without_failing_the_node(tmp_path):
    code, run_dir, responder = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", responder=_AlwaysBlank(buggy_nodes=())
    )
    node = journal_nodes(run_dir)["n0001"]
    assert node["status"] == "good" and node["metric"]["name"] == "val_accuracy"
    nd = run_dir / "nodes" / "n0001"
    plots = json.loads((nd / "plots.json").read_text())
    assert plots["attempts"] == 2 and plots["figures"] == []
    assert "train_loss.png: image is blank" in plots["error"]
    assert not (nd / "plots").exists() or not list((nd / "plots").iterdir())
    assert [c for c in responder.calls if c[0] == "n0001" and c[1] == "phase5_plot"] == [
        ("n0001", "phase5_plot", "plot1"),
        ("n0001", "phase5_plot", "plot2"),
    ]
    vlm = json.loads((nd / "vlm.json").read_text())
    assert "critique" not in vlm and vlm["skipped"].startswith("no figure to critique")


class _Blind(ExampleResponder):
    def _phase5_vlm(self, text, ctx):
        raise VisionUnsupported("400: image input is not supported by this model")


def test_non_vision_model_is_skipped_with_the_reason(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", responder=_Blind(buggy_nodes=())
    )
    node = journal_nodes(run_dir)["n0001"]
    assert node["status"] == "good"
    vlm = json.loads((run_dir / "nodes" / "n0001" / "vlm.json").read_text())
    assert "critique" not in vlm and "image input is not supported" in vlm["skipped"]
    assert (run_dir / "nodes" / "n0001" / "plots" / "train_loss.png").exists()


def test_invalid_result_fails_the_node_with_the_reason(tmp_path):
    responder = ExampleResponder(buggy_nodes=(), invalid_plot_nodes=("n0001",))
    code, run_dir, _ = start_run(tmp_path, *SMALL, responder=responder)
    nodes = journal_nodes(run_dir)
    answered = json.loads(phase_records(run_dir, "n0001", "phase5_vlm")[0]["response"]["raw"])
    assert answered["valid"] is False
    assert nodes["n0001"]["status"] == "buggy"
    assert (
        nodes["n0001"]["error"].startswith("phase5_vlm: ") and answered["reason"] in nodes["n0001"]["error"]
    )
    assert not any(e["node_id"] == "n0001" for e in events(run_dir) if e["type"] == "stage_best")
    # its debug child sees the critique that failed it
    child = next(n for n in nodes.values() if n["parent_id"] == "n0001")
    rec = phase_records(run_dir, child["id"], "phase2")[0]
    assert answered["reason"] in _section(content_text(rec["messages"][-1]["content"]), "Plot feedback")


def test_plots_off_makes_no_call(tmp_path):
    code, run_dir, responder = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", "agent.plots.enabled=false"
    )
    assert not [c for c in responder.calls if c[1].startswith("phase5")]
    assert not (run_dir / "nodes" / "n0001" / "plots.json").exists()


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.data = ""
        self._in = False

    def handle_starttag(self, tag, attrs):
        self._in = tag == "script" and ("type", "application/json") in attrs

    def handle_endtag(self, tag):
        self._in = False

    def handle_data(self, data):
        if self._in:
            self.data += data


def test_viewer_shows_the_node_figures_and_critique(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", responder=ExampleResponder(buggy_nodes=())
    )
    page = _Page()
    page.feed((run_dir / "tree.html").read_text())
    node = json.loads(page.data)["nodes"]["n0001"]
    vlm = json.loads((run_dir / "nodes" / "n0001" / "vlm.json").read_text())
    assert [p["name"] for p in node["plots"]] == ["train_loss.png"]
    assert node["plots"][0]["url"].startswith("data:image/png;base64,")
    assert node["plots"][0]["caption"] == "Training loss per epoch of this node."
    assert node["vlm"]["critique"] == vlm["critique"]
    # the template renders the critique section
    html = (run_dir / "tree.html").read_text()
    assert "Plot critique" in html


class _HostileCritique(ExampleResponder):
    def _phase5_vlm(self, text, ctx):
        return json.dumps(
            {
                "shows": "</script><img src=x onerror=alert(1)> a falling curve",
                "problems": ["<b>bold</b> claim"],
                "valid": True,
                "reason": "fine",
            }
        )


def test_viewer_escapes_the_critique(tmp_path):
    code, run_dir, _ = start_run(
        tmp_path, *SMALL, "agent.stages.stage1_max_iters=1", responder=_HostileCritique(buggy_nodes=())
    )
    html = (run_dir / "tree.html").read_text()
    assert "<img src=x" not in html and "</script><img" not in html
    page = _Page()
    page.feed(html)
    node = json.loads(page.data)["nodes"]["n0001"]
    assert node["vlm"]["critique"]["shows"].startswith("</script><img src=x")  # carried as data, not markup


def test_run_level_vlm_json_uses_the_nodes_own_critiques(tmp_path, run_copy):
    """The pipeline's run critiqued its nodes' figures as it went: the report carries each node's
    own critique and asks for none again (a best node's critique changed here to tell it apart)."""
    import sys

    from test_report_support import ScriptedClient, default_responder, report_cfg

    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.pipeline import run_reporting
    from ai_scientist.reporting.runread import load_run
    from ai_scientist.reporting.writeup import ReportOptions

    run = run_copy(tmp_path)
    bests = {str(n["id"]) for n in load_run(run).best_per_stage().values()}
    nid = sorted(b for b in bests if (run / "nodes" / b / "vlm.json").exists())[0]
    own = {"shows": "loss falls", "problems": [], "valid": True, "reason": f"{nid}'s own critique"}
    (run / "nodes" / nid / "vlm.json").write_text(json.dumps({"model": "m", "critique": own}))
    made = {p.parent.name: json.loads(p.read_text())["critique"] for p in run.glob("nodes/*/vlm.json")}
    made = {k: v for k, v in made.items() if v}
    client = ScriptedClient(default_responder())
    run_reporting(
        run,
        report_cfg(tmp_path),
        client,
        SubprocessExecutor(python=sys.executable),
        options=ReportOptions(tool_path=""),
    )
    vlm = json.loads((run / "figures" / "vlm.json").read_text())
    assert vlm["nodes"][nid] == own and vlm["nodes"] == made
    critiqued_now = {c["ctx"].node_id for c in client.calls if c["role"] == "vlm_feedback"}
    assert critiqued_now == {"run"}  # only the report's own figures
