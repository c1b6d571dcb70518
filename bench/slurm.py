"""Slurm backend on the local single-node cluster: per-command overhead and throughput.

    eval "$(scripts/slurm_ci.sh start)"
    python bench/slurm.py [--n 10] [--jobs 12] [--write docs/benchmarks.md]

Measured in the same run, with the same inner sandbox (subprocess) and the same
command (``/usr/bin/python3 -c pass``):

- per-command latency through the subprocess backend, then through the slurm
  backend one job at a time (sbatch -> scheduled -> in-job runner -> exit file
  -> poll); overhead = slurm median - subprocess median, and the ratio;
- throughput: ``--jobs`` commands of 0.5 s each (``sleep 0.5``) submitted by 1, 2
  and 4 threads (jobs in flight), commands per second and the speed-up over 1.

``--write`` replaces only the "## Slurm" section of the benchmarks page.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ai_scientist.base.config import load_config
from ai_scientist.execution import Limits, make_executor

PY = "/usr/bin/python3"
LIM = Limits(timeout_s=60, memory_mb=1024)


def _ws(root: Path, i: int) -> Path:
    ws = root / "exp" / "bench" / "nodes" / f"n{i:04d}" / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def latency(executor, root: Path, n: int) -> list[float]:
    executor.run([PY, "-c", "pass"], workspace=_ws(root, 0), limits=LIM)  # warm-up
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = executor.run([PY, "-c", "pass"], workspace=_ws(root, 1 + i), limits=LIM)
        out.append(time.perf_counter() - t)
        if not r.ok:
            raise RuntimeError(f"{executor.name}: {r.summary()} {r.stderr[-300:]}")
    return out


def bare_sbatch(n: int, root: Path) -> list[float]:
    """``sbatch --wrap true`` to COMPLETED, polled every 50 ms: Slurm's own share of a job."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        job = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--export=NONE",
                "-o",
                "/dev/null",
                "--chdir",
                str(root),
                "--wrap",
                "true",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        while True:
            state = subprocess.run(
                ["squeue", "--noheader", "--states=all", "-o", "%T", "--jobs", job],
                capture_output=True,
                text=True,
            ).stdout.strip()
            if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                break
            time.sleep(0.05)
        out.append(time.perf_counter() - t)
    return out


def throughput(executor, root: Path, jobs: int, in_flight: int, offset: int) -> float:
    """Commands per second for ``jobs`` commands of 0.5 s, ``in_flight`` at a time."""
    todo = list(range(jobs))
    lock = threading.Lock()
    errors: list[str] = []

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            r = executor.run(["sleep", "0.5"], workspace=_ws(root, offset + i), limits=LIM)
            if not r.ok:
                errors.append(r.summary())

    t = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(in_flight)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    if errors:
        raise RuntimeError(f"{len(errors)} commands failed: {errors[0]}")
    return jobs / wall


def _stats(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1000, s[min(len(s) - 1, int(len(s) * 0.9))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--poll", type=float, default=0.2, help="exec.slurm.poll_interval_s")
    ap.add_argument("--write", default=None, help="benchmarks page to update (Slurm section only)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.n, args.jobs = 1, 2
    if subprocess.run(["scontrol", "ping"], capture_output=True).returncode != 0:
        sys.exit('no Slurm cluster answers; start one: eval "$(scripts/slurm_ci.sh start)"')
    root = Path(tempfile.mkdtemp(prefix="ai-sci-bench-slurm-", dir="/tmp"))
    root.chmod(0o755)
    cfg = load_config(
        overrides=[f"exec.slurm.shared_dir={root / 'shared'}", f"exec.slurm.poll_interval_s={args.poll}"]
    )
    sub = make_executor(cfg, "subprocess")
    slurm = make_executor(cfg, "slurm")
    t0 = time.perf_counter()
    try:
        sub_med, sub_p90 = _stats(latency(sub, root / "sub", args.n))
        sl_med, sl_p90 = _stats(latency(slurm, root / "slurm", args.n))
        bare_med, bare_p90 = _stats(bare_sbatch(args.n, root))
        sub_tp = throughput(sub, root / "subtp", args.jobs, 1, 0)
        in_flight = (1, 2) if args.smoke else (1, 2, 4)
        rates = {k: throughput(slurm, root / f"tp{k}", args.jobs, k, 0) for k in in_flight}
        squeue = slurm.cli.calls["squeue"]
        sbatch = slurm.cli.calls["sbatch"]
    finally:
        slurm.close()
        sub.close()
        shutil.rmtree(root, ignore_errors=True)
    lat = {"sub": (sub_med, sub_p90), "slurm": (sl_med, sl_p90), "bare": (bare_med, bare_p90)}
    text = render(args, lat, sub_tp, rates, sbatch, squeue, time.perf_counter() - t0)
    print(text)
    if args.write:
        write_section(Path(args.write), text)


def render(args, lat, sub_tp, rates, sbatch, squeue, wall) -> str:
    sub, sl, bare = lat["sub"], lat["slurm"], lat["bare"]
    load = os.getloadavg()[0]
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        "## Slurm",
        "",
        f"`python bench/slurm.py --n {args.n} --jobs {args.jobs}` on the local single-node cluster of "
        f"`scripts/slurm_ci.sh` ({version}, {platform.machine()}, {os.cpu_count()} CPU(s), partition "
        f"oversubscribed 4x, `exec.slurm.poll_interval_s={args.poll}`, inner sandbox subprocess); "
        f"{wall:.0f} s for everything, all in the same process; load average {load:.1f} at the end "
        "(the machine is shared).",
        "",
        f"Per command (`{PY} -c pass`, {args.n} runs each after one warm-up, one at a time):",
        "",
        "| backend | median ms | p90 ms | x subprocess |",
        "|---|---|---|---|",
        f"| subprocess | {sub[0]:.0f} | {sub[1]:.0f} | 1.0 |",
        f"| slurm (job per command) | {sl[0]:.0f} | {sl[1]:.0f} | {sl[0] / sub[0]:.1f} |",
        f"| bare `sbatch --wrap true` to COMPLETED (no runner) | {bare[0]:.0f} | {bare[1]:.0f} | "
        f"{bare[0] / sub[0]:.1f} |",
        "",
        f"Overhead of a job: **{sl[0] - sub[0]:.0f} ms** per command (median difference to subprocess). "
        f"Slurm's own share (sbatch, scheduling, slurmd launching the batch step) is the bare job, "
        f"{bare[0]:.0f} ms; the rest ({sl[0] - bare[0]:.0f} ms) is the in-job runner (a Python start "
        "importing ai_scientist, the inner sandbox's set-up) and on average half a poll interval.",
        "",
        f"Throughput, {args.jobs} commands of `sleep 0.5` each:",
        "",
        "| backend | jobs in flight | commands / s | x 1 in flight |",
        "|---|---|---|---|",
        f"| subprocess | 1 | {sub_tp:.2f} | - |",
    ]
    lines += [f"| slurm | {k} | {r:.2f} | {r / rates[1]:.2f} |" for k, r in rates.items()]
    lines += [
        "",
        f"The slurm executor made {sbatch} `sbatch` calls and {squeue} `squeue` calls in total: "
        "one squeue per poll for all jobs in flight, not one per job.",
    ]
    return "\n".join(lines) + "\n"


def write_section(page: Path, section: str) -> None:
    text = page.read_text() if page.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Slurm\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _m: section + "\n", text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + section
    )
    page.write_text(text)


if __name__ == "__main__":
    main()
