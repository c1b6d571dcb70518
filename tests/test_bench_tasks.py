"""Every bundled bench task: its grader scores its baseline (checked against the baseline's own
output, recomputed here), and rejects a malformed submission with a message naming the file and
the problem. The grader runs as a run runs it (``execution.grader.grade``, subprocess sandbox)."""

from __future__ import annotations

import csv
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from ai_scientist.base.config import load_config
from ai_scientist.benchsuite.baseline import grade_workspace, measure_baseline
from ai_scientist.benchsuite.task import BUNDLED, bundled_tasks, load_task

TASKS = sorted(p.name for p in BUNDLED.iterdir() if (p / "task.yaml").is_file())
CFG = load_config(None, ["exec.backend=subprocess", "exec.timeout=300"])


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _baseline_workspace(tmp_path: Path, name: str) -> Path:
    """The baseline run by hand, as the bench runs it: its files beside resources/data."""
    task = load_task(BUNDLED / name)
    ws = tmp_path / "ws"
    shutil.copytree(task.baseline, ws)
    (ws / "resources").mkdir()
    shutil.copytree(task.data, ws / "resources" / "data")
    for line in task.spec.baseline.commands:
        subprocess.run(["/bin/sh", "-c", line], cwd=ws, check=True, timeout=300)
    return ws


def _expected(name: str, ws: Path) -> float | None:
    """The baseline's score recomputed from its output files (None: only the grader can time it)."""
    hidden = BUNDLED / name / "grader"
    if name in ("digits", "label_noise"):
        truth = {r["id"]: r["label"] for r in _rows(hidden / "test_labels.csv")}
        pred = {r["id"]: r["label"] for r in _rows(ws / "predictions.csv")}
        return sum(pred[i] == y for i, y in truth.items()) / len(truth)
    if name == "diabetes":
        truth = {r["id"]: float(r["target"]) for r in _rows(hidden / "test_targets.csv")}
        pred = {r["id"]: float(r["target"]) for r in _rows(ws / "predictions.csv")}
        mean = sum(truth.values()) / len(truth)
        res = sum((pred[i] - y) ** 2 for i, y in truth.items())
        return 1 - res / sum((y - mean) ** 2 for y in truth.values())
    if name == "tsp":
        xy = {r["id"]: (float(r["x"]), float(r["y"])) for r in _rows(ws / "resources/data/cities.csv")}
        tour = [r["id"] for r in _rows(ws / "tour.csv")]
        return sum(math.dist(xy[a], xy[b]) for a, b in zip(tour, tour[1:] + tour[:1], strict=True))
    if name == "circle_packing":
        return sum(float(r["r"]) for r in _rows(ws / "circles.csv"))
    return None


def test_every_bundled_task_has_a_test_here():
    assert TASKS == sorted(t.name for t in bundled_tasks()) and len(TASKS) >= 6


@pytest.mark.parametrize("name", TASKS)
def test_grader_scores_the_baseline(tmp_path, name):
    task = load_task(BUNDLED / name)
    ws = _baseline_workspace(tmp_path, name)
    graded = grade_workspace(task, ws, CFG)
    assert graded["error"] is None, graded
    expected = _expected(name, ws)
    if expected is not None:
        assert graded["score"] == pytest.approx(expected, rel=1e-6)
    else:  # c_speedup: the baseline is the reference itself, so about 1 (timed in one grader run)
        assert 0.5 < graded["score"] < 2.0, graded
        measured = {m["name"]: m["value"] for m in graded["raw"]["metrics"]}
        assert measured["speedup"] == pytest.approx(measured["reference_s"] / measured["submission_s"])
    # the bench's own measurement (sandboxed commands, then the grader) agrees
    bench = measure_baseline(task, CFG)
    assert bench["error"] is None, bench
    if expected is not None:
        assert bench["score"] == pytest.approx(graded["score"], rel=1e-9)
    # and the baseline is worse than the best known, in the metric's direction
    better = task.spec.best_known.value - graded["score"]
    assert better > 0 if task.spec.metric.direction == "maximize" else better < 0


def _break(name: str, ws: Path) -> tuple[str, str]:
    """Make the baseline's output malformed; (file named in the message, what it must say)."""
    if name in ("digits", "label_noise"):
        rows = _rows(ws / "predictions.csv")
        rows[3]["label"] = "seven"
        (ws / "predictions.csv").write_text("id,label\n" + "".join(f"{r['id']},{r['label']}\n" for r in rows))
        return "submission/predictions.csv", "line 5: label 'seven' is not"
    if name == "diabetes":
        lines = (ws / "predictions.csv").read_text().splitlines()
        (ws / "predictions.csv").write_text("\n".join(lines[:-10]) + "\n")
        return "submission/predictions.csv", "lacks 10 of 142 test ids"
    if name == "tsp":
        lines = (ws / "tour.csv").read_text().splitlines()
        lines[5] = lines[4]
        (ws / "tour.csv").write_text("\n".join(lines) + "\n")
        return "submission/tour.csv", "is visited twice"
    if name == "circle_packing":
        lines = (ws / "circles.csv").read_text().splitlines()
        x, y, r = lines[13].split(",")  # circle 12, the grid's centre (0.5, 0.5)
        lines[13] = f"{x},{y},{float(r) * 1.5}"  # grows into its neighbours, stays in the square
        (ws / "circles.csv").write_text("\n".join(lines) + "\n")
        return "submission/circles.csv", "overlap by"
    assert name == "c_speedup"
    (ws / "solution.c").write_text('#include "matmul.h"\nvoid matmul(int n, const double *a) { }\n')
    return "submission/solution.c", "compiling the submission failed"


@pytest.mark.parametrize("name", TASKS)
def test_grader_rejects_a_malformed_submission(tmp_path, name):
    task = load_task(BUNDLED / name)
    ws = _baseline_workspace(tmp_path, name)
    where, what = _break(name, ws)
    graded = grade_workspace(task, ws, CFG)
    assert graded["score"] is None
    assert where in graded["error"] and what in graded["error"], graded["error"]


@pytest.mark.parametrize("name", TASKS)
def test_grader_names_a_missing_submission(tmp_path, name):
    task = load_task(BUNDLED / name)
    ws = tmp_path / "empty"
    ws.mkdir()
    graded = grade_workspace(task, ws, CFG)
    assert graded["score"] is None and "is missing" in graded["error"], graded["error"]


def test_a_task_directory_is_checked(tmp_path):
    from ai_scientist.benchsuite.task import TaskError

    bad = tmp_path / "mine"
    shutil.copytree(BUNDLED / "tsp", bad)
    (bad / "task.yaml").write_text(
        (bad / "task.yaml").read_text().replace("direction: minimize", "direction: down")
    )
    with pytest.raises(TaskError, match=r"task.yaml: metric.direction"):
        load_task(bad)
    shutil.rmtree(bad / "baseline")
    with pytest.raises(TaskError, match="missing baseline"):
        load_task(bad)


def test_a_user_task_directory_is_selected_and_recorded_by_its_path(tmp_path):
    from ai_scientist.benchsuite.task import TaskError, select_tasks, task_dir, task_ref

    mine = tmp_path / "mytsp"
    shutil.copytree(BUNDLED / "tsp", mine)
    tasks = select_tasks(f"digits,{mine}")
    assert [t.name for t in tasks] == ["digits", "mytsp"]
    assert task_ref(tasks[0]) == "bundled" and task_dir("digits", "bundled") == tasks[0].dir
    assert (
        task_ref(tasks[1]) == str(mine.resolve()) and task_dir("mytsp", task_ref(tasks[1])) == mine.resolve()
    )
    with pytest.raises(TaskError, match="no task 'nope'; bundled: c_speedup, circle_packing"):
        select_tasks("nope")
    with pytest.raises(TaskError, match="tsp given twice"):
        select_tasks("tsp,tsp")
