"""Grader of the bench task ``circle_packing``: 26 disjoint circles in the unit square.

Runs in a fresh directory holding ``submission/`` (the node's workspace, read-only) and
``grader/`` (this directory). ``circles.csv``: columns x, y, r; exactly 26 rows. Valid when every
circle lies in [0, 1]^2 and no two overlap, each within TOL; the score is the sum of the radii
(``sum_radii``, higher is better). Standard library only.
"""

import csv
import json
import math
import sys
from pathlib import Path

N = 26
TOL = 1e-9
SUBMITTED = Path("submission/circles.csv")

if not SUBMITTED.is_file():
    sys.exit(f"{SUBMITTED} is missing: write {N} rows with columns x,y,r")
with SUBMITTED.open(newline="") as f:
    reader = csv.DictReader(f)
    if not reader.fieldnames or not {"x", "y", "r"} <= {c.strip() for c in reader.fieldnames}:
        sys.exit(f"{SUBMITTED}: needs the header x,y,r (found {reader.fieldnames})")
    circles = []
    for n, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        try:
            x, y, r = (float(row[k]) for k in ("x", "y", "r"))
        except ValueError:
            sys.exit(f"{SUBMITTED} line {n}: x, y and r must be numbers (got {row})")
        if not all(math.isfinite(v) for v in (x, y, r)) or r <= 0:
            sys.exit(f"{SUBMITTED} line {n}: needs finite x, y and a radius > 0 (got {x}, {y}, {r})")
        circles.append((x, y, r))
if len(circles) != N:
    sys.exit(f"{SUBMITTED}: {len(circles)} circles; the task asks for exactly {N}")
for i, (x, y, r) in enumerate(circles):
    if x - r < -TOL or x + r > 1 + TOL or y - r < -TOL or y + r > 1 + TOL:
        sys.exit(f"{SUBMITTED} circle {i} (x={x}, y={y}, r={r}) leaves the unit square")
for i in range(N):
    for j in range(i + 1, N):
        (xi, yi, ri), (xj, yj, rj) = circles[i], circles[j]
        gap = math.hypot(xi - xj, yi - yj) - (ri + rj)
        if gap < -TOL:
            sys.exit(f"{SUBMITTED}: circles {i} and {j} overlap by {-gap:.3g}")
total = sum(r for _, _, r in circles)
print(f"valid packing of {N} circles, sum of radii {total:.6f}")
metric = {"name": "sum_radii", "value": total, "direction": "maximize", "dataset": "n=26 unit square"}
Path("metrics.json").write_text(json.dumps({"metrics": [metric]}))
