"""Start-up overhead of each sandbox backend against a bare ``/usr/bin/python3 -c pass``.

    python bench/executor.py [--n 20] [--write docs/benchmarks.md]

Every figure is measured in the same run: the bare interpreter start (plain
``subprocess.run``), then ``python3 -c pass`` through each usable backend
(median and p90 wall time, ratio to bare), and for Docker a fresh container
per command versus one reused container (``exec``). ``--write`` replaces only
the "## Execution" section of the benchmarks page.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ai_scientist.base.config import load_config
from ai_scientist.execution import Limits, SandboxError, make_executor

PY = "/usr/bin/python3"


def _stats(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1000, s[min(len(s) - 1, int(len(s) * 0.9))] * 1000


def bare(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        out.append(time.perf_counter() - t)
    return out


def through(executor, ws: Path, n: int) -> list[float]:
    lim = Limits(timeout_s=60)
    executor.run([PY, "-c", "pass"], workspace=ws, limits=lim)  # warm-up (image cache, reused container)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = executor.run([PY, "-c", "pass"], workspace=ws, limits=lim)
        out.append(time.perf_counter() - t)
        if not r.ok:
            raise RuntimeError(f"{executor.name}: {r.summary()} {r.stderr[-300:]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--write", default=None, help="benchmarks page to update (Execution section only)")
    args = ap.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="ai-sci-bench-", dir="/tmp"))
    ws.chmod(0o755)
    rows, notes = [], []
    base_med, base_p90 = _stats(bare(args.n))
    rows.append(("bare `python3 -c pass`", base_med, base_p90, 1.0))
    variants = [
        ("subprocess", "subprocess", {}),
        ("bwrap", "bwrap", {}),
        ("docker, fresh container", "docker", {"exec.docker_reuse_container": "false"}),
        ("docker, reused container", "docker", {"exec.docker_reuse_container": "true"}),
    ]
    for label, backend, sets in variants:
        cfg = load_config(overrides=[f"{k}={v}" for k, v in sets.items()])
        try:
            ex = make_executor(cfg, backend)
        except SandboxError as exc:
            notes.append(f"{label}: not measured ({str(exc)[:120]})")
            continue
        try:
            med, p90 = _stats(through(ex, ws, args.n))
        finally:
            ex.close()
        rows.append((label, med, p90, med / base_med))
    shutil.rmtree(ws, ignore_errors=True)
    text = render(rows, notes, args.n)
    print(text)
    if args.write:
        write_section(Path(args.write), text)


def render(rows, notes, n: int) -> str:
    lines = [
        "## Execution",
        "",
        f"`python bench/executor.py --n {n}` on {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"kernel {platform.release()}; one `{PY} -c pass` per command, {n} runs each after one warm-up, "
        "all in the same process and run. Overhead = backend median / bare median. "
        "The docker figures include the SDK's HTTP round trips (create / start / wait / remove, or "
        "exec create / start / inspect plus the `kill -9 -1` sweep for a reused container).",
        "",
        "| how | median ms | p90 ms | x bare |",
        "|---|---|---|---|",
    ]
    lines += [f"| {label} | {med:.1f} | {p90:.1f} | {ratio:.1f} |" for label, med, p90, ratio in rows]
    if notes:
        lines += [""] + [f"- {n_}" for n_ in notes]
    return "\n".join(lines) + "\n"


def write_section(page: Path, section: str) -> None:
    text = page.read_text() if page.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Execution\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _m: section + "\n", text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + section
    )
    page.write_text(text)


if __name__ == "__main__":
    main()
