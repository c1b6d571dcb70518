"""Graders (issue 30, item 1): the contract at start (exit 2), the idea's grader, a grader that
fails (a node error, not a crash), the tolerance, and replay of a graded run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import IDEA, journal_nodes, run_args

from ai_scientist.base.idea import load_idea
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.cli.main import main
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.phases.grading import mismatches
from ai_scientist.runloop.replay import replay_run

# grades the example's own val_accuracy, halved: a measurement the program cannot know
HALVING_GRADER = """\
import json, pathlib
own = json.loads(pathlib.Path("submission/metrics.json").read_text())["metrics"][0]["value"]
print("grading", own)
pathlib.Path("metrics.json").write_text(json.dumps(
    {"metrics": [{"name": "val_accuracy", "value": own / 2, "direction": "maximize"}]}))
"""
SMALL = [
    "agent.stages.stage1_max_iters=2",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.multi_seed_eval.num_seeds=1",
]


def _grader(tmp_path: Path, body: str = HALVING_GRADER, name: str = "grade.py") -> Path:
    d = tmp_path / "grader"
    d.mkdir(mode=0o755, exist_ok=True)
    (d / name).write_text(body)
    (d / name).chmod(0o755)
    return d


def _cli_run(tmp_path: Path, *extra: str) -> int:
    out = tmp_path / "out"
    return main(["run", "--idea", str(IDEA), "--out", str(out), "--set", "exec.backend=subprocess",
                 "--set", "report.enabled=false", "--stop-after", "setup", *extra])  # fmt: skip


def test_a_broken_grader_at_start_is_exit_2_with_the_reason(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _cli_run(tmp_path, "--grader", str(empty)) == 2
    assert "no grade or grade.py" in capsys.readouterr().err
    assert _cli_run(tmp_path, "--grader", str(tmp_path / "missing")) == 2
    assert "not a directory" in capsys.readouterr().err
    d = _grader(tmp_path, "#!/bin/sh\necho '{}' > metrics.json\n", name="grade")
    (d / "grade").chmod(0o644)
    assert _cli_run(tmp_path, "--grader", str(d)) == 2
    assert "not executable" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # no run made
    (d / "grade").chmod(0o755)
    assert _cli_run(tmp_path, "--grader", str(d)) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert f"dir: {d.resolve()}" in (run_dir / "config.resolved.yaml").read_text()


def test_a_resource_inside_the_grader_dir_is_refused(tmp_path, capsys):
    d = _grader(tmp_path)
    (d / "labels.txt").write_text("1 0\n")
    spec = tmp_path / "res.yaml"
    spec.write_text(f"resources:\n  - id: leak\n    type: local\n    path: {d}\n")
    assert _cli_run(tmp_path, "--grader", str(d), "--resources", str(spec)) == 2
    assert "overlaps the resource" in capsys.readouterr().err


def test_the_idea_names_its_grader_and_no_prompt_text_carries_it(tmp_path):
    d = _grader(tmp_path)
    text = IDEA.read_text() + "\n## Grader\n`grader`\n"
    md = tmp_path / "idea.md"
    md.write_text(text)
    idea = load_idea(md)
    assert idea.grader == str(d.resolve())
    assert "Grader" not in idea.to_markdown() and str(d) not in idea.to_markdown()
    js = tmp_path / "idea.json"
    js.write_text(json.dumps({"Title": "T", "Short Hypothesis": "h", "Experiments": "e", "grader": "grader"}))
    assert load_idea(js).grader == str(d.resolve())


def test_mismatch_tolerance_is_absolute_below_one_and_relative_above():
    g = [{"name": "acc", "value": 0.5}]
    assert mismatches(g, [{"name": "acc", "value": 0.509}], 0.01) == []
    (m,) = mismatches(g, [{"name": "acc", "value": 0.99}], 0.01)
    assert m["graded"] == 0.5 and m["self_reported"] == 0.99
    big = [{"name": "gflops", "value": 200.0}]
    assert mismatches(big, [{"name": "gflops", "value": 201.9}], 0.01) == []  # within 1 % of 200
    assert mismatches(big, [{"name": "gflops", "value": 203.0}], 0.01)
    # a metric the grader does not measure is no claim about the graded one
    assert mismatches(g, [{"name": "val_accuracy", "value": 0.9}], 0.01) == []


def test_a_failing_grader_is_a_node_error_not_a_crash(tmp_path):
    d = _grader(tmp_path, "import sys\nprint('labels missing', file=sys.stderr)\nsys.exit(3)\n")
    args = run_args(tmp_path, *SMALL)
    args.grader = str(d)
    run, resources = setup_run(args)
    code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder(buggy_nodes=())))
    assert code == 3  # the run finished, with no working experiment
    nodes = journal_nodes(run.dir)
    ran = [n for n in nodes.values() if (run.dir / "nodes" / n["id"] / "grade.json").exists()]
    assert ran
    for n in ran:
        verdict = json.loads((run.dir / "nodes" / n["id"] / "grade.json").read_text())
        assert n["status"] == "buggy" and "grading failed" in n["error"] and "labels missing" in n["error"]
        assert "exit 3" in verdict["error"]


def test_graded_run_replays_from_its_records(tmp_path, capsys):
    d = _grader(tmp_path)
    args = run_args(tmp_path, *SMALL)
    args.grader = str(d)
    run, resources = setup_run(args)
    assert execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder(buggy_nodes=()))) == 0
    nodes = journal_nodes(run.dir)
    good = {nid for nid, n in nodes.items() if n["status"] == "good"}
    for nid in good:  # the graded metric is half the program's own, as the grader computes it
        verdict = json.loads((run.dir / "nodes" / nid / "grade.json").read_text())
        assert nodes[nid]["metric"]["value"] == verdict["self_reported"][0]["value"] / 2
        assert verdict["mismatches"]
    # the viewer shows the verdict (graded against self-reported, each mismatch)
    from ai_scientist.reporting.viewer import build_view_data

    shown = build_view_data(run.dir)["nodes"]
    for nid in good:
        verdict = json.loads((run.dir / "nodes" / nid / "grade.json").read_text())
        assert shown[nid]["grade"]["mismatches"] == verdict["mismatches"]
    # `logs inspect` names the graded value and the unconfirmed claim
    nid = sorted(good)[0]
    verdict = json.loads((run.dir / "nodes" / nid / "grade.json").read_text())
    assert main(["logs", str(run.dir), "inspect", nid]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("grader: "))
    m = verdict["mismatches"][0]
    assert f"{m['name']} self-reported {m['self_reported']}, graded {m['graded']}" in line
    # replay: the grader is not run again (its directory is gone), its records answer
    for f in d.iterdir():
        f.unlink()
    os.rmdir(d)
    again = replay_run(run.dir, tmp_path / "replays")
    assert execute(again, resources=None, replay_from=run.dir) == 0
    replayed = journal_nodes(again.dir)
    assert {nid: (n["status"], n["metric"]) for nid, n in replayed.items()} == {
        nid: (n["status"], n["metric"]) for nid, n in nodes.items()
    }
    for nid in good:
        a = json.loads((run.dir / "nodes" / nid / "grade.json").read_text())
        b = json.loads((again.dir / "nodes" / nid / "grade.json").read_text())
        assert a["graded"] == b["graded"] and a["mismatches"] == b["mismatches"]


@pytest.mark.parametrize("mode", [0o700])
def test_a_grader_dir_others_cannot_enter_is_refused(tmp_path, capsys, mode):
    d = _grader(tmp_path)
    d.chmod(mode)
    assert _cli_run(tmp_path, "--grader", str(d)) == 2
    assert "not enterable by others" in capsys.readouterr().err


def test_apptainer_mounts_submission_and_grader_read_only(tmp_path):
    """No apptainer here: the command line it would get (``build_argv`` is pure)."""
    from ai_scientist.base.config import validate
    from ai_scientist.execution import make_executor
    from ai_scientist.execution.base import Limits

    fake = tmp_path / "apptainer"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    d, ws, work = _grader(tmp_path), tmp_path / "ws", tmp_path / "work"
    ws.mkdir()
    work.mkdir()
    cfg = validate({"exec": {"backend": "apptainer", "apptainer_binary": str(fake), "apptainer_image": "/x.sif",
                             "allow_unsafe_sandbox": True}})  # fmt: skip
    ex = make_executor(cfg, mounts=(("submission", ws), ("grader", d)))
    argv = ex.build_argv(["true"], work, Limits(), {})
    assert (
        f"{ws.resolve()}:/workspace/submission:ro" in argv and f"{d.resolve()}:/workspace/grader:ro" in argv
    )
    assert argv[argv.index("exec") + 1] == "--containall"  # no host directory of its own (home, /tmp, cwd)


def test_kill_during_grading_then_resume_grades_again_and_replays(tmp_path):
    """kill -9 right after a grading (its record written, the verdict not): resume redoes phase
    4 (run commands, then the grading), the killed attempt's records superseded; the resumed run
    replays from its records."""
    import subprocess
    import sys

    d = _grader(tmp_path)
    driver = Path(__file__).parent / "drive_run.py"
    small = [a for s in SMALL for a in ("--set", s)]
    env = {**os.environ, "AI_SCIENTIST_FAILPOINTS": "graded:n0002"}
    first = subprocess.run(
        [sys.executable, str(driver), "run", str(tmp_path), "run", *small, "--set", f"grader.dir={d}"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert first.returncode == -9, first.stderr[-2000:]
    run_dir = tmp_path / "experiments" / "run"
    exec_dir = run_dir / "nodes" / "n0002" / "exec"
    assert [p.name for p in exec_dir.glob("*_phase4_grade.json")] and not (
        exec_dir.parent / "grade.json"
    ).exists()
    resumed = subprocess.run(
        [sys.executable, str(driver), "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    superseded = sorted(p.name for p in exec_dir.glob("*_phase4_grade.json.superseded"))
    live = sorted(p.name for p in exec_dir.glob("*_phase4_grade.json"))
    assert len(superseded) == 1 and len(live) == 1
    node = journal_nodes(run_dir)["n0002"]
    verdict = json.loads((exec_dir.parent / "grade.json").read_text())
    assert node["status"] == "good" and node["metric"]["value"] == verdict["graded"][0]["value"]
    again = replay_run(run_dir, tmp_path / "replays")
    assert execute(again, resources=None, replay_from=run_dir) == 0
    assert journal_nodes(again.dir)["n0002"]["metric"] == node["metric"]
