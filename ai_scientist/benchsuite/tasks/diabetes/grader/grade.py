"""Grader of the bench task ``diabetes``: R^2 of ``predictions.csv`` (id, target) on the hidden test set.

Runs in a fresh directory holding ``submission/`` (the node's workspace, read-only) and
``grader/`` (this directory, read-only; ``test_targets.csv`` is the hidden data); writes
``metrics.json`` with ``test_r2`` (higher is better) and ``test_rmse`` beside it. Standard
library only. A malformed submission exits non-zero with one line naming the file and the problem.
"""

import csv
import json
import math
import sys
from pathlib import Path

SUBMITTED = Path("submission/predictions.csv")

targets = {row["id"]: float(row["target"]) for row in csv.DictReader(open("grader/test_targets.csv"))}
if not SUBMITTED.is_file():
    sys.exit(f"{SUBMITTED} is missing: write one row per test id with columns id,target")
with SUBMITTED.open(newline="") as f:
    reader = csv.DictReader(f)
    if not reader.fieldnames or not {"id", "target"} <= {c.strip() for c in reader.fieldnames}:
        sys.exit(f"{SUBMITTED}: needs the header id,target (found {reader.fieldnames})")
    predictions = {}
    for n, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        try:
            value = float(row["target"])
        except ValueError:
            sys.exit(f"{SUBMITTED} line {n}: target {row['target']!r} is not a number")
        if not math.isfinite(value):
            sys.exit(f"{SUBMITTED} line {n}: target {row['target']!r} is not finite")
        predictions[row["id"]] = value
missing = [i for i in targets if i not in predictions]
if missing:
    sys.exit(f"{SUBMITTED} lacks {len(missing)} of {len(targets)} test ids (first: {missing[0]})")
mean = sum(targets.values()) / len(targets)
ss_res = sum((predictions[i] - y) ** 2 for i, y in targets.items())
ss_tot = sum((y - mean) ** 2 for y in targets.values())
r2 = 1.0 - ss_res / ss_tot
rmse = math.sqrt(ss_res / len(targets))
print(f"test R^2 {r2:.4f}, RMSE {rmse:.3f} on {len(targets)} patients")
metrics = [
    {"name": "test_r2", "value": r2, "direction": "maximize", "dataset": "hidden test"},
    {"name": "test_rmse", "value": rmse, "direction": "minimize", "dataset": "hidden test"},
]
Path("metrics.json").write_text(json.dumps({"metrics": metrics}))
