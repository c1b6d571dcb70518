"""``ai-scientist serve`` at 2,000 nodes: page load, event latency, and the run's own overhead with
a page open vs closed.

    python bench/serve.py [--nodes 2000] [--repeats 5] [--runs 3] [--out JSON] [--smoke]

1. **Page load**: a run directory of ``--nodes`` nodes (a real scripted run of the bundled example
   whose journal and events are extended with synthetic nodes: ids, parents, stages, statuses and
   metrics as a search writes them), served by ``ai-scientist serve`` in its own process, opened in
   headless Chromium: the time from navigation to every node rendered (``performance.now()`` when
   the page's start-up ends), the tree's JSON (server time, bytes), and the time to show a node's
   page after a click. Medians over ``--repeats`` page loads.
2. **Event latency**: with the page open and the run quiet for a second, one node record appended
   to the journal; the time until its row is in the page (a MutationObserver stamps it), over
   ``--repeats`` appends. (While a run is busy the page refreshes at most every 0.5 s: up to that
   much more.)
3. **Run overhead**: the same small scripted run (zero LLM latency, subprocess sandbox) timed with
   no server, and with the server running and the page open on it; alternated ``--runs`` times
   each. The baseline is the run with the page closed, in the same invocation: the ratio
   (open / closed, medians) is 1.0 when watching costs the run nothing.

Results go to ``bench/results/serve.json`` (or ``--out``); ``--smoke`` (tests/test_bench_smoke.py)
uses 60 nodes, one repeat and one run each, and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from argparse import Namespace
from pathlib import Path
from typing import Any

from ai_scientist_testing.cdp import CHROMIUM, Browser
from ai_scientist_testing.scripted import ExampleResponder

from ai_scientist.base.fileio import append_jsonl, atomic_write_json, read_jsonl
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.treesearch.node import format_node_id

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "serve.json"
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
RUN = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=2",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=2",
    "agent.stages.stage2_good_nodes=2",
    "agent.search.num_drafts=2",
    "agent.multi_seed_eval.num_seeds=2",
    "exec.backend=subprocess",
    "memory.embedding.backend=none",
    "report.enabled=false",
]


def _setup(out: Path, name: str) -> tuple[Any, Any]:
    """A new run of the bundled example (not started): (Run, resources)."""
    args = Namespace(config=None, overrides=list(RUN), idea=str(IDEA), resources=None, out=str(out),
                     name=name, from_phase=None, run_dir=None, stop_after=None)  # fmt: skip
    return setup_run(args)


def _execute(run: Any, resources: Any) -> float:
    """Run it with the scripted LLM (no latency); wall seconds."""
    t0 = time.perf_counter()
    code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder()))
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"the scripted run {run.dir} ended with exit {code}")
    return wall


def _node(template: dict[str, Any], number: int, rng: random.Random, stage: int) -> dict[str, Any]:
    nid = format_node_id(number)
    parent = format_node_id(rng.randint(max(1, number - 40), number - 1)) if number > 1 else None
    good = rng.random() < 0.7
    value = round(0.6 + 0.3 * rng.random(), 4)
    return {
        **template,
        "id": nid,
        "parent_id": parent,
        "stage": stage,
        "operation": rng.choice(["improve", "debug", "tune", "ablate", "seed_eval"]),
        "status": "good" if good else "buggy",
        "metric": {**(template.get("metric") or {}), "value": value} if good else None,
        "metrics": [],
        "error": None if good else "run command 1 failed (exit 1)",
        "summary": f"synthetic node {nid}",
        "depth": 1,
    }


def grow(run: Path, nodes: int, seed: int = 0) -> list[dict[str, Any]]:
    """Extend ``run``'s journal (and events) to ``nodes`` nodes; returns the journal's nodes."""
    paths = RunPaths(run)
    recs = list(read_jsonl(paths.journal))
    latest: dict[str, dict[str, Any]] = {}
    for rec in recs:
        latest[rec["node"]["id"]] = rec["node"]
    template = next(n for n in latest.values() if n.get("status") == "good" and n.get("metric"))
    rng = random.Random(seed)
    seq = max(r.get("seq", 0) for r in recs)
    lines, ev = [], []
    for number in range(len(latest) + 1, nodes + 1):
        node = _node(template, number, rng, stage=1 + (number * 4) // (nodes + 1))
        for rtype in ("node_created", "node_updated"):
            seq += 1
            lines.append(json.dumps({"seq": seq, "ts": time.time(), "type": rtype, "node": node}))
        ev.append(json.dumps({"ts": time.time(), "type": "node_finished", "node_id": node["id"],
                              "stage": node["stage"], "status": node["status"]}))  # fmt: skip
        latest[node["id"]] = node
    with paths.journal.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    with paths.events.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(ev) + "\n")
    state = json.loads(paths.state.read_text())
    atomic_write_json(paths.state, {**state, "status": "running", "current_stage": 4})
    return list(latest.values())


class Server:
    def __init__(self, path: Path):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "ai_scientist.cli", "serve", str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
        assert self.proc.stdout is not None
        self.url: str = self.proc.stdout.readline().strip()
        self.base, _, self.token = self.url.partition("/?token=")

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"{self.base}{path}?token={self.token}", timeout=60) as r:
            return r.read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


WATCH = """(() => { window.__seen = {}; new MutationObserver(ms => { for (const m of ms) for (const n of m.addedNodes)
  if (n.dataset && n.dataset.nodeId) window.__seen[n.dataset.nodeId] = Date.now(); })
  .observe(document.getElementById('tree'), {childList: true, subtree: true}); return true; })()"""


def page_figures(run: Path, nodes: int, repeats: int, tmp: Path) -> dict[str, Any]:
    srv = Server(run)
    out: dict[str, Any] = {"nodes": nodes}
    try:
        api = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            body = srv.get(f"/api/run/{run.name}/tree")
            api.append(time.perf_counter() - t0)
        out["tree_json_bytes"] = len(body)
        out["tree_json_s"] = statistics.median(api)
        if CHROMIUM is None:
            out["browser"] = "chromium not installed: page figures not measured"
            return out
        loads, nodepage, latency = [], [], []
        for i in range(repeats):
            profile = tmp / f"profile{i}"
            profile.mkdir()
            b = Browser(profile)
            try:
                b.open(srv.url)
                # (each repeat before this one appended a node: see _one_event)
                b.wait(f"document.getElementById('tree').dataset.rendered === '{nodes + i}'", 120, every=0.02)
                b.wait("document.body.dataset.ready === '1'", 60, every=0.02)
                loads.append(int(b.js("document.body.dataset.readyMs")) / 1000)
                t0 = time.perf_counter()
                b.js("location.hash = 'node=n0002'")
                b.wait("document.getElementById('detail').dataset.nodeId === 'n0002'", 60, every=0.01)
                nodepage.append(time.perf_counter() - t0)
                b.js(WATCH)
                latency.append(_one_event(run, b, nodes + i + 1))
            finally:
                b.close()
        out["page_load_s"] = statistics.median(loads)
        out["page_load_all_s"] = loads
        out["node_page_s"] = statistics.median(nodepage)
        out["event_latency_s"] = statistics.median(latency)
        out["event_latency_max_s"] = max(latency)
    finally:
        srv.close()
    return out


def _one_event(run: Path, b: Browser, number: int) -> float:
    """Append node ``number`` to the journal; seconds until its row is in the page."""
    paths = RunPaths(run)
    template = next(iter(read_jsonl(paths.journal)))["node"]
    node = {**template, "id": format_node_id(number), "status": "good", "stage": 4}
    time.sleep(1.0)  # a quiet second first: a busy run's page refreshes at most every 0.5 s (app.js)
    t0 = time.time()
    append_jsonl(paths.journal, {"seq": 10**9 + number, "ts": t0, "type": "node_created", "node": node})
    seen = b.wait(f"window.__seen && window.__seen['{node['id']}']", 60, every=0.02)
    return float(seen) / 1000 - t0


def overhead(runs: int, tmp: Path) -> dict[str, Any]:
    """Wall time of the same scripted run with the page closed and open, alternated."""
    closed, opened = [], []
    for i in range(runs):
        closed.append(_execute(*_setup(tmp / "closed", f"c{i}")))
        run, resources = _setup(tmp / "open", f"o{i}")
        srv = Server(run.dir)
        b = None
        if CHROMIUM is not None:
            profile = tmp / f"oprofile{i}"
            profile.mkdir()
            b = Browser(profile)
            b.open(srv.url)
            b.wait("document.body.dataset.ready === '1'", 60)
        try:
            opened.append(_execute(run, resources))
            if b is not None:  # the page followed the run to its end
                n = len({r["node"]["id"] for r in read_jsonl(RunPaths(run.dir).journal)})
                b.wait(f"document.getElementById('tree').dataset.rendered === '{n}'", 60)
        finally:
            if b is not None:
                b.close()
            srv.close()
    return {
        "runs": runs,
        "closed_s": closed,
        "open_s": opened,
        "closed_median_s": statistics.median(closed),
        "open_median_s": statistics.median(opened),
        "ratio_open_vs_closed": statistics.median(opened) / statistics.median(closed),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--smoke", action="store_true", help="tiny sizes (tests/test_bench_smoke.py); no results file"
    )
    a = ap.parse_args(argv)
    if a.smoke:
        a.nodes, a.repeats, a.runs = 60, 1, 1
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp_s:
        tmp = Path(tmp_s)
        run, resources = _setup(tmp / "template", "big")
        _execute(run, resources)
        template = run.dir
        grow(template, a.nodes)
        page = page_figures(template, a.nodes, a.repeats, tmp)
        cost = overhead(a.runs, tmp)
        shutil.rmtree(template, ignore_errors=True)
    result = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "chromium": CHROMIUM,
        "page": page,
        "run_overhead": cost,
    }
    print(json.dumps(result, indent=1))
    if not a.smoke:
        out = Path(a.out) if a.out else RESULTS
        atomic_write_json(out, result)
        print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
