"""Baseline for the label-noise example: L2-regularised logistic regression, pure standard library.

A seeded synthetic two-class Gaussian dataset in two dimensions; 20 % of the training labels are
flipped, the validation labels stay clean. Features are standardised with the training statistics.
Logistic regression is trained by plain stochastic gradient descent for each L2 strength; the
best clean validation accuracy goes to ``metrics.json`` (the contract of idea.md) and the
per-epoch losses and accuracies of every setting to ``results.json`` (the data for plots).

Run: ``SEED=1 python3 seed_code.py`` (SEED defaults to 0).
"""

import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "0"))
N_TRAIN = 400
N_VAL = 400
NOISE_RATE = 0.2  # fraction of training labels flipped
SEPARATION = 1.0  # distance of each class mean from the origin, per axis
EPOCHS = 30
LEARNING_RATE = 0.05
L2_STRENGTHS = (0.0, 0.01, 0.1)


def make_data(rng, n, noise_rate):
    """Points of two Gaussian classes (means -SEPARATION and +SEPARATION on both axes)."""
    xs, ys = [], []
    for _ in range(n):
        y = rng.randint(0, 1)
        mean = SEPARATION if y == 1 else -SEPARATION
        xs.append([rng.gauss(mean, 1.0), rng.gauss(mean, 1.0)])
        ys.append(1 - y if rng.random() < noise_rate else y)
    return xs, ys


def standardise(train, other):
    """Both sets scaled with the training set's mean and standard deviation per feature."""
    dims = len(train[0])
    means = [sum(row[d] for row in train) / len(train) for d in range(dims)]
    stds = [
        math.sqrt(sum((row[d] - means[d]) ** 2 for row in train) / len(train)) or 1.0 for d in range(dims)
    ]

    def scale(rows):
        return [[(row[d] - means[d]) / stds[d] for d in range(dims)] for row in rows]

    return scale(train), scale(other)


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def predict(w, b, x):
    return sigmoid(sum(wi * xi for wi, xi in zip(w, x, strict=True)) + b)


def log_loss(w, b, xs, ys, l2):
    eps = 1e-12
    total = 0.0
    for x, y in zip(xs, ys, strict=True):
        p = predict(w, b, x)
        total -= y * math.log(p + eps) + (1 - y) * math.log(1 - p + eps)
    return total / len(xs) + 0.5 * l2 * sum(wi * wi for wi in w)


def accuracy(w, b, xs, ys):
    return sum((predict(w, b, x) >= 0.5) == (y == 1) for x, y in zip(xs, ys, strict=True)) / len(xs)


def train(rng, xs, ys, l2, val_x, val_y):
    """SGD on the L2-penalised log loss; returns the weights and the per-epoch history."""
    w = [0.0] * len(xs[0])
    b = 0.0
    order = list(range(len(xs)))
    history = []
    for epoch in range(1, EPOCHS + 1):
        rng.shuffle(order)
        for i in order:
            err = predict(w, b, xs[i]) - ys[i]
            w = [wi - LEARNING_RATE * (err * xi + l2 * wi) for wi, xi in zip(w, xs[i], strict=True)]
            b -= LEARNING_RATE * err
        history.append(
            {
                "epoch": epoch,
                "train_loss": log_loss(w, b, xs, ys, l2),
                "val_loss": log_loss(w, b, val_x, val_y, 0.0),
                "val_accuracy": accuracy(w, b, val_x, val_y),
            }
        )
    return w, b, history


def main():
    rng = random.Random(SEED)
    train_x, train_y = make_data(rng, N_TRAIN, NOISE_RATE)
    val_x, val_y = make_data(rng, N_VAL, 0.0)
    train_x, val_x = standardise(train_x, val_x)

    runs = []
    for l2 in L2_STRENGTHS:
        w, b, history = train(random.Random(SEED * 1000 + len(runs)), train_x, train_y, l2, val_x, val_y)
        final = history[-1]
        runs.append({"l2": l2, "weights": w, "bias": b, "history": history})
        print(f"l2={l2}: train_loss={final['train_loss']:.4f} val_accuracy={final['val_accuracy']:.4f}")

    best = max(runs, key=lambda r: r["history"][-1]["val_accuracy"])
    best_acc = best["history"][-1]["val_accuracy"]
    with open("results.json", "w") as fh:
        json.dump(
            {
                "seed": SEED,
                "noise_rate": NOISE_RATE,
                "epochs": EPOCHS,
                "learning_rate": LEARNING_RATE,
                "best_l2": best["l2"],
                "runs": runs,
            },
            fh,
            indent=1,
        )
    with open("metrics.json", "w") as fh:
        json.dump(
            {
                "metrics": [
                    {
                        "name": "val_accuracy",
                        "value": best_acc,
                        "direction": "maximize",
                        "dataset": "synthetic",
                    }
                ]
            },
            fh,
        )
    print(f"best l2={best['l2']} val_accuracy={best_acc:.4f}")


if __name__ == "__main__":
    main()
