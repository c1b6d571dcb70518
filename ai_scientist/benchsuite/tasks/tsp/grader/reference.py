"""The task author's reference for best_known (not run by the bench): a nearest-neighbour tour
from each of all 200 cities, improved by 2-opt to a local optimum, the shortest kept (numpy).
Run from a workspace holding resources/data; writes tour.csv."""

import csv

import numpy as np

pts = np.array([(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("resources/data/cities.csv"))])
n = len(pts)
D = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))


def length(t):
    return D[t, np.roll(t, -1)].sum()


def two_opt(t):
    t = list(t)
    improved = True
    while improved:
        improved = False
        for i in range(n - 1):
            a, b = t[i], t[i + 1]
            c = np.array(t[i + 2 :])
            d = np.array(t[i + 3 :] + t[:1])[: len(c)]
            if len(c) == 0:
                continue
            delta = D[a, c] + D[b, d] - D[a, b] - D[c, d]
            j = int(delta.argmin())
            if delta[j] < -1e-12:
                k = i + 2 + j
                t[i + 1 : k + 1] = t[i + 1 : k + 1][::-1]
                improved = True
    return t


best = None
for start in range(n):
    tour, left = [start], set(range(n)) - {start}
    while left:
        nxt = min(left, key=lambda c: D[tour[-1], c])
        tour.append(nxt)
        left.remove(nxt)
    tour = two_opt(tour)
    if best is None or length(tour) < length(best):
        best = tour
assert best is not None
print(f"reference tour length {length(best):.6f}")
with open("tour.csv", "w") as f:
    f.write("id\n")
    f.writelines(f"{c}\n" for c in best)
