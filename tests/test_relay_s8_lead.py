"""Issue 28, session 8 (lead's fixes after the helpers' round): what the writer is told of a
diagnostic metric. Every expectation is read from what the scripted run and its report really
sent (their prompt logs) and the nodes the journal holds."""

from __future__ import annotations

import json
from typing import Any

from components import needs_latex
from pipeline_support import journal_nodes, start_run
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
