"""A correct experiment for the bundled ``examples/label_noise`` idea (pure standard library).

The scripted fake LLM returns this program (with the hyper-parameters of the
node) so end-to-end tests and benchmarks exercise the real pipeline: files
written into the workspace, run in the sandbox, ``metrics.json`` read back.
"""

from __future__ import annotations

PROGRAM = '''\
"""Logistic regression under label noise (synthetic data, pure Python)."""
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "0"))
LR = {lr}
L2 = {l2}
EPOCHS = {epochs}
USE_BIAS = {use_bias}
STANDARDIZE = {standardize}
NOISE = 0.2


def make(rng, n, noise):
    xs, ys = [], []
    for _ in range(n):
        c = rng.random() < 0.5
        x = [rng.gauss(1.0 if c else -1.0, 1.2), rng.gauss(0.6 if c else -0.6, 1.2)]
        y = int(c) if rng.random() >= noise else int(not c)
        xs.append(x)
        ys.append(y)
    return xs, ys


def standardize(train, other):
    d = len(train[0])
    mu = [sum(x[j] for x in train) / len(train) for j in range(d)]
    sd = [math.sqrt(sum((x[j] - mu[j]) ** 2 for x in train) / len(train)) or 1.0 for j in range(d)]
    f = lambda xs: [[(x[j] - mu[j]) / sd[j] for j in range(d)] for x in xs]
    return f(train), f(other)


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def main():
    rng = random.Random(SEED)
    xtr, ytr = make(rng, 400, NOISE)
    xva, yva = make(rng, 400, 0.0)
    if STANDARDIZE:
        xtr, xva = standardize(xtr, xva)
    w, b = [0.0, 0.0], 0.0
    losses = []
    for _ in range(EPOCHS):
        order = list(range(len(xtr)))
        rng.shuffle(order)
        total = 0.0
        for i in order:
            p = sigmoid(sum(wj * xj for wj, xj in zip(w, xtr[i])) + b)
            g = p - ytr[i]
            w = [wj - LR * (g * xj + L2 * wj) for wj, xj in zip(w, xtr[i])]
            if USE_BIAS:
                b -= LR * g
            total += -math.log(max(1e-12, p if ytr[i] else 1.0 - p))
        losses.append(total / len(xtr))
    correct = sum(
        int((sigmoid(sum(wj * xj for wj, xj in zip(w, x)) + b) >= 0.5) == bool(y)) for x, y in zip(xva, yva)
    )
    acc = correct / len(xva)
    with open("metrics.json", "w") as fh:
        json.dump({{"metrics": [{{"name": "val_accuracy", "value": acc, "direction": "maximize",
                                 "dataset": "synthetic"}}]}}, fh)
    with open("results.json", "w") as fh:
        json.dump({{"train_loss": losses, "weights": w, "bias": b, "val_accuracy": acc}}, fh)
    print(f"val_accuracy={{acc:.4f}} final_loss={{losses[-1]:.4f}}")


if __name__ == "__main__":
    main()
'''

BUGGY_PROGRAM = """\
import json
print("training...")
accuracy = compute_accuracy()  # NameError: the function was never written
json.dump({"val_accuracy": accuracy}, open("metrics.json", "w"))
"""


def render(
    lr: float = 0.1,
    l2: float = 0.01,
    epochs: int = 8,
    use_bias: bool = True,
    standardize: bool = True,
) -> str:
    """The experiment source with these hyper-parameters."""
    return PROGRAM.format(lr=lr, l2=l2, epochs=epochs, use_bias=use_bias, standardize=standardize)
