"""One checkpoint for every phase (issue 12): a done phase is reused, an interrupted one redone.

The first tests drive :func:`checkpoint` on a real run directory and journal, reopening the
journal from disk as a resumed process does. The last one kills a run with SIGKILL between a
phase's saved answer and its journal line, resumes it, and counts the LLM calls the node really
made per phase from its prompt logs.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_support import journal_nodes, run_args

from ai_scientist.cli.commands import setup_run
from ai_scientist.phases.base import NodeContext, PhaseFailed, checkpoint
from ai_scientist.treesearch.journal import Journal

PHASES_DIR = Path(__file__).resolve().parents[1] / "ai_scientist" / "phases"
DRIVER = Path(__file__).parent / "drive_run.py"


class Compute:
    """A phase's work: counts its calls, returns ``value`` (or raises ``error``)."""

    def __init__(self, value=None, error: Exception | None = None):
        self.value, self.error, self.calls = value, error, 0

    def __call__(self):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.value


def _ctx(run, journal: Journal, node_id: str) -> NodeContext:
    return NodeContext(
        run=run,
        node=journal.get(node_id),
        parent=None,
        llm=None,
        executor=None,
        prompts=None,
        environment={},
        environment_text="",
        journal=journal,
    )


def _resumed(ctx: NodeContext) -> NodeContext:
    """The node as a resumed process sees it: the journal read back from disk."""
    return _ctx(ctx.run, Journal(ctx.run.journal_path), ctx.node.id)


@pytest.fixture
def ctx(tmp_path) -> NodeContext:
    run, _ = setup_run(run_args(tmp_path))
    journal = Journal(run.journal_path)
    node = journal.new_node(stage=1, operation="draft")
    return _ctx(run, journal, node.id)


def test_a_done_phase_is_not_redone(ctx):
    plan = {"goal_summary": "first answer"}
    first = Compute(plan)
    assert checkpoint(ctx, "phase0", "plan.json", first) == plan
    assert first.calls == 1
    assert json.loads((ctx.dir / "plan.json").read_text()) == plan
    resumed = _resumed(ctx)
    assert resumed.node.phases_done == ("phase0",)
    again = Compute({"goal_summary": "second answer"})
    assert checkpoint(resumed, "phase0", "plan.json", again) == plan
    assert again.calls == 0


def test_a_saved_answer_the_journal_never_marked_done_is_redone(ctx):
    # the state a kill leaves between the artifact's rename and the journal line
    ctx.save("code_answer.json", {"summary": "answer of the killed process"})
    resumed = _resumed(ctx)
    assert resumed.node.phases_done == ()
    redo = Compute({"summary": "answer asked again"})
    assert checkpoint(resumed, "phase2", "code_answer.json", redo) == {"summary": "answer asked again"}
    assert redo.calls == 1
    assert json.loads((ctx.dir / "code_answer.json").read_text()) == {"summary": "answer asked again"}
    assert _resumed(ctx).node.phases_done == ("phase2",)


@pytest.mark.parametrize("damage", ["missing", "empty", "torn"])
def test_a_done_phase_whose_artifact_a_power_loss_destroyed_is_redone(ctx, damage):
    # artifacts are not fsync'd; phase1 and phase3 used to return {} here instead of redoing
    checkpoint(ctx, "phase3", "compile.json", Compute({"ok": True, "commands": []}))
    path = ctx.dir / "compile.json"
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("" if damage == "empty" else '{"ok": tr')
    resumed = _resumed(ctx)
    redo = Compute({"ok": True, "commands": ["make"]})
    assert checkpoint(resumed, "phase3", "compile.json", redo) == {"ok": True, "commands": ["make"]}
    assert redo.calls == 1
    assert json.loads(path.read_text()) == {"ok": True, "commands": ["make"]}
    assert _resumed(ctx).node.phases_done == ("phase3",)  # marked once


def test_a_failed_phase_saves_nothing_and_stays_not_done(ctx):
    failing = Compute(error=PhaseFailed("phase4", "run command 1 failed"))
    with pytest.raises(PhaseFailed):
        checkpoint(ctx, "phase4", "run.json", failing)
    assert not (ctx.dir / "run.json").exists()
    assert _resumed(ctx).node.phases_done == ()


def test_no_phase_hand_writes_its_resume_guard_or_its_mark_done():
    """Only checkpoint.py reads ``phases_done`` or calls ``mark_done`` in the phases."""
    offenders = []
    for path in sorted(PHASES_DIR.glob("*.py")):
        if path.name in ("checkpoint.py", "base.py"):  # base.py defines mark_done
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("phases_done", "mark_done"):
                offenders.append(f"{path.name}:{node.lineno} {node.attr}")
    assert not offenders, offenders


# ------------------------------------------------------------- kill -9 at the checkpoint --


def _calls_per_phase(run_dir: Path, node_id: str, folder: str, pattern: str = "*.json") -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in sorted((run_dir / "nodes" / node_id / folder).glob(pattern)):
        phase = json.loads(f.read_text())["phase"]
        counts[phase] = counts.get(phase, 0) + 1
    return counts


@pytest.mark.slow
def test_kill_after_the_answer_is_saved_redoes_that_phase_only(tmp_path):
    small = ["--set", "agent.stages.stage3_max_iters=1", "--set", "agent.stages.stage4_max_iters=1"]
    small += ["--set", "agent.merge_calls=false"]  # plan, install, then code: the kill comes after two done
    env = {**os.environ, "AI_SCIENTIST_FAILPOINTS": "phase_saved:n0002:phase2"}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *small],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, f"the failpoint was never reached: {proc.stderr[-2000:]}"
    run_dir = tmp_path / "experiments" / "run"
    node_dir = run_dir / "nodes" / "n0002"
    killed = journal_nodes(run_dir)["n0002"]
    assert killed["status"] == "running" and killed["phases_done"] == ["phase0", "phase1"]
    assert (node_dir / "code_answer.json").exists(), "the kill came after the answer was saved"
    asked = _calls_per_phase(run_dir, "n0002", "prompt_logs")
    ran = _calls_per_phase(run_dir, "n0002", "exec")
    assert asked.get("phase2") == 1

    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    after = _calls_per_phase(run_dir, "n0002", "prompt_logs")
    set_aside = _calls_per_phase(run_dir, "n0002", "prompt_logs", "*.json.superseded")
    # the answer the journal never marked was asked again; the killed attempt's log is kept aside
    assert after["phase2"] == asked["phase2"] and set_aside == {"phase2": asked["phase2"]}
    for phase in ("phase0", "phase1"):  # done before the kill: not redone
        assert after.get(phase) == asked.get(phase), (phase, asked, after)
        assert _calls_per_phase(run_dir, "n0002", "exec").get(phase) == ran.get(phase)
    resumed = journal_nodes(run_dir)["n0002"]
    assert resumed["status"] in ("good", "buggy")
    assert resumed["phases_done"][:3] == ["phase0", "phase1", "phase2"]
    assert len(resumed["phases_done"]) == len(set(resumed["phases_done"]))


@pytest.mark.slow
def test_a_redone_phases_records_replace_the_killed_attempts_in_the_replay(tmp_path, capsys):
    """kill -9 after n0002's experiment ran and its run record was saved, before phase 4 was
    marked done: the resumed run runs the experiment again. The first run's command record is
    set aside, so the replay answers the command from the run that was kept (its duration is in
    the review prompt: the killed attempt's would make the replay stop there)."""
    from pipeline_support import decisions, tree

    from ai_scientist.cli.main import main

    env = {**os.environ, "AI_SCIENTIST_FAILPOINTS": "phase_saved:n0002:phase4"}
    small = ["--set", "agent.stages.stage3_max_iters=1", "--set", "agent.stages.stage4_max_iters=1"]
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "run", str(tmp_path), "run", *small],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, f"the failpoint was never reached: {proc.stderr[-2000:]}"
    run_dir = tmp_path / "experiments" / "run"
    ran = _calls_per_phase(run_dir, "n0002", "exec")
    assert ran.get("phase4") == 1
    res = subprocess.run(
        [sys.executable, str(DRIVER), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _calls_per_phase(run_dir, "n0002", "exec").get("phase4") == 1  # the kept attempt's
    assert _calls_per_phase(run_dir, "n0002", "exec", "*.json.superseded") == {"phase4": 1}
    capsys.readouterr()
    assert main(["replay", str(run_dir), "--out", str(tmp_path / "replays")]) == 0, capsys.readouterr().err
    replayed = tmp_path / "replays" / f"{run_dir.name}.replay"
    assert tree(replayed) == tree(run_dir)
    assert decisions(replayed) == decisions(run_dir)


def test_supersede_matches_phase_names_with_underscores(tmp_path):
    """Phase names may hold "_" (phase5_vlm, phase5_plot): only the redone phase's records go."""
    from types import SimpleNamespace

    from ai_scientist.phases.base import supersede

    paths = SimpleNamespace(exec=tmp_path / "exec", prompt_logs=tmp_path / "prompt_logs")
    for folder, names in (
        (paths.exec, ["001_phase4_run1.json", "002_phase5_plot_plot1.json"]),
        (paths.prompt_logs, ["001_phase5_plot_plot.json", "002_phase5_vlm_plot_critique.json"]),
    ):
        folder.mkdir()
        for name in names:
            (folder / name).write_text("")
    (paths.prompt_logs / "002_phase5_vlm_plot_critique.md").write_text("")
    ctx = SimpleNamespace(paths=paths)
    assert supersede(ctx, "phase5_vlm") == ["002_phase5_vlm_plot_critique.json"]  # type: ignore[arg-type]
    assert sorted(p.name for p in paths.prompt_logs.iterdir()) == [
        "001_phase5_plot_plot.json",
        "002_phase5_vlm_plot_critique.json.superseded",
        "002_phase5_vlm_plot_critique.md.superseded",
    ]
    assert supersede(ctx, "phase5_plot") == ["002_phase5_plot_plot1.json", "001_phase5_plot_plot.json"]  # type: ignore[arg-type]
    assert supersede(ctx, "phase5") == []  # type: ignore[arg-type]
    assert (paths.exec / "001_phase4_run1.json").exists()
