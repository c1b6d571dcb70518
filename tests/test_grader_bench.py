"""bench/grader.py on the graded example: its figures are the run's records, and the graded
accuracy is what the hidden labels give the node's own predictions."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("grader_bench", ROOT / "bench" / "grader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_figures_come_from_the_records_and_the_grade_is_recomputable(tmp_path, capsys):
    bench = _bench()
    run_dir = bench.run_once(tmp_path, "subprocess", bench.SMOKE)
    measured = bench.measure(run_dir)
    labels_file = ROOT / "examples" / "graded_classification" / "grader" / "test_labels.csv"
    labels = {r["id"]: r["label"] for r in csv.DictReader(labels_file.open())}
    assert measured["nodes"]
    for n in measured["nodes"]:
        node_dir = run_dir / "nodes" / n["node"]
        verdict = json.loads((node_dir / "grade.json").read_text())
        assert (n["grade_s"], n["run_s"]) == (verdict["grade_s"], verdict["run_s"])
        run = json.loads((node_dir / "run.json").read_text())
        assert verdict["run_s"] == round(run["duration_s"], 3) and verdict["grade_s"] > 0
        preds = {
            r["id"]: r["label"] for r in csv.DictReader((node_dir / "workspace" / "predictions.csv").open())
        }
        assert n["graded"] == sum(preds[i] == y for i, y in labels.items()) / len(labels)
        # the program reported a validation accuracy: no claim about the graded test accuracy
        assert "val_accuracy" in n["self_reported"] and n["mismatches"] == 0
    summary = bench.summarise(measured["nodes"])
    assert summary["nodes"] == len(measured["nodes"])
    assert bench.main(["--smoke"]) == 0 and "graded nodes" in capsys.readouterr().out
