"""Baseline of the bench task label_noise: logistic regression by plain SGD, no penalty, trained
on the noisy labels as given (standard library)."""

import csv
import math
import random

rows = [
    (float(r["x1"]), float(r["x2"]), int(r["label"]))
    for r in csv.DictReader(open("resources/data/train.csv"))
]
test = [
    (r["id"], float(r["x1"]), float(r["x2"]))
    for r in csv.DictReader(open("resources/data/test_features.csv"))
]
w1 = w2 = b = 0.0
rng = random.Random(0)
for _epoch in range(20):
    rng.shuffle(rows)
    for x1, x2, y in rows:
        p = 1.0 / (1.0 + math.exp(-(w1 * x1 + w2 * x2 + b)))
        g = p - y
        w1, w2, b = w1 - 0.1 * g * x1, w2 - 0.1 * g * x2, b - 0.1 * g
with open("predictions.csv", "w") as f:
    f.write("id,label\n")
    f.writelines(f"{i},{int(w1 * x1 + w2 * x2 + b > 0)}\n" for i, x1, x2 in test)
