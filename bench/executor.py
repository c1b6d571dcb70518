"""Cost of one experiment per sandbox backend against a bare ``/usr/bin/python3`` start.

    python bench/executor.py [--n 30] [--variety-n 5] [--ballast-mb 0] [--write docs/benchmarks.md]

Every figure is measured in the same run, interleaved (bare, then each backend, round after
round), so a change of load on the machine hits the baseline and the backends alike:

1. **Trivial command**: ``python3 -c pass`` bare (plain ``subprocess.run``) and through each
   usable backend: median and p90 wall time, ratio to bare, and the CPU time one command costs
   (the orchestrator's own plus its reaped children's: supervision, sandbox set-up, the
   interpreter; not measurable for docker, whose processes are the daemon's); then the same
   command in a node whose install prefix holds 3,000 files (what a node's later commands pay
   for the ownership of its workspace and prefix). The subprocess and bwrap backends are
   measured twice: their commands forked by the fork server (the default) and by this process
   itself (``exec.fork_server: false``), whose fork copies this process's page tables:
   ``--ballast-mb N`` first grows this process by N MB, as a long run or a loaded local model
   grows the orchestrator.
2. **Realistic variety**: commands that sleep or compute for 0.05 s, 0.5 s and 2 s, bare and
   through each backend: the supervision overhead (backend median minus bare median) stays
   flat when the command runs longer (no polling that grows with the run time).

Docker (a fresh container per command, and one reused container) is measured when a daemon
answers, and skipped with the reason otherwise. ``--write`` replaces only the
"## Execution" section of the benchmarks page.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ai_scientist.base.config import load_config
from ai_scientist.execution import Limits, SandboxError, forkserver, make_executor

PY = "/usr/bin/python3"
TRIVIAL = [PY, "-c", "pass"]
DURATIONS = (0.05, 0.5, 2.0)
SLEEP = "import time; time.sleep({d})"
COMPUTE = "import time\nt = time.process_time() + {d}\nwhile time.process_time() < t: pass"
PREFIX_DIRS, PREFIX_FILES = 100, 30
VARIANTS = [
    ("subprocess", "subprocess", {}),
    ("bwrap", "bwrap", {}),
    ("subprocess, forked in-process", "subprocess", {"exec.fork_server": "false"}),
    ("bwrap, forked in-process", "bwrap", {"exec.fork_server": "false"}),
    ("docker, fresh container", "docker", {"exec.docker_reuse_container": "false"}),
    ("docker, reused container", "docker", {"exec.docker_reuse_container": "true"}),
]


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    """This process's CPU time and its reaped children's, plus the fork server's and the
    children it reaped (the commands it forks are its children, not ours)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    server = forkserver.shared()
    if server is not None:
        with open(f"/proc/{server.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
    return total


class Runner:
    """One way to run a command (bare or a backend): wall and CPU time of each run."""

    def __init__(self, label: str, executor=None, cpu_visible: bool = True):
        self.label, self.executor, self.cpu_visible = label, executor, cpu_visible
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def run(self, key: str, argv: list[str], ws: Path, prefix: Path | None = None) -> None:
        t, c = time.perf_counter(), _cpu()
        if self.executor is None:
            subprocess.run(argv, check=True, cwd=ws)
        else:
            r = self.executor.run(argv, workspace=ws, limits=Limits(timeout_s=60), install_dir=prefix)
            if not r.ok:
                raise RuntimeError(f"{self.label}: {r.summary()} {r.stderr[-300:]}")
        self.wall.setdefault(key, []).append(time.perf_counter() - t)
        self.cpu.setdefault(key, []).append(_cpu() - c)


def _med(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _p90(samples: list[float]) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * 0.9))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="trivial commands per backend")
    ap.add_argument("--variety-n", type=int, default=5, help="runs of each variety command (0: skip)")
    ap.add_argument(
        "--ballast-mb",
        type=int,
        default=0,
        help="grow this process by N MB of touched memory first (an orchestrator holding a model, a large tree)",
    )
    ap.add_argument("--write", default=None, help="benchmarks page to update (Execution section only)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.n, args.variety_n = 1, 0
    ballast = bytearray(os.urandom(1024)) * (args.ballast_mb * 1024)  # touched: really resident
    top = Path(tempfile.mkdtemp(prefix="ai-sci-bench-", dir="/tmp"))
    top.chmod(0o755)
    ws, prefix = top / "workspace", top / "env"  # as nodes/<id>/workspace and nodes/<id>/env
    ws.mkdir()
    # the node's install prefix as a pip install leaves it: 3,000 files
    for i in range(PREFIX_DIRS):
        (prefix / f"pkg{i}").mkdir(parents=True)
        for j in range(PREFIX_FILES):
            (prefix / f"pkg{i}" / f"m{j}.py").write_text("x = 1\n")
    runners, notes = [Runner("bare `python3 -c pass`")], []
    for label, backend, sets in VARIANTS:
        cfg = load_config(overrides=[f"{k}={v}" for k, v in sets.items()])
        try:
            ex = make_executor(cfg, backend)
            ex.run(TRIVIAL, workspace=ws, limits=Limits(timeout_s=60))  # warm-up (image, container)
        except SandboxError as exc:
            notes.append(f"{label}: not measured ({str(exc)[:160]})")
            continue
        runners.append(Runner(label, ex, cpu_visible=backend != "docker"))
    load_before = os.getloadavg()[0]
    try:
        for _ in range(args.n):
            for r in runners:
                r.run("trivial", TRIVIAL, ws)
                if r.executor is not None:
                    r.run("prefix", TRIVIAL, ws, prefix)
        for d in DURATIONS if args.variety_n else ():
            for kind, code in (("sleep", SLEEP), ("compute", COMPUTE)):
                for _ in range(args.variety_n):
                    for r in runners:
                        r.run(f"{kind} {d:g} s", [PY, "-c", code.format(d=d)], ws)
    finally:
        for r in runners:
            if r.executor is not None:
                r.executor.close()
        shutil.rmtree(top, ignore_errors=True)
    rss = _rss_mb()
    del ballast
    text = render(runners, notes, args, (load_before, os.getloadavg()[0]), rss)
    print(text)
    if args.write:
        write_section(Path(args.write), text)


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def render(runners: list[Runner], notes: list[str], args, load: tuple[float, float], rss: float) -> str:
    bare = runners[0]
    base = _med(bare.wall["trivial"])
    lines = [
        "## Execution",
        "",
        f"`python bench/executor.py --n {args.n} --variety-n {args.variety_n}"
        f"{f' --ballast-mb {args.ballast_mb}' if args.ballast_mb else ''}` on {platform.machine()}, "
        f"{os.cpu_count()} CPU(s), kernel {platform.release()}, load average {load[0]:.1f} before and "
        f"{load[1]:.1f} after; every figure from the same run, bare and backends interleaved round "
        f"after round. Trivial command: `{PY} -c pass`, {args.n} runs each after one warm-up; "
        "x bare = backend median / bare median; CPU = the orchestrator's CPU time plus its reaped "
        "children's and the fork server's (with the children it reaped), per command (docker's "
        'processes are the daemon\'s: not visible). "Forked in-process" rows: `exec.fork_server: '
        f"false`, the orchestrator (this process, {rss:.0f} MB resident) forks each command itself. The "
        f"install-prefix rows run the same command in a node whose prefix holds {PREFIX_DIRS * PREFIX_FILES:,} "
        "files (the ownership of the workspace and prefix is a node's set-up), x bare against the same bare median.",
        "",
        "| how | median ms | p90 ms | x bare | CPU ms |",
        "|---|---|---|---|---|",
    ]
    for key, suffix in (("trivial", ""), ("prefix", ", node with a 3,000-file install prefix")):
        for r in runners:
            if key not in r.wall:
                continue
            w, c = r.wall[key], r.cpu[key]
            cpu = f"{_med(c):.1f}" if r.cpu_visible else "n/a"
            lines.append(
                f"| {r.label}{suffix} | {_med(w):.1f} | {_p90(w):.1f} | {_med(w) / base:.2f} | {cpu} |"
            )
    keys = [k for k in bare.wall if k != "trivial"]
    if keys:
        lines += [
            "",
            f"Realistic variety: commands that sleep or compute (busy loop on CPU time) for the given "
            f"time, {args.variety_n} runs each; overhead = backend median - bare median of the same "
            "command, in ms (x = ratio of the medians).",
            "",
            "| command | bare ms | " + " | ".join(f"{r.label} overhead" for r in runners[1:]) + " |",
            "|---|---|" + "---|" * (len(runners) - 1),
        ]
        for k in keys:
            b = _med(bare.wall[k])
            cells = [f"{_med(r.wall[k]) - b:+.1f} (x{_med(r.wall[k]) / b:.2f})" for r in runners[1:]]
            lines.append(f"| {k} | {b:.1f} | " + " | ".join(cells) + " |")
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
