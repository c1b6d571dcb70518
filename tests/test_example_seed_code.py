"""The bundled example's seed code runs in the subprocess sandbox and honours the metrics contract.

``examples/label_noise/seed_code.py`` is what ``scripts/demo.sh`` passes as ``--load-code``: the
first drafts start from it, so it must run with the sandbox's plain ``/usr/bin/python3`` (standard
library only), read ``SEED``, write a ``metrics.json`` that phase 4 accepts, and the per-epoch data
for plots (``results.json``) consistent with that metric.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ai_scientist.execution.base import Limits
from ai_scientist.execution.subprocess_backend import SubprocessExecutor
from ai_scientist.phases.experiment import normalise_metrics

SEED_CODE = Path(__file__).resolve().parents[1] / "examples" / "label_noise" / "seed_code.py"
DEMO = Path(__file__).resolve().parents[1] / "scripts" / "demo.sh"


@pytest.fixture
def executor():
    ex = SubprocessExecutor(allow_unsafe=os.geteuid() != 0)
    yield ex
    ex.close()


def _run(executor, seed: str) -> tuple[dict, dict]:
    ws = Path(tempfile.mkdtemp(prefix="ai-sci-seedcode-", dir="/tmp"))
    ws.chmod(0o755)
    try:
        shutil.copy(SEED_CODE, ws / "seed_code.py")
        limits = Limits(timeout_s=60, memory_mb=512, pids=16, network=False)
        res = executor.run(
            ["/usr/bin/python3", "seed_code.py"], workspace=ws, limits=limits, env={"SEED": seed}
        )
        assert res.ok, res.summary() + res.stderr
        metrics = json.loads((ws / "metrics.json").read_text())
        results = json.loads((ws / "results.json").read_text())
        return metrics, {"results": results, "stdout": res.stdout}
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_seed_code_runs_in_sandbox_and_writes_valid_metrics(executor):
    metrics, out = _run(executor, "1")
    parsed = normalise_metrics(metrics)
    assert [(m["name"], m["direction"], m["dataset"]) for m in parsed] == [
        ("val_accuracy", "maximize", "synthetic")
    ]
    value = parsed[0]["value"]
    results = out["results"]
    assert results["seed"] == 1
    # the metric is the best L2 setting's clean validation accuracy, as results.json records it
    finals = {l2: run["val_accuracy"] for l2, run in results["runs"].items()}
    assert set(finals) == {"0.0", "0.01", "0.1"}
    assert value == max(finals.values())
    assert 0.5 < value <= 1.0  # learns something on two separated classes with 20 % noise
    for l2, run in results["runs"].items():
        assert len(run["train_loss"]) == results["epochs"]  # one training loss per epoch: plot data
        assert all(x > 0 for x in run["train_loss"])
        assert (
            f"l2={l2} train_loss={run['train_loss'][-1]:.4f} val_accuracy={run['val_accuracy']:.4f}"
            in out["stdout"]
        )


def test_seed_changes_the_data(executor):
    _, one = _run(executor, "1")
    _, two = _run(executor, "2")
    assert two["results"]["seed"] == 2
    assert one["results"]["runs"]["0.0"]["train_loss"] != two["results"]["runs"]["0.0"]["train_loss"]


def test_demo_passes_the_seed_code():
    text = DEMO.read_text()
    assert "--load-code examples/label_noise/seed_code.py" in text
    assert (DEMO.parent.parent / "examples/label_noise/seed_code.py").is_file()
