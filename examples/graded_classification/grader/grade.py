"""Grader of the graded_classification example (ai-scientist run ... --grader DIR).

Runs in a fresh directory holding submission/ (the node's workspace, read-only) and grader/
(this directory, read-only); writes metrics.json there. The node's programs never see this
directory: test_labels.csv is the hidden data. Standard library only.
"""

import csv
import json
import sys
from pathlib import Path

labels = {row["id"]: row["label"] for row in csv.DictReader(open("grader/test_labels.csv"))}
predictions_file = Path("submission/predictions.csv")
if not predictions_file.is_file():
    sys.exit("submission/predictions.csv is missing: the program must write one prediction per test id")
predictions = {}
for row in csv.DictReader(predictions_file.open()):
    predictions[str(row.get("id", "")).strip()] = str(row.get("label", "")).strip()
missing = [i for i in labels if i not in predictions]
if missing:
    sys.exit(f"predictions.csv lacks {len(missing)} of {len(labels)} test ids (first: {missing[0]})")
correct = sum(predictions[i] == y for i, y in labels.items())
accuracy = correct / len(labels)
print(f"test accuracy {accuracy:.4f} ({correct}/{len(labels)})")
Path("metrics.json").write_text(
    json.dumps(
        {
            "metrics": [
                {
                    "name": "test_accuracy",
                    "value": accuracy,
                    "direction": "maximize",
                    "dataset": "hidden test",
                }
            ]
        }
    )
)
