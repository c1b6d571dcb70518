"""Baseline of the bench task tsp: the nearest-neighbour tour from city 0 (standard library)."""

import csv
import math

cities = {
    int(r["id"]): (float(r["x"]), float(r["y"])) for r in csv.DictReader(open("resources/data/cities.csv"))
}
tour, left = [0], set(cities) - {0}
while left:
    here = cities[tour[-1]]
    nxt = min(left, key=lambda c: math.dist(here, cities[c]))
    tour.append(nxt)
    left.remove(nxt)
with open("tour.csv", "w") as f:
    f.write("id\n")
    f.writelines(f"{c}\n" for c in tour)
