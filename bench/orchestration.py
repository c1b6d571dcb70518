"""Orchestration overhead and worker throughput of the research pipeline, with a fake LLM.

    python bench/orchestration.py [--quick] [--seed 0] [--sizes 100,2000] [--out JSON]
                                  [--only all|hetero|throughput|overhead]
                                  [--hetero-drafts 24,96] [--schedulers free,batch]

Two measurements, each with its baseline from the same run:

1. **Per-node overhead** (everything but LLM and experiment time): whole runs of
   the bundled example with a zero-latency scripted LLM at a small and a large
   node count (default 100 and 2,000), memory on and off. The LLM backend and
   the sandbox executor are wrapped in timing proxies; with one worker the run
   is sequential, so ``overhead = wall - time in backend.complete() - time in
   executor.run()`` exactly. The baseline is the small run: the ratio
   (large per-node / small per-node) is 1.0 when the total grows linearly.
2. **Throughput** with 1 vs 4 workers at a simulated 1 s LLM latency, same
   search (stage 1 only, ``num_drafts`` drafts, then seed re-runs), as nodes per
   second; the baseline is 1 worker. 4 workers run with both schedulers
   (``agent.scheduler: free``, the default, and ``batch``).
3. **Heterogeneous durations** (issues 15 and 37), measured as a user sees it: whole runs
   (stage 1 with ``--hetero-drafts`` drafts, default 24 and 96, then its seed re-runs and the
   empty stages 2-4) in which each experiment sleeps for a duration drawn from an exponential
   distribution (mean ``--hetero-mean`` = 1.5 s, from a hash of (seed, node id)) at 0.1 s LLM
   latency, with 1 and 4 workers and each scheduler of ``--schedulers``. Speed-up = wall time
   with 1 worker / wall time with 4 (the same search; the node counts are reported beside it);
   *utilisation* = (time inside the LLM backend + time inside the executor, summed over
   workers) / (wall x workers), the issue's definition; *occupancy* = the time the workers held
   a node, from the main thread building its context to the end of its worker thread / (wall x
   workers). The idle worker-seconds are split by part of the run (search, stage tail, stage
   end; ``idle_breakdown``), and the seed re-runs a run started before its stage's last node
   was in are counted (``early_seed_runs``). Each row records the load average before and
   after it. The baseline is the one-worker run of the same invocation.

The experiment is a trivial shell script (``printf`` of ``metrics.json``), so
the sandbox cost stays small; it is excluded from the overhead anyway. Node
outcomes are a deterministic mix (about a quarter of experiments fail, so the
search also debugs) drawn from ``--seed``. Results go to
``bench/results/orchestration.json`` (or ``--out``); with more than one
worker LLM and sandbox time overlap, so those runs record no overhead figure.
``--quick`` uses tiny sizes (the smoke test); ``--keep`` keeps the run directories.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.cli.commands import setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.reporting.progress import Progress
from ai_scientist.runloop.orchestrator import Orchestrator, build_services

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
RESULTS = ROOT / "bench" / "results" / "orchestration.json"
OVERHEAD_TARGET_MS = 50.0
FLAT_TARGET = 1.25  # large/small per-node ratio we still call flat (timing noise on shared cores)
SPEEDUP_TARGET = 3.6
HETERO_SPEEDUP_TARGET = 3.4  # issues 15 and 37: heterogeneous durations, 4 vs 1 workers (wall time)
HETERO_UTILISATION_TARGET = 0.85
IDEAS_PER_PROPOSAL = 8  # what one "propose ideas" answer lists (asked again when all are taken)

GOOD_SCRIPT = (
    'printf \'{"metrics": [{"name": "val_accuracy", "value": %s, '
    '"direction": "maximize", "dataset": "val"}]}\' {value} > metrics.json\n'
    "echo val_accuracy={value}\n"
)
BUGGY_SCRIPT = "echo 'Traceback (most recent call last): ZeroDivisionError: division by zero' >&2\nexit 1\n"


# ------------------------------------------------------------ fake LLM --
class TrivialResponder(ExampleResponder):
    """The example responder, but the experiment is a one-line shell script.

    Whether a node's experiment fails and what accuracy it reports are drawn
    from a hash of (seed, node id), so runs are reproducible. Idea proposals
    return ``n_ideas`` fresh ideas each time, so stages 2 and 4 run to their caps.
    """

    def __init__(self, seed: int, bug_rate: float, n_ideas: int):
        super().__init__(buggy_nodes=())
        self.seed, self.bug_rate, self.n_ideas = seed, bug_rate, n_ideas
        self._proposals = 0

    def _draw(self, node_id: str) -> float:
        h = hashlib.sha256(f"{self.seed}:{node_id}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64

    def _phase2(self, text: str, ctx: Any) -> str:
        u = self._draw(ctx.node_id)
        if u < self.bug_rate:
            script = BUGGY_SCRIPT
        else:
            script = GOOD_SCRIPT.replace("{value}", f"{0.6 + 0.35 * self._draw(ctx.node_id + 'm'):.4f}")
        return json.dumps(
            {
                "summary": f"shell experiment for {ctx.node_id}",
                "files": [{"path": "run.sh", "content": script, "encoding": "utf-8"}],
                "build": {"language": "bash", "commands": []},
                "run": {"commands": ["sh run.sh"], "expected_outputs": ["metrics.json"]},
            }
        )

    def _ideas(self, text: str, ctx: Any) -> str:
        with self._lock:
            self._proposals += 1
            k = self._proposals
        if ctx.label == "ablate":
            ideas = [f"ablation no_component_{k}_{i}" for i in range(self.n_ideas)]
        else:
            ideas = [f"lr=0.{k:03d}{i:04d} l2=0.01" for i in range(self.n_ideas)]
        return json.dumps({"ideas": ideas})


# ------------------------------------------------------- timing proxies --
class Timed:
    """Wraps an object; ``seconds`` is the total time spent in its method ``method``."""

    def __init__(self, inner: Any, method: str):
        self._inner = inner
        self._method = getattr(inner, method)
        self.seconds = 0.0
        self.calls = 0
        self._lock = threading.Lock()
        setattr(self, method, self._timed)

    def _timed(self, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._method(*args, **kwargs)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t
                self.calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TimedOrchestrator(Orchestrator):
    """Times the work on each node: ``spans`` holds (node id, start, end) in ``time.time()``,
    from the moment the main thread starts building the node's context (``_context``: its
    memory branch, resources, inherited install prefix) to the end of its worker thread
    (``_worker``: every phase, prompt building and bookkeeping included); ``node_seconds`` is
    their sum, i.e. the time the workers were busy with a node."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.spans: list[tuple[str, float, float]] = []
        self._began: dict[str, float] = {}

    @property
    def node_seconds(self) -> float:
        return sum(end - start for _, start, end in self.spans)

    def _context(self, node: Any, slot: int, extras: Any = None) -> Any:
        with _NODE_LOCK:
            self._began.setdefault(node.id, time.time())
        return super()._context(node, slot, extras)

    def _worker(self, ctx: Any, errors: list[BaseException]) -> None:
        try:
            super()._worker(ctx, errors)
        finally:
            with _NODE_LOCK:
                self.spans.append((ctx.node.id, self._began.pop(ctx.node.id), time.time()))


_NODE_LOCK = threading.Lock()


# ------------------------------------------------------------ one run --
COMMON = [
    "exec.backend=subprocess",
    "exec.timeout=60",
    "report.enabled=false",
    "search.policy=bfts",
    "agent.search.max_debug_depth=3",
]


def overhead_overrides(n: int, memory: bool, seed: int) -> list[str]:
    """Caps that make a whole 4-stage run create about ``n`` nodes in a realistic mix.

    Stage 1: n/10 drafts; stage 2: n/5 tune/debug nodes; stage 4: one planned
    list of ablations (plus debugs); stage 3 (improve/debug, patience = cap) the rest.
    """
    s1, s2, s4 = max(4, n // 10), max(2, n // 5), max(2, n // 10)
    s3 = max(2, n - s1 - s2 - IDEAS_PER_PROPOSAL - 12)  # stage 4 ~ one idea list; 4 x 2 seed re-runs
    return [
        *COMMON,
        f"agent.seed={seed}",
        "agent.num_workers=1",
        f"agent.search.num_drafts={s1}",
        "agent.search.debug_prob=0.5",
        f"agent.stages.stage1_max_iters={s1}",
        f"agent.stages.stage2_max_iters={s2}",
        f"agent.stages.stage3_max_iters={s3}",
        f"agent.stages.stage4_max_iters={s4}",
        f"agent.stages.stage2_good_nodes={s2}",
        f"agent.stages.stage3_patience={s3}",
        "agent.multi_seed_eval.num_seeds=2",
        f"memory.enabled={'true' if memory else 'false'}",
    ]


def throughput_overrides(drafts: int, workers: int, seed: int) -> list[str]:
    """Stage 1 only: ``drafts`` drafts (batches of ``workers``), then ``workers`` seed re-runs."""
    return [
        *COMMON,
        f"agent.seed={seed}",
        f"agent.num_workers={workers}",
        f"agent.search.num_drafts={drafts}",
        f"agent.stages.stage1_max_iters={drafts}",
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "agent.multi_seed_eval.num_seeds=4",
        "memory.enabled=true",
    ]


def run_once(
    workdir: Path, overrides: list[str], responder: Any, latency_s: float, name: str
) -> dict[str, Any]:
    """One whole run; times the orchestrator and the time spent in the LLM and the sandbox."""
    args = Namespace(
        config=None,
        overrides=overrides,
        idea=str(IDEA),
        resources=None,
        out=str(workdir),
        name=name,
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )
    t0 = time.perf_counter()
    run, _ = setup_run(args)
    backend = Timed(ScriptedBackend(responder, latency_s=latency_s), "complete")
    services = build_services(run, backend=backend)
    executor = Timed(services.executor, "run")
    services.executor = executor
    # keep the progress updates (they read cost.json) but not their terminal output
    services.progress = Progress(stream=open(os.devnull, "w"), live=False)  # noqa: SIM115
    setup_s = time.perf_counter() - t0
    run.save_state(status="running")
    orchestrator = TimedOrchestrator(run, services)
    t1, began = time.perf_counter(), time.time()
    try:
        code = orchestrator.run()
    finally:
        wall = time.perf_counter() - t1
        ended = time.time()
        services.close()
    nodes = [json.loads(line)["node"] for line in (run.dir / "journal.jsonl").read_text().splitlines()]
    latest = {n["id"]: n for n in nodes}
    ops: dict[str, int] = {}
    for n in latest.values():
        ops[n["operation"]] = ops.get(n["operation"], 0) + 1
    n_nodes = len(latest)
    overhead = wall - backend.seconds - executor.seconds
    return {
        "exit_code": code,
        "nodes": n_nodes,
        "good": sum(1 for n in latest.values() if n["status"] == "good"),
        "buggy": sum(1 for n in latest.values() if n["status"] == "buggy"),
        "operations": ops,
        "max_depth": max((n["depth"] for n in latest.values()), default=0),
        "setup_s": round(setup_s, 3),
        "wall_s": round(wall, 3),
        "llm_s": round(backend.seconds, 3),
        "llm_calls": backend.calls,
        "exec_s": round(executor.seconds, 3),
        "exec_calls": executor.calls,
        "overhead_s": round(overhead, 3),
        "node_s": round(orchestrator.node_seconds, 3),
        "idle_s": idle_breakdown(orchestrator.spans, run.cfg.agent.num_workers, run.events(), (began, ended)),
        "overhead_ms_per_node": round(1000 * overhead / max(n_nodes, 1), 2),
        "nodes_per_s": round(n_nodes / wall, 4) if wall > 0 else None,
        "run_dir": str(run.dir),
    }


def idle_breakdown(
    spans: list[tuple[str, float, float]], workers: int, events: list[dict], window: tuple[float, float]
) -> dict[str, float]:
    """Worker-seconds without a node, by part of the run: ``search`` (a stage still creating
    nodes: until its last ``node_selected``), ``stage_tail`` (the stage accepts no more nodes;
    its last nodes in flight are waited for), ``stage_end`` (best node, seed re-runs, summary:
    from ``stage_completed`` to the next ``stage_started``), ``outside`` (before the first stage
    and after the last)."""
    marks: list[tuple[float, str]] = []  # (time, the part that starts there)
    last_pick: dict[int, float] = {}
    for ev in events:
        if ev["type"] == "node_selected":
            last_pick[ev["stage"]] = ev["ts"]
    for ev in events:
        if ev["type"] == "stage_started":
            marks.append((ev["ts"], "search"))
            marks.append((last_pick.get(ev["stage"], ev["ts"]), "stage_tail"))
        elif ev["type"] == "stage_completed":
            marks.append((ev["ts"], "stage_end"))
    marks.sort()
    last_event = events[-1]["ts"] if events else window[1]
    # sweep over every change of the busy count or of the part, in time order
    changes = sorted([(a, 1) for _, a, _ in spans] + [(b, -1) for _, _, b in spans])
    points = sorted({*window, *(t for t, _ in marks), *(t for t, _ in changes)})
    out = {"search": 0.0, "stage_tail": 0.0, "stage_end": 0.0, "outside": 0.0}
    busy = i = m = 0
    part = "outside"
    for a, b in itertools.pairwise(points):
        while i < len(changes) and changes[i][0] <= a:
            busy += changes[i][1]
            i += 1
        while m < len(marks) and marks[m][0] <= a:
            part = marks[m][1]
            m += 1
        if a < window[0] or b > window[1]:
            continue
        where = part if marks and marks[0][0] <= a < last_event else "outside"
        out[where] += max(workers - busy, 0) * (b - a)
    return {k: round(v, 3) for k, v in out.items()}


# ------------------------------------------------------------ measurements --
def measure_overhead(workdir: Path, sizes: list[int], memory_modes: list[bool], seed: int) -> list[dict]:
    out = []
    for memory in memory_modes:
        for n in sizes:
            responder = TrivialResponder(seed, bug_rate=0.25, n_ideas=IDEAS_PER_PROPOSAL)
            name = f"overhead-{n}-mem{int(memory)}"
            print(f"  running {name} ...", flush=True)
            r = run_once(workdir, overhead_overrides(n, memory, seed), responder, 0.0, name)
            out.append({"target_nodes": n, "memory": memory, **r})
    return out


def measure_throughput(workdir: Path, drafts: int, latency_s: float, seed: int) -> list[dict]:
    out = []
    for workers, scheduler in ((1, "free"), (4, "free"), (4, "batch")):
        responder = TrivialResponder(seed, bug_rate=0.0, n_ideas=4)
        name = f"throughput-w{workers}-{scheduler}"
        print(f"  running {name} ...", flush=True)
        overrides = [*throughput_overrides(drafts, workers, seed), f"agent.scheduler={scheduler}"]
        r = run_once(workdir, overrides, responder, latency_s, name)
        if workers > 1:  # LLM and sandbox time overlap across threads: wall minus their sums means nothing
            r["overhead_s"] = r["overhead_ms_per_node"] = None
        out.append({"workers": workers, "scheduler": scheduler, "latency_s": latency_s, **r})
    return out


class HeteroResponder(TrivialResponder):
    """Every experiment works and sleeps for an exponentially distributed time (mean
    ``mean_s``) drawn from a hash of (seed, node id); seed re-runs rerun their parent's script."""

    def __init__(self, seed: int, mean_s: float):
        super().__init__(seed, bug_rate=0.0, n_ideas=4)
        self.mean_s = mean_s

    def duration(self, node_id: str) -> float:
        return -self.mean_s * math.log(1.0 - self._draw(node_id + "d"))

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        script = answer["files"][0]["content"]
        answer["files"][0]["content"] = f"sleep {self.duration(ctx.node_id):.3f}\n{script}"
        return json.dumps(answer)


def early_seed_runs(events: list[dict]) -> int:
    """Seed re-runs started while their stage still had search nodes in flight (the
    ``seeds_started`` events with ``early``; see docs/pipeline.md, "Stage ends")."""
    return sum(len(e["node_ids"]) for e in events if e["type"] == "seeds_started" and e.get("early"))


def measure_heterogeneous(
    workdir: Path, drafts: int, latency_s: float, mean_s: float, seed: int, schedulers: list[str]
) -> list[dict]:
    """1 and 4 workers with each of ``schedulers``, exponential experiment durations."""
    out = []
    for workers in (1, 4):
        for scheduler in schedulers:
            responder = HeteroResponder(seed, mean_s)
            name = f"hetero-d{drafts}-w{workers}-{scheduler}"
            print(f"  running {name} ...", flush=True)
            overrides = [*throughput_overrides(drafts, workers, seed), f"agent.scheduler={scheduler}"]
            load_before = os.getloadavg()
            r = run_once(workdir, overrides, responder, latency_s, name)
            r["loadavg_before"], r["loadavg_after"] = load_before, os.getloadavg()
            r["overhead_s"] = r["overhead_ms_per_node"] = None
            # the utilisation: time inside the LLM backend and the executor; occupancy
            # counts a worker's whole node (see TimedOrchestrator)
            r["utilisation"] = round((r["llm_s"] + r["exec_s"]) / (r["wall_s"] * workers), 3)
            r["occupancy"] = round(r["node_s"] / (r["wall_s"] * workers), 3)
            r["seed_runs"] = r["operations"].get("seed_eval", 0)
            r["early_seed_runs"] = early_seed_runs(read_events(r["run_dir"]))
            out.append(
                {
                    "drafts": drafts,
                    "workers": workers,
                    "scheduler": scheduler,
                    "latency_s": latency_s,
                    "mean_s": mean_s,
                    **r,
                }
            )
    return out


def read_events(run_dir: str) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarise_hetero(rows: list[dict]) -> dict[str, Any]:
    """Per number of drafts and scheduler: 4 vs 1 workers by wall time, utilisation, idle time."""
    by = {(r["drafts"], r["workers"], r["scheduler"]): r for r in rows}
    out: dict[str, Any] = {}
    for drafts in sorted({r["drafts"] for r in rows}):
        per: dict[str, Any] = {}
        for scheduler in sorted({r["scheduler"] for r in rows if r["drafts"] == drafts}):
            one, four = by[(drafts, 1, scheduler)], by[(drafts, 4, scheduler)]
            speedup = one["wall_s"] / four["wall_s"]
            per[scheduler] = {
                "wall_s_1_worker": one["wall_s"],
                "wall_s_4_workers": four["wall_s"],
                "nodes_1_worker": one["nodes"],
                "nodes_4_workers": four["nodes"],
                "speedup": round(speedup, 3),
                "utilisation_4_workers": four["utilisation"],
                "utilisation_1_worker": one["utilisation"],
                "occupancy_4_workers": four["occupancy"],
                "idle_s_4_workers": four["idle_s"],
                "early_seed_runs_4_workers": four["early_seed_runs"],
            }
        if "free" in per:
            f = per["free"]
            f["met"] = (
                f["speedup"] >= HETERO_SPEEDUP_TARGET
                and f["utilisation_4_workers"] >= HETERO_UTILISATION_TARGET
            )
            f["target"] = {"speedup": HETERO_SPEEDUP_TARGET, "utilisation": HETERO_UTILISATION_TARGET}
        out[f"drafts_{drafts}"] = per
    return out


def summarise(
    overhead: list[dict], throughput: list[dict], sizes: list[int], hetero: list[dict] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if overhead:
        out["per_node_overhead"] = summarise_overhead(overhead, sizes)
    if throughput:
        t1 = next(r for r in throughput if r["workers"] == 1)
        t4 = next(r for r in throughput if r["workers"] == 4 and r.get("scheduler", "free") == "free")
        speedup = t4["nodes_per_s"] / t1["nodes_per_s"]
        out["throughput"] = {
            "nodes_per_s_1_worker": t1["nodes_per_s"],
            "nodes_per_s_4_workers": t4["nodes_per_s"],
            "speedup": round(speedup, 3),
            "target": SPEEDUP_TARGET,
            "met": speedup >= SPEEDUP_TARGET,
        }
        batch = [r for r in throughput if r["workers"] == 4 and r.get("scheduler") == "batch"]
        if batch:
            out["throughput"]["speedup_batch_scheduler"] = round(
                batch[0]["nodes_per_s"] / t1["nodes_per_s"], 3
            )
    if hetero:
        out["heterogeneous"] = summarise_hetero(hetero)
    return out


def summarise_overhead(overhead: list[dict], sizes: list[int]) -> dict[str, Any]:
    small, large = min(sizes), max(sizes)
    flat = {}
    for memory in sorted({r["memory"] for r in overhead}, reverse=True):
        by = {r["target_nodes"]: r for r in overhead if r["memory"] == memory}
        a, b = by[small]["overhead_ms_per_node"], by[large]["overhead_ms_per_node"]
        ratio = b / a if a > 0 else None
        # cost of each node added between the two sizes: above the averages if the total
        # grows faster than linearly; the averages also carry the run's fixed start/end cost
        dn = by[large]["nodes"] - by[small]["nodes"]
        marginal = 1000 * (by[large]["overhead_s"] - by[small]["overhead_s"]) / dn if dn > 0 else None
        flat[f"memory_{'on' if memory else 'off'}"] = {
            "small_ms_per_node": a,
            "large_ms_per_node": b,
            "marginal_ms_per_node": round(marginal, 2) if marginal is not None else None,
            "ratio_large_over_small": round(ratio, 3) if ratio else None,
            "flat": bool(ratio is not None and ratio <= FLAT_TARGET),
            "under_target": max(a, b) < OVERHEAD_TARGET_MS,
        }
    return flat


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    summary = result["summary"]
    out: list[str] = []
    if result["overhead"]:
        rows = [["memory", "nodes", "good/buggy", "wall s", "LLM s", "exec s", "overhead s", "ms/node"]]
        for r in result["overhead"]:
            rows.append(
                [
                    "on" if r["memory"] else "off",
                    str(r["nodes"]),
                    f"{r['good']}/{r['buggy']}",
                    f"{r['wall_s']:.1f}",
                    f"{r['llm_s']:.1f}",
                    f"{r['exec_s']:.1f}",
                    f"{r['overhead_s']:.1f}",
                    f"{r['overhead_ms_per_node']:.1f}",
                ]
            )
        out += ["Per-node orchestration overhead (zero-latency fake LLM, 1 worker)", _table(rows), ""]
        for key, f in summary["per_node_overhead"].items():
            verdict = "flat" if f["flat"] else f"NOT flat (target ratio <= {FLAT_TARGET})"
            limit = "under" if f["under_target"] else "OVER"
            out.append(
                f"{key}: {f['large_ms_per_node']:.1f} / {f['small_ms_per_node']:.1f} ms per node = "
                f"{f['ratio_large_over_small']}x -> {verdict}; {limit} the {OVERHEAD_TARGET_MS:.0f} ms target; "
                f"marginal {f['marginal_ms_per_node']} ms per added node"
            )
    if result["throughput"]:
        rows = [["workers", "scheduler", "nodes", "wall s", "LLM s (sum)", "exec s (sum)", "nodes/s"]]
        for r in result["throughput"]:
            rows.append(
                [
                    str(r["workers"]),
                    r.get("scheduler", "batch"),
                    str(r["nodes"]),
                    f"{r['wall_s']:.1f}",
                    f"{r['llm_s']:.1f}",
                    f"{r['exec_s']:.1f}",
                    f"{r['nodes_per_s']:.3f}",
                ]
            )
        t = summary["throughput"]
        out += [
            "",
            f"Throughput, uniform (fake LLM latency {result['throughput'][0]['latency_s']} s per call)",
            _table(rows),
            "",
            f"speed-up 4 vs 1 workers: {t['speedup']}x (batch scheduler: {t.get('speedup_batch_scheduler')}x) -> "
            + ("target met" if t["met"] else f"TARGET MISSED (>= {SPEEDUP_TARGET}x)"),
        ]
    if result.get("heterogeneous"):
        rows = [
            [
                "drafts",
                "workers",
                "scheduler",
                "nodes",
                "early seeds",
                "wall s",
                "LLM s (sum)",
                "exec s (sum)",
                "utilisation",
                "occupancy",
                "idle: search / tail / end",
                "load",
            ]
        ]
        for r in result["heterogeneous"]:
            idle = r["idle_s"]
            rows.append(
                [
                    str(r["drafts"]),
                    str(r["workers"]),
                    r["scheduler"],
                    str(r["nodes"]),
                    str(r["early_seed_runs"]),
                    f"{r['wall_s']:.1f}",
                    f"{r['llm_s']:.1f}",
                    f"{r['exec_s']:.1f}",
                    f"{r['utilisation']:.3f}",
                    f"{r['occupancy']:.3f}",
                    f"{idle['search']:.1f} / {idle['stage_tail']:.1f} / {idle['stage_end']:.1f}",
                    f"{r['loadavg_before'][0]:.2f}",
                ]
            )
        first = result["heterogeneous"][0]
        out += [
            "",
            f"Heterogeneous durations (exponential, mean {first['mean_s']} s; LLM latency {first['latency_s']} s)",
            _table(rows),
            "",
        ]
        for key, per in summary["heterogeneous"].items():
            for scheduler, h in per.items():
                verdict = ""
                if "met" in h:
                    verdict = " -> " + (
                        "target met"
                        if h["met"]
                        else f"TARGET MISSED (>= {HETERO_SPEEDUP_TARGET}x, >= {HETERO_UTILISATION_TARGET})"
                    )
                out.append(
                    f"{key.replace('_', ' ')}, {scheduler}: 4 vs 1 workers {h['speedup']}x by wall time, "
                    f"utilisation {h['utilisation_4_workers']} (1 worker: {h['utilisation_1_worker']}), "
                    f"occupancy {h['occupancy_4_workers']}{verdict}"
                )
    return "\n".join(out)


def _save_partial(out: Path, result: dict[str, Any]) -> None:
    """Keep what is measured so far (a long run cut short still leaves its figures)."""
    out.write_text(json.dumps({**result, "partial": True}, indent=2) + "\n", encoding="utf-8")


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes (smoke test): 16/40 nodes, 0.05 s latency"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", default=None, help="node counts, comma separated (default 100,2000)")
    ap.add_argument("--memory", choices=("both", "on", "off"), default="both")
    ap.add_argument(
        "--drafts", type=int, default=None, help="search nodes of the throughput runs (default 20)"
    )
    ap.add_argument("--latency", type=float, default=None, help="fake LLM latency in s (default 1.0)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--keep", action="store_true", help="keep the run directories (printed)")
    ap.add_argument(
        "--only",
        choices=("all", "hetero", "throughput", "overhead"),
        default="all",
        help="run one measurement only (the others are left out of the summary)",
    )
    ap.add_argument(
        "--hetero-drafts", default=None, help="drafts of the heterogeneous case, comma separated (24,96)"
    )
    ap.add_argument(
        "--schedulers", default="free,batch", help="schedulers of the heterogeneous case (free,batch)"
    )
    ap.add_argument("--hetero-mean", type=float, default=1.5, help="mean experiment duration in s (1.5)")
    ap.add_argument("--hetero-latency", type=float, default=0.1, help="fake LLM latency in s (0.1)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unmeasured warm-up run")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    a = ap.parse_args(argv)
    if a.smoke:  # every measurement once, at the smallest sizes that still make a tree
        a.quick, a.no_warmup, a.memory = True, True, "off"
        a.sizes, a.drafts, a.hetero_drafts = a.sizes or "4,6", a.drafts or 1, a.hetero_drafts or "1"
        a.latency, a.hetero_latency, a.hetero_mean = 0.0, 0.0, 0.02
        a.out = os.devnull if a.out == str(RESULTS) else a.out
    a.sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else ([16, 40] if a.quick else [100, 2000])
    a.drafts = a.drafts or (8 if a.quick else 20)
    a.hetero_drafts = [int(x) for x in (a.hetero_drafts or ("8" if a.quick else "24,96")).split(",")]
    a.schedulers = [x.strip() for x in a.schedulers.split(",") if x.strip()]
    if not a.schedulers or set(a.schedulers) - {"free", "batch"}:
        ap.error(f"--schedulers: free and/or batch, got {a.schedulers}")
    if a.quick:
        a.hetero_mean = min(a.hetero_mean, 0.2)
    a.latency = a.latency if a.latency is not None else (0.05 if a.quick else 1.0)
    a.memory_modes = {"both": [True, False], "on": [True], "off": [False]}[a.memory]
    return a


def measure_all(a: argparse.Namespace, workdir: Path, out: Path, result: dict[str, Any]) -> None:
    """Warm-up, throughput, then overhead per memory mode; partial results saved after each."""
    # one-off costs (imports, BPE table, embedding model) are paid here, not by the first measured run
    if not a.no_warmup and a.only in ("all", "overhead"):
        print("warm-up run (not measured) ...", flush=True)
        responder = TrivialResponder(a.seed, 0.25, IDEAS_PER_PROPOSAL)
        run_once(workdir, overhead_overrides(12, True, a.seed), responder, 0.0, "warmup")
    if a.only in ("all", "hetero"):
        print("heterogeneous durations:", flush=True)
        for drafts in a.hetero_drafts:
            result["heterogeneous"] += measure_heterogeneous(
                workdir, drafts, a.hetero_latency, a.hetero_mean, a.seed, a.schedulers
            )
            _save_partial(out, result)
    if a.only in ("all", "throughput"):
        print("throughput:", flush=True)
        result["throughput"] = measure_throughput(workdir, a.drafts, a.latency, a.seed)
        _save_partial(out, result)
    if a.only not in ("all", "overhead"):
        return
    print("per-node overhead:", flush=True)
    for memory in a.memory_modes:
        result["overhead"] += measure_overhead(workdir, a.sizes, [memory], a.seed)
        _save_partial(out, result)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every measurement, print the tables, write the JSON; returns the result dict."""
    a = _args(argv)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "command": "python bench/orchestration.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": os.getloadavg(),
        },
        "seed": a.seed,
        "sizes": a.sizes,
        "overhead": [],
        "throughput": [],
        "heterogeneous": [],
    }
    workdir = Path(tempfile.mkdtemp(prefix="bench-orch-"))
    t0 = time.perf_counter()
    try:
        measure_all(a, workdir, out, result)
    finally:
        if a.keep:
            print(f"run directories kept under {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result["summary"] = summarise(result["overhead"], result["throughput"], a.sizes, result["heterogeneous"])
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["total_s"] = round(time.perf_counter() - t0, 1)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print()
    print(report(result))
    print(f"\nwritten {out} (total {result['total_s']} s)")
    return result


if __name__ == "__main__":
    main()
