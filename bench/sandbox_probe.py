"""What the sandbox probe costs a run, per backend, against one trivial command in that backend.

    python bench/sandbox_probe.py [--n 5] [--backends subprocess,bwrap,docker]

The probe (``ai_scientist/execution/sandbox_probe.py``) runs once per run, at start. For each
usable backend, interleaved round after round so a change of load hits both alike: the wall time
of ``python3 -c pass`` through the backend (the baseline: one sandboxed command) and of the whole
probe (shell script, every tool's ``--version``, the Python package listing). Prints the medians
and their ratio; docker is skipped with the reason when no daemon answers.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ai_scientist.base.config import load_config
from ai_scientist.execution import Limits, SandboxError, make_executor
from ai_scientist.execution.sandbox_probe import probe_sandbox


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name: str, root: Path, n: int) -> tuple[float, float, dict] | None:
    """(median of ``python3 -c pass``, median of the probe, the probe's facts) in backend ``name``."""
    cfg = load_config(overrides=[f"exec.backend={name}", "exec.docker_reuse_container=false"])
    try:
        ex = make_executor(cfg, name)
    except SandboxError as exc:
        print(f"{name}: skipped ({exc})")
        return None
    ws = root / name
    ws.mkdir()
    ws.chmod(0o755)
    base, probe, facts = [], [], {}

    def trivial() -> None:
        ex.run(["/usr/bin/python3", "-c", "pass"], workspace=ws, limits=Limits())

    def whole_probe() -> None:
        facts.update(probe_sandbox(ex, cfg, root / f"{name}-probe"))

    try:
        for _ in range(n):  # interleaved: a change of load hits both
            base.append(_time(trivial))
            probe.append(_time(whole_probe))
    finally:
        ex.close()
    return statistics.median(base), statistics.median(probe), facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--backends", default="subprocess,bwrap,docker")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.n, args.backends = 1, "subprocess,bwrap"
    root = Path(tempfile.mkdtemp(prefix="ai-sci-bench-probe-", dir="/tmp"))
    root.chmod(0o755)
    rows = []
    try:
        for name in args.backends.split(","):
            got = measure(name, root, args.n)
            if got is not None:
                rows.append((name, *got))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'backend':<12} {'python3 -c pass':>16} {'probe':>9} {'ratio':>7}  tools found")
    for name, b, p, facts in rows:
        tools = ", ".join(sorted(facts.get("tools") or {})) or "none"
        ok = "" if facts.get("ok") else f" (probe failed: {facts.get('error')})"
        print(f"{name:<12} {b * 1000:>13.0f} ms {p * 1000:>6.0f} ms {p / b:>6.1f}x  {tools}{ok}")


if __name__ == "__main__":
    main()
