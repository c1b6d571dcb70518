"""Grader of the bench task ``label_noise``: test accuracy of ``predictions.csv`` (id, label).

Runs in a fresh directory holding ``submission/`` (the node's workspace, read-only) and
``grader/`` (this directory, read-only; ``test_labels.csv``, the clean test labels, is the hidden data); writes
``metrics.json``. Standard library only. A malformed submission exits non-zero with one line
that names the file and what is wrong.
"""

import csv
import json
import sys
from pathlib import Path

SUBMITTED = Path("submission/predictions.csv")
CLASSES = {"0", "1"}

labels = {row["id"]: row["label"] for row in csv.DictReader(open("grader/test_labels.csv"))}
if not SUBMITTED.is_file():
    sys.exit(f"{SUBMITTED} is missing: write one row per test id with columns id,label")
with SUBMITTED.open(newline="") as f:
    reader = csv.DictReader(f)
    if not reader.fieldnames or not {"id", "label"} <= {c.strip() for c in reader.fieldnames}:
        sys.exit(f"{SUBMITTED}: needs the header id,label (found {reader.fieldnames})")
    predictions = {}
    for n, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        label = row["label"]
        if label.endswith(".0"):
            label = label[:-2]
        if label not in CLASSES:
            sys.exit(f"{SUBMITTED} line {n}: label {row['label']!r} is not a class (0 or 1)")
        predictions[row["id"]] = label
missing = [i for i in labels if i not in predictions]
if missing:
    sys.exit(f"{SUBMITTED} lacks {len(missing)} of {len(labels)} test ids (first: {missing[0]})")
correct = sum(predictions[i] == y for i, y in labels.items())
accuracy = correct / len(labels)
print(f"test accuracy {accuracy:.4f} ({correct}/{len(labels)})")
metric = {
    "name": "test_accuracy",
    "value": accuracy,
    "direction": "maximize",
    "dataset": "hidden test, clean labels",
}
Path("metrics.json").write_text(json.dumps({"metrics": [metric]}))
