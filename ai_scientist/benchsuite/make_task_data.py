"""How the bundled tasks' data were made (run once by the task author; kept for provenance).

``python -m ai_scientist.benchsuite.make_task_data SKLEARN_DATA_DIR`` rewrites the ``data/`` and
``grader/`` files of the bundled tasks, deterministically. ``SKLEARN_DATA_DIR``: the
``sklearn/datasets/data`` folder of a scikit-learn wheel (1.9.1 was used), which holds
``digits.csv.gz`` (a copy of the test set of the UCI "Optical Recognition of Handwritten Digits"
data, E. Alpaydin and C. Kaynak, 1998) and ``diabetes_data_raw.csv.gz`` / ``diabetes_target.csv.gz``
(B. Efron, T. Hastie, I. Johnstone, R. Tibshirani, "Least Angle Regression", 2004), distributed
within scikit-learn under its BSD-3-Clause licence. scikit-learn is not a dependency: only these
files were read. The other tasks' data are generated here from fixed seeds.
"""

from __future__ import annotations

import csv
import gzip
import math
import random
import sys
from pathlib import Path

TASKS = Path(__file__).parent / "tasks"


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _split(n: int, n_test: int, seed: int) -> tuple[list[int], list[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return sorted(order[n_test:]), sorted(order[:n_test])


def digits(src: Path) -> None:
    with gzip.open(src / "digits.csv.gz", "rt") as f:
        rows = [[int(float(v)) for v in line.split(",")] for line in f if line.strip()]
    train, test = _split(len(rows), 597, seed=33)
    cols = [f"p{i}" for i in range(64)]
    d = TASKS / "digits"
    _write(d / "data" / "train.csv", [*cols, "label"], [rows[i] for i in train])
    _write(d / "data" / "test_features.csv", ["id", *cols], [[k, *rows[i][:64]] for k, i in enumerate(test)])
    _write(d / "grader" / "test_labels.csv", ["id", "label"], [[k, rows[i][64]] for k, i in enumerate(test)])


def diabetes(src: Path) -> None:
    with gzip.open(src / "diabetes_data_raw.csv.gz", "rt") as f:
        x = [[float(v) for v in line.split()] for line in f if line.strip()]
    with gzip.open(src / "diabetes_target.csv.gz", "rt") as f:
        y = [float(line) for line in f if line.strip()]
    train, test = _split(len(x), 142, seed=33)
    cols = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
    d = TASKS / "diabetes"
    _write(d / "data" / "train.csv", [*cols, "target"], [[*x[i], y[i]] for i in train])
    _write(d / "data" / "test_features.csv", ["id", *cols], [[k, *x[i]] for k, i in enumerate(test)])
    _write(d / "grader" / "test_targets.csv", ["id", "target"], [[k, y[i]] for k, i in enumerate(test)])


def tsp() -> None:
    rng = random.Random(33)
    rows = [[i, round(rng.random(), 6), round(rng.random(), 6)] for i in range(200)]
    d = TASKS / "tsp"
    _write(d / "data" / "cities.csv", ["id", "x", "y"], rows)
    _write(d / "grader" / "cities.csv", ["id", "x", "y"], rows)  # the grader's own copy decides


def label_noise() -> None:
    """Two Gaussian classes (means (+-1, +-0.5), unit variance); 20 % of the training labels
    flipped; the test labels clean (hidden), and so are the clean training labels."""
    rng = random.Random(33)

    def sample(n: int) -> list[tuple[float, float, int]]:
        out = []
        for _ in range(n):
            y = rng.randrange(2)
            s = 1 if y else -1
            out.append((round(rng.gauss(s * 1.0, 1.0), 5), round(rng.gauss(s * 0.5, 1.0), 5), y))
        return out

    train, test = sample(400), sample(1000)
    noisy = [(x1, x2, 1 - y if rng.random() < 0.2 else y) for x1, x2, y in train]
    d = TASKS / "label_noise"
    _write(d / "data" / "train.csv", ["x1", "x2", "label"], [list(r) for r in noisy])
    _write(
        d / "data" / "test_features.csv", ["id", "x1", "x2"], [[k, r[0], r[1]] for k, r in enumerate(test)]
    )
    _write(d / "grader" / "test_labels.csv", ["id", "label"], [[k, r[2]] for k, r in enumerate(test)])
    _write(
        d / "grader" / "train_clean_labels.csv", ["row", "label"], [[k, r[2]] for k, r in enumerate(train)]
    )
    # the Bayes-optimal rule for these two classes: sign(2*x1 + x2) (equal covariance, prior 1/2)
    bayes = sum((2 * x1 + x2 > 0) == bool(y) for x1, x2, y in test) / len(test)
    print(
        f"label_noise: Bayes-optimal accuracy on the hidden test set {bayes:.4f}; "
        f"expected {0.5 * (1 + math.erf(math.sqrt(1.25) / math.sqrt(2))):.4f}"
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = Path(sys.argv[1])
    digits(src)
    diabetes(src)
    tsp()
    label_noise()
