"""Slurm backend on the local single-node cluster: per-command overhead and throughput.

    eval "$(scripts/slurm_ci.sh start)"
    python bench/slurm.py [--n 20] [--jobs 12] [--write docs/benchmarks.md] [--json FILE]

Measured in the same run, with the same inner sandbox (subprocess) and the same
command (``/usr/bin/python3 -c pass``):

- per-command latency through the subprocess backend, then through the slurm
  backend one job at a time (sbatch -> scheduled -> in-job runner -> exit file
  -> seen), interleaved with a bare ``sbatch --wrap true`` waited for to
  COMPLETED (Slurm's own floor: submitted as the backend submits, same export
  mode and environment, no runner), so both see the same controller and load,
  each kind following each kind equally often (``ORDER``);
  the ratios slurm / bare of the medians and of the means are the backend's
  per-command overhead over that floor. A third series, the bare job with
  ``--export=NONE``, shows what a login shell per job costs
  (``exec.slurm.login_env: true``: slurmd runs ``su - USER`` before the script);
- where a backend command's time goes, from its job directory: submission to
  the runner's start (Slurm: scheduling, launch), the runner (interpreter,
  inner sandbox set-up, the command, the exit file), exit file to returned;
- throughput: ``--jobs`` commands of 0.5 s each (``sleep 0.5``) submitted by 1, 2
  and 4 threads (jobs in flight), commands per second and the speed-up over 1.

``--write`` replaces only the "## Slurm" section of the benchmarks page.
"""

from __future__ import annotations

import argparse
import json
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


def slurm_once(executor, ws: Path) -> tuple[float, dict[str, float]]:
    """One command through the slurm backend: (seconds, where they went)."""
    t0, p0 = time.time(), time.perf_counter()
    r = executor.run([PY, "-c", "pass"], workspace=ws, limits=LIM)
    wall, t1 = time.perf_counter() - p0, time.time()
    if not r.ok:
        raise RuntimeError(f"slurm: {r.summary()} {r.stderr[-300:]}")
    jdir = Path(r.extra["job_dir"])
    record = json.loads((jdir / "exit.json").read_text())
    exit_at = (jdir / "exit.json").stat().st_mtime
    parts = {
        "submit": (jdir / "job_id").stat().st_mtime - t0,  # spec + job.sh written, sbatch answered
        "to_runner": record["started"] - (jdir / "job_id").stat().st_mtime,  # Slurm + interpreter start
        "runner": exit_at - record["started"],  # inner sandbox set-up, the command, exit.json
        "command": r.duration_s,
        "seen": t1 - exit_at,  # exit file written -> run() returned
    }
    return wall, parts


def bare_once(root: Path, export: str, env: dict[str, str] | None) -> float:
    """``sbatch --wrap true`` to COMPLETED, polled every 50 ms: Slurm's own share of a job."""
    t = time.perf_counter()
    job = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--export={export}",
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
        env=env,
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
    return time.perf_counter() - t


# one cycle of a de Bruijn sequence over the three kinds: every kind follows every kind (itself too)
# exactly once. Jobs run back to back, so one's wait for the controller's next scheduling pass
# depends on when the previous one ended (the pass runs once a second): with every predecessor
# equally often, that dependence weighs the same on every series
ORDER = (0, 0, 1, 0, 2, 1, 1, 2, 2)


def slurm_vs_bare(
    executor, root: Path, n: int
) -> tuple[dict[str, list[float]], list[dict[str, float]], dict[str, float]]:
    """``n`` backend commands, ``n`` bare jobs submitted as the backend submits them (export mode,
    environment) and ``n`` bare ``--export=NONE`` jobs, one at a time in the order of ``ORDER``;
    also the mean of each kind after each kind ("slurm<-bare": ms)."""
    export = "NONE" if executor.cfg.login_env else "ALL"
    env = executor.job_environ()
    slurm_once(executor, _ws(root, 0))  # warm-up: the poller thread, the file system
    bare_once(root, export, env)
    out: dict[str, list[float]] = {"slurm": [], "bare": [], "bare_login": []}
    parts = []
    kinds = list(out)
    step, prev = 0, "bare"
    after: dict[str, list[float]] = {}
    while any(len(v) < n for v in out.values()):
        which = kinds[ORDER[step % len(ORDER)]]
        step += 1
        if len(out[which]) >= n:
            continue
        if which == "bare":
            out["bare"].append(bare_once(root, export, env))
        elif which == "bare_login":
            out["bare_login"].append(bare_once(root, "NONE", env))
        else:
            wall, p = slurm_once(executor, _ws(root, 1 + len(out["slurm"])))
            out["slurm"].append(wall)
            parts.append(p)
        after.setdefault(f"{which}<-{prev}", []).append(out[which][-1])
        prev = which
    return out, parts, {k: round(statistics.fmean(v) * 1000, 1) for k, v in sorted(after.items())}


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


def _stats(samples: list[float]) -> tuple[float, float, float]:
    """(median, p90, mean) in ms."""
    s = sorted(samples)
    return (
        statistics.median(s) * 1000,
        s[min(len(s) - 1, int(len(s) * 0.9))] * 1000,
        statistics.fmean(s) * 1000,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument(
        "--poll", type=float, default=None, help="exec.slurm.poll_interval_s (default: the config's)"
    )
    ap.add_argument("--write", default=None, help="benchmarks page to update (Slurm section only)")
    ap.add_argument("--json", default=None, help="also write the figures (and every sample) to this file")
    ap.add_argument("--set", action="append", default=[], help="config override KEY=VALUE (repeatable)")
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
    sets = [f"exec.slurm.shared_dir={root / 'shared'}"]
    if args.poll is not None:
        sets.append(f"exec.slurm.poll_interval_s={args.poll}")
    sets += args.set
    cfg = load_config(overrides=sets)
    args.poll = cfg.exec.slurm.poll_interval_s
    sub = make_executor(cfg, "subprocess")
    slurm = make_executor(cfg, "slurm")
    t0 = time.perf_counter()
    try:
        sub_s = latency(sub, root / "sub", args.n)
        series, parts, after = slurm_vs_bare(slurm, root / "slurm", args.n)
        sub_tp = throughput(sub, root / "subtp", args.jobs, 1, 0)
        in_flight = (1, 2) if args.smoke else (1, 2, 4)
        rates = {k: throughput(slurm, root / f"tp{k}", args.jobs, k, 0) for k in in_flight}
        squeue = slurm.cli.calls["squeue"]
        sbatch = slurm.cli.calls["sbatch"]
    finally:
        slurm.close()
        sub.close()
        shutil.rmtree(root, ignore_errors=True)
    lat = {"sub": _stats(sub_s), **{k: _stats(v) for k, v in series.items()}}
    where = {k: statistics.median(p[k] for p in parts) * 1000 for k in parts[0]}
    args.login_env = cfg.exec.slurm.login_env
    text = render(args, lat, where, sub_tp, rates, sbatch, squeue, time.perf_counter() - t0)
    print(text)
    if args.write:
        write_section(Path(args.write), text)
    if args.json:
        figures = {
            "command": " ".join(["python", "bench/slurm.py", *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_avg_end": os.getloadavg()[0],
            "poll_interval_s": args.poll,
            "login_env": args.login_env,
            "median_ms": {k: round(v[0], 1) for k, v in lat.items()},
            "p90_ms": {k: round(v[1], 1) for k, v in lat.items()},
            "mean_ms": {k: round(v[2], 1) for k, v in lat.items()},
            "slurm_over_bare": round(lat["slurm"][0] / lat["bare"][0], 3),
            "slurm_over_bare_mean": round(lat["slurm"][2] / lat["bare"][2], 3),
            "slurm_parts_median_ms": {k: round(v, 1) for k, v in where.items()},
            "mean_ms_after": after,  # each kind after each kind: the scheduling pass's phase
            "samples_s": {"subprocess": sub_s, **series, "slurm_parts": parts},
            "throughput_per_s": {"subprocess_1": sub_tp, **{f"slurm_{k}": r for k, r in rates.items()}},
            "calls": {"sbatch": sbatch, "squeue": squeue},
        }
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


def render(args, lat, where, sub_tp, rates, sbatch, squeue, wall) -> str:
    sub, sl, bare, login = lat["sub"], lat["slurm"], lat["bare"], lat["bare_login"]
    export = "NONE" if args.login_env else "ALL"
    load = os.getloadavg()[0]
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        "## Slurm",
        "",
        f"`python bench/slurm.py --n {args.n} --jobs {args.jobs}` on the local single-node cluster of "
        f"`scripts/slurm_ci.sh` ({version}, {platform.machine()}, {os.cpu_count()} CPU(s), partition "
        f"oversubscribed 4x, `exec.slurm.poll_interval_s={args.poll:g}`, `exec.slurm.login_env="
        f"{str(args.login_env).lower()}`, inner sandbox subprocess); "
        f"{wall:.0f} s for everything, all in the same process; load average {load:.1f} at the end "
        "(the machine is shared).",
        "",
        f"Per command (`{PY} -c pass`, {args.n} runs each after one warm-up, one at a time; the slurm "
        "backend and the bare jobs interleave, each kind following each kind equally often):",
        "",
        "| backend | median ms | mean ms | p90 ms | x subprocess |",
        "|---|---|---|---|---|",
        f"| subprocess | {sub[0]:.0f} | {sub[2]:.0f} | {sub[1]:.0f} | 1.0 |",
        f"| slurm (job per command) | {sl[0]:.0f} | {sl[2]:.0f} | {sl[1]:.0f} | {sl[0] / sub[0]:.1f} |",
        f"| bare `sbatch --export={export} --wrap true` to COMPLETED (the floor: no runner) | "
        f"{bare[0]:.0f} | {bare[2]:.0f} | {bare[1]:.0f} | {bare[0] / sub[0]:.1f} |",
        f"| bare `sbatch --export=NONE --wrap true` (slurmd runs a login shell first) | "
        f"{login[0]:.0f} | {login[2]:.0f} | {login[1]:.0f} | {login[0] / sub[0]:.1f} |",
        "",
        f"A command through the backend takes **{sl[0] / bare[0]:.2f}x** the bare job's median "
        f"({sl[0]:.0f} vs {bare[0]:.0f} ms) and **{sl[2] / bare[2]:.2f}x** its mean ({sl[2]:.0f} vs "
        f"{bare[2]:.0f} ms). Where its time goes (medians): submission (spec, batch "
        f"script, `sbatch`) {where['submit']:.0f} ms; Slurm scheduling and launching it, and the "
        f"runner's interpreter start, {where['to_runner']:.0f} ms; the runner (inner sandbox set-up, "
        f"the {where['command']:.0f} ms command, `exit.json`) {where['runner']:.0f} ms; exit file to "
        f"`run()` returning {where['seen']:.0f} ms.",
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
