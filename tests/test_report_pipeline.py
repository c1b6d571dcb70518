"""The reporting pipeline: every step recorded, failures contained, from_phase honoured."""

from __future__ import annotations

import pytest
from test_report_support import ScriptedClient, default_responder, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.execution.base import SandboxError
from ai_scientist.reporting.pipeline import run_reporting
from ai_scientist.reporting.writeup import ReportOptions


class BrokenSandbox:
    """An executor whose sandbox cannot start (e.g. docker daemon gone)."""

    name = "broken"

    def run(self, command, *, workspace, limits=None, env=None):
        raise SandboxError("docker daemon not reachable at unix:///var/run/docker.sock")


class ExplodingExecutor:
    name = "exploding"

    def run(self, command, *, workspace, limits=None, env=None):
        raise RuntimeError("bug in executor")


def _steps(run):
    return {e["step"]: e for e in read_jsonl(run / "events.jsonl") if e["type"] == "report_step"}


@pytest.mark.parametrize(
    "executor,expect",
    [(BrokenSandbox(), "docker daemon not reachable"), (ExplodingExecutor(), "internal error RuntimeError")],
)
def test_failed_plots_step_is_recorded_and_later_steps_still_run(tmp_path, executor, expect, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder())
    out = run_reporting(run, report_cfg(tmp_path), client, executor, options=ReportOptions(tool_path=""))
    assert out["plots"]["status"] == "failed" and expect in out["plots"]["reason"]
    assert out["vlm"]["status"] == "ok"  # per-node plot critiques do not need aggregated figures
    assert out["writeup"]["status"] == "skipped" and out["review"]["status"] == "skipped"
    assert set(_steps(run)) == {"preflight", "plots", "vlm", "writeup", "review"}
    if isinstance(executor, ExplodingExecutor):
        assert "RuntimeError: bug in executor" in _steps(run)["plots"]["traceback"]


def test_report_disabled_does_nothing(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder())
    out = run_reporting(run, report_cfg(tmp_path, enabled=False), client, None)
    assert out["report"]["status"] == "skipped" and client.calls == []


def test_from_phase_review_without_paper(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(default_responder())
    out = run_reporting(run, report_cfg(tmp_path), client, None, from_phase="review")
    assert list(out) == ["review"] and out["review"]["status"] == "skipped" and client.calls == []
    with pytest.raises(ValueError, match="from_phase must be one of"):
        run_reporting(run, report_cfg(tmp_path), client, None, from_phase="vlm")
