"""Grader of the bench task ``tsp``: length of the closed tour in ``tour.csv`` over the 200 cities.

Runs in a fresh directory holding ``submission/`` (the node's workspace, read-only) and
``grader/`` (this directory, read-only); the grader's own ``cities.csv`` decides the coordinates
(an edited copy in the submission changes nothing). ``tour.csv``: a column ``id``, every city
exactly once, in visiting order; the tour returns to its start. Writes ``metrics.json`` with
``tour_length`` (lower is better). Standard library only.
"""

import csv
import json
import math
import sys
from pathlib import Path

SUBMITTED = Path("submission/tour.csv")

cities = {int(r["id"]): (float(r["x"]), float(r["y"])) for r in csv.DictReader(open("grader/cities.csv"))}
if not SUBMITTED.is_file():
    sys.exit(f"{SUBMITTED} is missing: write the tour as a column id, one city per row in visiting order")
with SUBMITTED.open(newline="") as f:
    reader = csv.DictReader(f)
    if not reader.fieldnames or "id" not in {c.strip() for c in reader.fieldnames}:
        sys.exit(f"{SUBMITTED}: needs a header with the column id (found {reader.fieldnames})")
    tour = []
    for n, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        try:
            city = int(float(row["id"]))
        except ValueError:
            sys.exit(f"{SUBMITTED} line {n}: id {row['id']!r} is not a city id")
        if city not in cities:
            sys.exit(f"{SUBMITTED} line {n}: city {city} does not exist (ids are 0..{len(cities) - 1})")
        tour.append(city)
seen = set()
for city in tour:
    if city in seen:
        sys.exit(f"{SUBMITTED}: city {city} is visited twice; a tour visits every city exactly once")
    seen.add(city)
if len(tour) != len(cities):
    absent = sorted(set(cities) - seen)
    sys.exit(f"{SUBMITTED}: visits {len(tour)} of {len(cities)} cities (first missing: {absent[0]})")
length = sum(math.dist(cities[a], cities[b]) for a, b in zip(tour, tour[1:] + tour[:1], strict=True))
print(f"tour length {length:.6f} over {len(tour)} cities")
metric = {"name": "tour_length", "value": length, "direction": "minimize", "dataset": "200 seeded cities"}
Path("metrics.json").write_text(json.dumps({"metrics": [metric]}))
