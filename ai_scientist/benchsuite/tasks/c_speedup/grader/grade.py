"""Grader of the bench task ``c_speedup``: a faster ``matmul`` in C, checked and timed.

Runs in a fresh directory holding ``submission/`` (the node's workspace, read-only) and
``grader/`` (this directory, read-only). Compiles ``submission/solution.c`` with the grader's
harness and its reference (``grader/reference.c`` built as ``matmul_ref``, same compiler, same
flags ``-O2``), then runs both on fresh random inputs from a seed the submission never sees:
every result must equal the reference's within 1e-9 * n, and the score is the speed-up of the
submission over the reference at n = 512, both timed in this same run (best of 5 alternating
runs), so the machine's speed cancels. ``speedup`` (higher is better); n = 64 is checked only.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

SUBMITTED = Path("submission/solution.c")
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

if not SUBMITTED.is_file():
    sys.exit(
        f"{SUBMITTED} is missing: write a C file defining void matmul(int n, const double *a, const double *b, double *c)"
    )
if CC is None:
    sys.exit("no C compiler (cc, gcc or clang) in the grader's sandbox")
Path("build").mkdir()
flags = ["-O2", "-std=gnu11", "-Igrader"]
steps = [
    [CC, *flags, "-c", "grader/reference.c", "-Dmatmul=matmul_ref", "-o", "build/ref.o"],
    [CC, *flags, "-c", str(SUBMITTED), "-o", "build/sub.o"],
    [CC, *flags, "grader/harness.c", "build/ref.o", "build/sub.o", "-lm", "-o", "build/harness"],
]
for cmd in steps:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        what = "the submission" if str(SUBMITTED) in cmd else "the harness with the submission"
        sys.exit(
            f"{SUBMITTED}: compiling {what} failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}"
        )
done = subprocess.run(["build/harness", "4242", "5"], capture_output=True, text=True, timeout=300)
if done.returncode != 0:
    why = done.stdout.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    sys.exit(
        f"{SUBMITTED}: the result is wrong or the program crashed: {why[0]} {done.stderr.strip()[-500:]}"
    )
rows = [line.split() for line in done.stdout.strip().splitlines()]
times = {int(n): (float(ref), float(sub)) for n, ref, sub, _ in rows}
ref_s, sub_s = times[512]
speedup = ref_s / max(sub_s, 1e-9)
print(f"n=512: reference {ref_s:.4f} s, submission {sub_s:.4f} s, speed-up {speedup:.3f}")
metrics = [
    {"name": "speedup", "value": speedup, "direction": "maximize", "dataset": "n=512, same run"},
    {"name": "reference_s", "value": ref_s, "direction": "minimize", "dataset": "n=512"},
    {"name": "submission_s", "value": sub_s, "direction": "minimize", "dataset": "n=512"},
]
Path("metrics.json").write_text(json.dumps({"metrics": metrics}))
