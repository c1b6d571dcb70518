"""Issue 28, session 8 (lead's fixes after the helpers' round): what the writer is told of a
diagnostic metric. Every expectation is read from what the scripted run and its report really
sent (their prompt logs) and the nodes the journal holds."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from components import needs_latex
from pipeline_support import events, journal_nodes, prompt_records, record_text, start_run
from test_relay_s8_proposals import DiagnosticResponder
from test_report_support import default_responder, report_cfg

from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.writeup import ReportOptions, write_paper


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


@needs_latex()
def test_the_writer_sees_a_diagnostic_metric_marked_as_having_no_better_side(tmp_path):
    """A metric written with ``"direction": "none"`` is a diagnostic; the writer's metric lists
    say "higher is better unless marked", so it is marked there too, and the legend says what the
    mark means (a writer would otherwise call a larger diagnostic a gain)."""
    code, run, _ = start_run(tmp_path / "search", responder=DiagnosticResponder(buggy_nodes=()))
    assert code == 0
    diagnostic = {
        m["name"]: m["value"]
        for n in journal_nodes(run).values()
        if n["status"] == "good"
        for m in n["metrics"]
        if m.get("direction") == "none"
    }
    assert diagnostic
    cfg = report_cfg(tmp_path / "report")
    before = set((run / "nodes").glob("*/prompt_logs/*.json"))
    answer = default_responder()

    def respond(messages: list[dict[str, Any]], schema: dict[str, Any], ctx: Any) -> str:
        props = (schema or {}).get("properties", {})
        images = any(isinstance(m["content"], list) and len(m["content"]) > 1 for m in messages)
        role = (
            "citation"
            if ctx.label.startswith("citation")
            else "vlm_feedback"
            if images
            else "plotting"
            if "script" in props
            else "writeup"
            if "abstract" in props
            else "review"
        )
        return answer(messages, schema, ctx, role)

    write_paper(
        run,
        cfg,
        make_client(cfg, run, None, backend=ScriptedBackend(respond)),
        options=ReportOptions(environ={}),
    )
    writers = [
        json.loads(p.read_text())
        for p in sorted(set((run / "nodes").glob("*/prompt_logs/*.json")) - before)
        if json.loads(p.read_text()).get("phase") == "writeup"
    ]
    assert writers
    for rec in writers:
        user = _text(rec["messages"][-1])
        if not any(f"{name}=" in user for name in diagnostic):
            continue
        assert 'higher is better unless marked ↓ or "(no better side)" (a diagnostic)' in user
        for name, value in diagnostic.items():
            # the node's metric list marks it (a seed statistic line, "name=mean ± s.e.", is its own form)
            assert f"{name}={value:.6g} (no better side)" in user, user[user.find(name) - 200 :][:400]
        break
    else:
        raise AssertionError("no writer prompt showed the diagnostic metric")


# appended to the example's experiment: a grid of conditions keyed by name (no name field in the
# records), two cells tied on the headline value, "main" an alias of one of them, 14 cells in all
GRID = """
import json as _json
with open("metrics.json") as _fh:
    _head = _json.load(_fh)["metrics"][0]["value"]
_runs = {}
for _i in range(14):
    _acc = _head if _i in (3, 7) else round(0.5 + _i / 100, 4)
    _runs[f"grid_l2={_i / 100:.2f}_lr=0.01"] = {
        "val_accuracy": _acc,
        "train_loss": [round(1.0 / (1 + _i + _e), 5) for _e in range(6)],
    }
_runs["main"] = dict(_runs["grid_l2=0.03_lr=0.01"])
with open("grid.json", "w") as _fh:
    _json.dump({"runs": _runs}, _fh)
"""


class GridResponder(ExampleResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            if f["path"] == "experiment.py" and "metrics.json" in f["content"]:
                f["content"] += GRID
        return json.dumps(answer)


def test_a_reviews_loss_lists_mark_no_tied_cell_show_an_alias_once_and_brief_the_rest(tmp_path):
    """Relay s8 ln 002, 006: grid cells named by their keys and tied on the headline value were
    each marked "what val_accuracy measures"; a "main" alias of a cell was shown twice; past 8
    lists "(28 more such lists not shown)" hid the ablations' curves. Read from each good node's
    grid.json and its review prompt."""
    code, run, _ = start_run(
        tmp_path, "agent.stages.stage2_max_iters=0", responder=GridResponder(buggy_nodes=())
    )
    assert code == 0
    nodes = journal_nodes(run)
    checked = 0
    for rec in (r for r in prompt_records(run) if r.get("phase") == "review"):
        node = nodes.get(rec["node_id"])
        grid = run / "nodes" / rec["node_id"] / "workspace" / "grid.json"
        if not node or node["status"] != "good" or not grid.exists():
            continue
        runs = json.loads(grid.read_text())["runs"]
        text = record_text(rec)
        lines = [ln for ln in text.splitlines() if ln.startswith("- grid.json runs.")]
        assert lines, text[-2000:]
        # the cells tie on the headline's value: none is said to be what it measures
        assert not any("the condition val_accuracy reports" in ln for ln in lines), lines
        # "main" holds the same list as the cell it copies: one line, naming both
        alias = [ln for ln in lines if "runs.main.train_loss" in ln]
        assert len(alias) == 1 and "runs.grid_l2=0.03_lr=0.01.train_loss" in alias[0], alias
        assert "the same values under runs.main.train_loss" in alias[0]
        # every cell's list is shown (8 with their values, the rest first/last/min/max), none hidden
        for name, cell in runs.items():
            if name == "main":
                continue
            mine = [ln for ln in lines if ln.startswith(f"- grid.json runs.{name}.train_loss (")]
            assert len(mine) == 1, (name, lines)
            losses = cell["train_loss"]
            shown = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", mine[0].split("): ", 1)[1])]
            if ": first " in mine[0]:  # one line: first, last, lowest, highest
                want = [losses[0], losses[-1], min(losses), max(losses)]
            else:  # short enough to show whole
                want = losses
            assert len(shown) == len(want) and all(
                math.isclose(a, b, rel_tol=1e-3) for a, b in zip(shown, want, strict=True)
            ), (
                mine[0],
                want,
            )
        assert "more such lists not shown" not in text
        assert any(": first " in ln for ln in lines)
        checked += 1
    assert checked, "no review of a node that wrote grid.json"


def _answer_limits(run: Path) -> dict[str, set[int]]:
    by_role: dict[str, set[int]] = {}
    for rec in prompt_records(run):
        by_role.setdefault(rec["role"], set()).add(int(rec["params"]["max_tokens"]))
    return by_role


def test_a_large_window_model_gets_room_for_a_whole_program(tmp_path):
    """Relay s8 mm 005: a capable model was told "cut off after 4,096 tokens" for a 17 kB C program
    and its analysis. The code role's answer limit follows the model's window (an eighth of it, at
    most context.long_answer_tokens), the prompt says the limit the request was sent with, and a
    judge's role keeps its own; context.long_answer_tokens=0 keeps the configured limit."""
    from ai_scientist.base.config import Config
    from ai_scientist.context.budget import known_window

    code, run, _ = start_run(tmp_path / "auto", "agent.stages.stage2_max_iters=0")
    assert code == 0
    cfg = Config()
    model = json.loads(next((run / "nodes").glob("*/prompt_logs/*.json")).read_text())["model"]
    window = known_window(model)
    assert window and window // 8 > cfg.agent.code.max_tokens, (model, window)
    limits = _answer_limits(run)
    assert limits["code"] == {min(cfg.context.long_answer_tokens, window // 8)}, limits
    assert limits["feedback"] == {cfg.agent.feedback.max_tokens}, limits
    for rec in prompt_records(run):
        if rec["role"] == "code" and (rec["params"] or {}).get("schema"):
            assert f"cut off after {rec['params']['max_tokens']:,} tokens" in record_text(rec), rec["call_id"]

    code, fixed, _ = start_run(
        tmp_path / "fixed", "agent.stages.stage2_max_iters=0", "context.long_answer_tokens=0"
    )
    assert code == 0
    assert _answer_limits(fixed)["code"] == {cfg.agent.code.max_tokens}


def test_a_configuration_written_as_a_dict_call_is_a_parameter():
    """Relay s8 ln 010: ``MAIN = dict(l2=0.01, lr=0.01, ...)``, the headline's configuration, was
    missing from the parameters a tuning proposal was offered; a call with anything but literal
    keywords is not a constant."""
    from ai_scientist.treesearch.parameters import code_parameters

    src = "MAIN = dict(l2=0.01, lr=0.01, bias=True)\nOTHER = dict(**BASE)\nRUN = dict(lr=pick(1))\n"
    assert code_parameters({"experiment.py": src}) == [
        "MAIN = dict(l2=0.01, lr=0.01, bias=True) [experiment.py]"
    ]


def test_a_later_draft_is_told_which_freedoms_it_has(tmp_path):
    """Relay s8 ln 005, mm 005: "take a clearly different approach" when the idea fixes the method
    left the model to guess which choices count. A later draft of the stage (one whose prompt shows
    an earlier draft) is told to keep what the idea prescribes, differ in a choice it leaves open
    and name it; the first draft is told nothing of the kind."""
    code, run, _ = start_run(tmp_path, "agent.stages.stage2_max_iters=0")
    assert code == 0
    nodes = journal_nodes(run)
    drafts = sorted(
        (
            rec
            for rec in prompt_records(run)
            if rec.get("phase") == "phase2" and nodes[rec["node_id"]]["operation"] == "draft"
        ),
        key=lambda r: r["node_id"],
    )
    later = [r for r in drafts if "This is not the stage's first draft" in record_text(r)]
    assert drafts and later and drafts[0] not in later
    for rec in later:
        text = " ".join(record_text(rec).split())
        assert "keep what the research idea prescribes and differ in a choice it leaves open" in text
        assert "name that choice in your plan's goal_summary" in text
        # the earlier drafts it must differ from are in its own prompt
        earlier = [
            n
            for n in nodes
            if n < rec["node_id"] and nodes[n]["operation"] == "draft" and nodes[n]["stage"] == 1
        ]
        assert earlier and all(f"| {n} |" in text for n in earlier), (rec["node_id"], earlier)


def test_buffers_variable_lists_and_file_arguments_are_no_knobs():
    """Relay s8 mm 010: a tuning proposal was offered ``acc = {c0, c1, c2, c3}`` (variables),
    ``t = {0, 0, 0}`` (a zeroed buffer) and an analysis script's input and output file arguments
    beside the tile sizes. The run commands decide what an argument is: file names there are no
    setting; a size is."""
    from ai_scientist.treesearch.parameters import code_parameters

    files = {
        "mm.c": "int main(int argc, char **argv) {\n    int n = atoi(argv[1]);\n    double t[3] = {0, 0, 0};\n"
        "    double acc[4] = {c0, c1, c2, c3};\n    int tiles[4] = {16, 32, 64, n};\n    return 0;\n}\n",
        "analyze.py": "import sys\nsrc = sys.argv[1]\nout = sys.argv[2]\n",
    }
    commands = ["run: ./mm 1024", "run: python3 analyze.py results.json out/summary.json"]
    lines = code_parameters(files, commands=commands)
    assert lines == [
        "tiles = {16, 32, 64, n} (an array of values in the code) [mm.c]",
        "argv[1] (command-line argument) [mm.c]",
    ]
    # without the commands nothing says the analysis arguments are files: they stay listed
    assert "argv[2] (command-line argument) [analyze.py]" in code_parameters(files)


def test_an_improve_node_is_told_its_program_starts_from_its_own_code(tmp_path):
    """Relay s8 ln 022: "build on what scored well" beside code that was another node's left the
    model unsure which program to extend. An improve node's sibling table says its program starts
    from the code it is shown and when another node's change may be carried in; a draft's and a
    judge's tables say their own thing."""
    code, run, _ = start_run(tmp_path, "agent.stages.stage3_max_iters=2")
    assert code == 0
    nodes = journal_nodes(run)
    said = 'Your program starts from the code under "Current code"; carry another node\'s change into it only'
    seen = set()
    for rec in prompt_records(run):
        text = record_text(rec)
        if "## Other nodes of this stage" not in text:
            continue
        op = nodes[rec["node_id"]]["operation"] if rec["node_id"] in nodes else ""
        if rec.get("phase") == "phase2" and op == "improve":
            assert said in text and "## Current code" in text, rec["call_id"]
            seen.add(op)
        elif rec.get("phase") in ("review", "phase5_vlm") or op == "draft":
            assert said not in text, rec["call_id"]
    assert seen == {"improve"}


def test_every_code_call_says_which_configuration_of_a_grid_is_the_headline(tmp_path):
    """Relay s8 ln 001: the idea compared an L2 x learning-rate grid and nothing said which cell
    the first metrics.json entry is; a best-of-grid headline is biased by the choice. Every code
    call of a scripted run says it, in the instructions shared by all of them."""
    code, run, _ = start_run(tmp_path, "agent.stages.stage2_max_iters=0")
    assert code == 0
    codes = [r for r in prompt_records(run) if r.get("phase") == "phase2"]
    assert codes
    for rec in codes:
        text = " ".join(record_text(rec).split())
        assert (
            "Measuring several configurations, the headline is the one the research idea's evaluation names; "
            "where it names none, one fixed in advance rather than the best of a grid" in text
        ), rec["call_id"]


def test_a_protocol_cut_to_fit_is_sent_cut_not_a_crash(tmp_path):
    """The embedded model's 8k window (scripts/demo.sh, session 8's main job) made the packer cut
    the evaluation protocol layer; its policy cuts the value's text and the template, which read
    the value as a protocol, failed every later node with an internal error. A protocol capped
    at 120 tokens is sent cut, with the cut said, and the nodes work."""
    code, run, _ = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "context.layers.evaluation_protocol.max_tokens=120",
    )
    assert code == 0
    assert not [e for e in events(run) if e["type"] == "internal_error"]
    cut = 0
    for rec in prompt_records(run):
        entry = next((e for e in rec["ledger"] if e["layer"] == "evaluation_protocol"), None)
        if entry is None or entry["action"] == "dropped":
            continue
        assert entry["tokens_after"] <= 120, entry
        if entry["chars_after"] < entry["chars_before"]:
            assert "more characters cut" in record_text(rec), rec["call_id"]
            cut += 1
    assert cut, "no protocol was cut"
    nodes = journal_nodes(run)
    assert all(n["status"] == "good" for n in nodes.values() if n["stage"] == 2), nodes


def test_an_unusable_plotting_answer_falls_back_to_the_standard_figures(tmp_path, run_copy):
    """Session 8's main job: the embedded model's aggregation answer was cut at max_tokens twice
    (the answer and its repair), the StructuredOutputError ended the figures step and the paper
    had none. An unusable answer is a failed round; after the last one the pipeline's standard
    figures are drawn. The expectation is read from the calls really made and figures.json."""
    import sys

    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots

    run = run_copy(tmp_path)
    cfg = report_cfg(tmp_path, plot_reflection_rounds=1)
    calls: list[str] = []

    def respond(messages: list[dict[str, Any]], schema: dict[str, Any], ctx: Any) -> str:
        calls.append(ctx.label)
        return '{"script": "import json\\nfor'  # cut mid-answer, as at max_tokens

    client = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    result = aggregate_plots(run, cfg, client, SubprocessExecutor(python=sys.executable))
    assert result["source"] == "standard" and result["figures"], result
    assert "the plotting answer was unusable" in result["llm_problems"]
    saved = json.loads((run / "figures" / "figures.json").read_text())
    assert [f["file"] for f in saved["figures"]] == [f["file"] for f in result["figures"]]
    assert all((run / "figures" / f["file"]).is_file() for f in saved["figures"])
    # both rounds were asked (each with its repair attempt), none of them usable
    rounds = {label for label in calls}
    assert rounds == {"aggregate_r0", "aggregate_r1"}, calls
