"""Baseline of the bench task circle_packing: a 5 x 5 grid of radius 0.1 and one circle in a
gap between four of them (standard library). Sum of radii 2.5 + 0.1 * (sqrt(2) - 1)."""

import math

circles = [(0.1 + 0.2 * i, 0.1 + 0.2 * j, 0.1) for i in range(5) for j in range(5)]
gap = 0.1 * (math.sqrt(2) - 1) * (1 - 1e-12)  # touching, kept a hair inside the tolerance
circles.append((0.2, 0.2, gap))
with open("circles.csv", "w") as f:
    f.write("x,y,r\n")
    f.writelines(f"{x!r},{y!r},{r!r}\n" for x, y, r in circles)
