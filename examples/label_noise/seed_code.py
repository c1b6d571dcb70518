"""Baseline: logistic regression under 20 % label noise, L2 strengths compared (stdlib only)."""

import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "0"))
EPOCHS, LR, NOISE = 30, 0.05, 0.2


def make_data(rng, n, noise):
    xs, ys = [], []
    for _ in range(n):
        y = rng.randint(0, 1)
        m = 1.0 if y else -1.0
        xs.append([rng.gauss(m, 1.0), rng.gauss(m, 1.0)])
        ys.append(1 - y if rng.random() < noise else y)
    return xs, ys


def standardise(train, other):
    mean = [sum(x[k] for x in train) / len(train) for k in range(2)]
    std = [math.sqrt(sum((x[k] - mean[k]) ** 2 for x in train) / len(train)) or 1.0 for k in range(2)]
    return [[[(x[k] - mean[k]) / std[k] for k in range(2)] for x in xs] for xs in (train, other)]


def prob(w, b, x):
    z = max(-30.0, min(30.0, w[0] * x[0] + w[1] * x[1] + b))
    return 1.0 / (1.0 + math.exp(-z))


def loss(w, b, xs, ys):
    return -sum(
        y * math.log(prob(w, b, x) + 1e-12) + (1 - y) * math.log(1 - prob(w, b, x) + 1e-12)
        for x, y in zip(xs, ys, strict=True)
    ) / len(xs)


def accuracy(w, b, xs, ys):
    return sum((prob(w, b, x) >= 0.5) == (y == 1) for x, y in zip(xs, ys, strict=True)) / len(xs)


def train(rng, xs, ys, l2):
    w, b, losses = [0.0, 0.0], 0.0, []
    order = list(range(len(xs)))
    for _ in range(EPOCHS):
        rng.shuffle(order)
        for i in order:
            err = prob(w, b, xs[i]) - ys[i]
            w = [w[k] - LR * (err * xs[i][k] + l2 * w[k]) for k in range(2)]
            b -= LR * err
        losses.append(loss(w, b, xs, ys))
    return w, b, losses


def main():
    rng = random.Random(SEED)
    train_x, train_y = make_data(rng, 400, NOISE)
    val_x, val_y = make_data(rng, 400, 0.0)  # clean validation labels
    train_x, val_x = standardise(train_x, val_x)
    results = {}
    for l2 in (0.0, 0.01, 0.1):
        w, b, losses = train(random.Random(SEED), train_x, train_y, l2)
        results[str(l2)] = {"train_loss": losses, "val_accuracy": accuracy(w, b, val_x, val_y)}
        print(f"l2={l2} train_loss={losses[-1]:.4f} val_accuracy={results[str(l2)]['val_accuracy']:.4f}")
    best = max(r["val_accuracy"] for r in results.values())
    with open("results.json", "w") as fh:
        json.dump({"seed": SEED, "epochs": EPOCHS, "runs": results}, fh)
    with open("metrics.json", "w") as fh:
        metric = {"name": "val_accuracy", "value": best, "direction": "maximize", "dataset": "synthetic"}
        json.dump({"metrics": [metric]}, fh)


if __name__ == "__main__":
    main()
