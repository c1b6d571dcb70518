"""How much of each prompt a provider's prefix cache could serve: stable-first layout vs the old one.

    python bench/prompt_cache.py [--nodes 56] [--seed 0] [--workload example|trivial|realistic] [--no-report]
                                 [--out JSON] [--keep]

Providers cache prompt prefixes: OpenAI and compatible servers bill the cached part of a prompt at a
discount, Anthropic too, and vLLM / llama.cpp skip its prefill. What can be cached is the longest
prefix a request shares with an earlier request. This benchmark runs the bundled example with the
scripted LLM (a deterministic mix of good and failing nodes as in bench/orchestration.py, all four
stages, memory on, one worker so calls come in a fixed order, then the report: aggregated figures,
the vision model's critiques and figure review, the paper and its reviews; citations off, they
would need Semantic Scholar), twice in one process. A working node's code is the example's
experiment (``--workload example``, the default: it saves its losses, so its plots are drawn and
critiqued) or bench/orchestration.py's one-line shell script (``trivial``: no data saved, so every
node's plotting fails twice and nothing is critiqued; the workload measured before this option)
or ``realistic``: the example's experiment grown to ~20 kB as in tests/realistic_workload.py (a
program as long as a capable model writes), each draft's and each fix's program distinct from the
others' (its first line names it; a child keeps its parent's), as a real run's are — the example's
drafts are the same bytes, so there a layout can cache one node's program from another's:

* ``legacy``: the layer layout before issue 14 (memory and the resource index in the system
  message, the volatile layers between the idea and the instructions, the node's own lines at the
  head of the instructions, the full response schema in the text) — ``context.spec.use_layout``;
* ``stable_first``: today's layout (docs/context.md, "Layer order and the prefix cache").

For every request sent (each prompt-log record, in the order they were written) it finds the
longest prefix shared with any earlier request of the same run (messages concatenated as
``role\\ncontent``, an image as a placeholder naming its bytes and counted at the fixed
``IMAGE_TOKENS``; a sorted list of the earlier requests: the longest common prefix with any of
them is the one with a neighbour in sort order) and counts it with the run's token counter. The
calls of the report (made after its preflight event) are their own phases, ``report:<phase>``. Two
figures: the *ideal* share (any shared prefix is reused, as llama.cpp's KV cache and vLLM's prefix
cache do) and the *OpenAI rule* (only prompts of 1,024+ tokens, the cached part rounded down to a
multiple of 128 tokens). USD at list price (the model's ``llm.prices`` entry, else gpt-4o-mini's:
$0.15 per million input tokens, cached ones at ``--cached-ratio`` of that, OpenAI's 50 %).
Beside them, the *ceiling*: the share left once every line no earlier request of the run
contained is paid (``novel_tokens``) — no order of the same text caches a line never sent before,
so the gap between the ceiling and the ideal share is what a layout could still win, and a
ceiling below a target says that target needs other text, not another order (a line that starts
like an earlier one, ``| n0003`` after ``| n0002``, can share its first characters: the ceiling
is close, not exact). Results go to ``bench/results/prompt_cache.json``. Where each request stops sharing its prefix
is recorded too (``breaks``: the last heading before that point, per phase, with the requests and
the uncached tokens after it, most first; the report prints the top rows): the place to look when
the share falls.

The local backend's KV reuse (prefill time with and without reuse) is measured separately, by its
own section/benchmark (issue 14, item 4).
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "prompt_cache.json"
TARGET = 0.80
DEFAULT_INPUT_USD = 0.15  # gpt-4o-mini list price per million input tokens
OPENAI_MIN, OPENAI_STEP = 1024, 128
BREAK_ROWS = 12  # rows of the "where the shared prefix ends" table printed


def _orchestration() -> Any:
    spec = importlib.util.spec_from_file_location("bench_orchestration", ROOT / "bench" / "orchestration.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    assert spec and spec.loader
    spec.loader.exec_module(mod)
    return mod


_IMAGE = re.compile(r"\x00image:[0-9a-f]{16}\x00")


def _part_text(part: dict[str, Any]) -> str:
    if part.get("type") == "text":
        return str(part.get("text", ""))
    if part.get("type") == "image_url":  # the same image bytes give the same placeholder
        url = str((part.get("image_url") or {}).get("url", ""))
        return f"\x00image:{hashlib.sha256(url.encode()).hexdigest()[:16]}\x00"
    return json.dumps(part, sort_keys=True, ensure_ascii=False)


def request_text(messages: list[dict[str, Any]]) -> str:
    """The request as a cache sees it: each message's role then its content, in order (text parts
    as text, each image as a placeholder naming its bytes)."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(_part_text(p) for p in content if isinstance(p, dict))
        elif not isinstance(content, str):
            content = json.dumps(content, sort_keys=True, ensure_ascii=False)
        parts.append(f"{m.get('role')}\n{content}\n")
    return "".join(parts)


def count_tokens(counter: Any, text: str) -> int:
    """Tokens of a request text: its text with the counter, each image at ``IMAGE_TOKENS``."""
    from ai_scientist.context.tokens import IMAGE_TOKENS

    images = len(_IMAGE.findall(text))
    return counter.count(_IMAGE.sub("", text) if images else text) + images * IMAGE_TOKENS


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n  # binary search on slices: C-speed comparisons
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixIndex:
    """Earlier requests in sort order; ``longest(t)`` = longest prefix of ``t`` shared with any."""

    def __init__(self) -> None:
        self._sorted: list[str] = []

    def longest(self, text: str) -> int:
        i = bisect.bisect_left(self._sorted, text)
        best = 0
        for j in (i - 1, i):
            if 0 <= j < len(self._sorted):
                best = max(best, _lcp(text, self._sorted[j]))
        return best

    def add(self, text: str) -> None:
        bisect.insort(self._sorted, text)


def _report_start_ns(run_dir: Path) -> int | None:
    """When the report began (its first ``report_step`` event), in ns; None without a report."""
    events = run_dir / "events.jsonl"
    if not events.exists():
        return None
    for line in events.read_text(encoding="utf-8").splitlines():
        ev = json.loads(line)
        if ev.get("type") == "report_step":
            return int(float(ev["ts"]) * 1e9)
    return None


def run_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every prompt-log record of the run, in the order the requests were sent; ``_phase`` is the
    record's phase, ``report:<phase>`` for the calls of the report."""
    report_ns = _report_start_ns(run_dir)
    recs = []
    for path in (run_dir / "nodes").glob("*/prompt_logs/*.json"):
        rec = json.loads(path.read_text(encoding="utf-8"))
        rec["_mtime"] = path.stat().st_mtime_ns
        phase = str(rec.get("phase") or "?")
        rec["_phase"] = f"report:{phase}" if report_ns is not None and rec["_mtime"] >= report_ns else phase
        recs.append(rec)
    return sorted(recs, key=lambda r: (r.get("started_at") or r.get("ts") or 0, r["_mtime"]))


_HEADING = re.compile(r"(?:^|\n|\x00)(#{1,4} [^\n]*)")


def break_section(text: str, shared: int) -> str:
    """Where a request stops sharing its prefix with every earlier one: the last heading before
    that point (digits as ``#``, so one section of many nodes is one row), ``(start)`` before any
    heading; ``(whole request)`` when it is all shared."""
    if shared >= len(text):
        return "(whole request)"
    last = None
    for m in _HEADING.finditer(text, 0, shared):  # a heading the break cuts is read whole
        last = m
    if last is None:
        return "(start)"
    start = last.start(1)
    line = text[start : text.find("\n", start) if "\n" in text[start:] else len(text)]
    return re.sub(r"\d+", "#", line)[:70]


def analyse(records: list[dict[str, Any]], counter: Any) -> dict[str, Any]:
    index = PrefixIndex()
    per_phase: dict[str, dict[str, int]] = {}
    total = {
        "requests": 0,
        "prompt_tokens": 0,
        "cacheable_tokens": 0,
        "openai_cached_tokens": 0,
        "novel_tokens": 0,
    }
    seen: set[str] = set()  # every line of the requests so far
    # (phase, section) -> [requests, uncached tokens]: what breaks the shared prefix, and its cost
    breaks: dict[tuple[str, str], list[int]] = {}
    for rec in records:
        text = request_text(rec.get("messages") or [])
        shared = index.longest(text)
        index.add(text)
        tokens = count_tokens(counter, text)
        cached = count_tokens(counter, text[:shared]) if shared else 0
        openai = (cached // OPENAI_STEP) * OPENAI_STEP if tokens >= OPENAI_MIN and cached >= OPENAI_MIN else 0
        lines = text.split("\n")
        novel = [line for line in dict.fromkeys(lines) if line not in seen]
        seen.update(lines)
        novel_tokens = count_tokens(counter, "\n".join(novel)) if novel else 0
        phase = str(rec.get("_phase") or rec.get("phase") or "?")
        row = breaks.setdefault((phase, break_section(text, shared)), [0, 0])
        row[0] += 1
        row[1] += tokens - cached
        for bucket in (total, per_phase.setdefault(phase, dict.fromkeys(total, 0))):
            bucket["requests"] += 1
            bucket["prompt_tokens"] += tokens
            bucket["cacheable_tokens"] += cached
            bucket["openai_cached_tokens"] += openai
            bucket["novel_tokens"] += min(novel_tokens, tokens - cached)
    for bucket in (total, *per_phase.values()):
        p = bucket["prompt_tokens"] or 1
        bucket["cacheable_share"] = round(bucket["cacheable_tokens"] / p, 4)  # type: ignore[assignment]
        bucket["openai_share"] = round(bucket["openai_cached_tokens"] / p, 4)  # type: ignore[assignment]
        # what any order of the same text could cache at most: the lines never sent before are paid
        bucket["ceiling_share"] = round(1 - bucket["novel_tokens"] / p, 4)  # type: ignore[assignment]
    where = sorted(breaks.items(), key=lambda kv: -kv[1][1])
    return {
        "total": total,
        "per_phase": dict(sorted(per_phase.items())),
        # the uncached tokens by where the prefix broke, most first
        "breaks": [
            {"phase": ph, "section": sec, "requests": n, "uncached_tokens": u} for (ph, sec), (n, u) in where
        ],
    }


def usd(figures: dict[str, Any], input_usd: float, cached_usd: float) -> dict[str, float]:
    t = figures["total"]
    full = t["prompt_tokens"] * input_usd / 1e6
    ideal = (
        (t["prompt_tokens"] - t["cacheable_tokens"]) * input_usd + t["cacheable_tokens"] * cached_usd
    ) / 1e6
    openai = (
        (t["prompt_tokens"] - t["openai_cached_tokens"]) * input_usd + t["openai_cached_tokens"] * cached_usd
    ) / 1e6
    return {"no_cache": round(full, 6), "ideal_cache": round(ideal, 6), "openai_rule": round(openai, 6)}


def make_responder(orch: Any, workload: str, seed: int) -> Any:
    """The scripted LLM of a run: the same deterministic mix of failing nodes (a quarter) and fresh
    idea proposals either way; a working node's code is the bundled example's experiment
    (``example``: it saves the per-epoch losses its idea asks for, so the node's plotting works and
    the vision model critiques the figure) or bench/orchestration.py's one-line shell script
    (``trivial``: it saves no data, so every node's plotting fails twice and no critique is made)."""
    from ai_scientist_testing.scripted import ExampleResponder

    base = orch.TrivialResponder
    if workload == "trivial":
        return base(seed, bug_rate=0.25, n_ideas=orch.IDEAS_PER_PROPOSAL)

    class ExampleMix(base):  # type: ignore[misc, valid-type]
        def _phase2(self, text: str, ctx: Any) -> str:
            if self._draw(ctx.node_id) < self.bug_rate:
                return base._phase2(self, text, ctx)  # the failing script, as in the trivial mix
            return ExampleResponder._phase2(self, text, ctx)

    if workload == "example":
        return ExampleMix(seed, bug_rate=0.25, n_ideas=orch.IDEAS_PER_PROPOSAL)
    sys.path.insert(0, str(ROOT / "tests"))
    from realistic_workload import realistic_program

    class RealisticMix(ExampleMix):
        """A working program grown to ~20 kB (tests/realistic_workload.py), its first line naming
        the draft or fix it descends from: a real run's drafts are distinct programs (the example's
        are the same bytes, so a layout could cache one node's program from another's), and a
        child keeps its parent's line, so its diff is still its change."""

        def _phase2(self, text: str, ctx: Any) -> str:
            answer = json.loads(super()._phase2(text, ctx))
            op = _OP.search(text)
            parent = _LINEAGE.search(text)
            own = op is None or op.group(1) in ("draft", "debug") or parent is None
            line = f"# program of {ctx.node_id if own else parent.group(1)}\n"  # type: ignore[union-attr]
            for f in answer.get("files") or []:
                if f.get("path") == "experiment.py":
                    f["content"] = line + realistic_program(f["content"])
            return json.dumps(answer)

    return RealisticMix(seed, bug_rate=0.25, n_ideas=orch.IDEAS_PER_PROPOSAL)


_OP = re.compile(r"Operation:\s*(\w+)")
_LINEAGE = re.compile(r"^# program of (n\d+)$", re.M)


def measure(
    workdir: Path,
    nodes: int,
    seed: int,
    layout: str,
    cached_ratio: float,
    extra: list[str] | None = None,
    workload: str = "example",
) -> dict[str, Any]:
    from ai_scientist.context import spec
    from ai_scientist.context.tokens import counter_for
    from ai_scientist.llm.cost import CostLedger

    orch = _orchestration()
    previous = spec.use_layout(layout)
    try:
        responder = make_responder(orch, workload, seed)
        r = orch.run_once(
            workdir,
            [*orch.overhead_overrides(nodes, True, seed), *(extra or [])],
            responder,
            0.0,
            f"cache-{layout}",
        )
    finally:
        spec.use_layout(previous)
    run_dir = Path(r["run_dir"])
    from ai_scientist.base.config import load_config  # the run's own config: its model and prices

    cfg = load_config(run_dir / "config.yaml") if (run_dir / "config.yaml").exists() else None
    model = cfg.model_for("code") if cfg else "gpt-4o-mini"
    counter = counter_for(model)
    price = CostLedger(None, dict(cfg.llm.prices) if cfg else {}).price_of(model)
    input_usd = price[0] if price else DEFAULT_INPUT_USD
    # the model's configured cached price (llm.prices.<model>.cached_per_mtok) when it has one
    cached_usd = price[2] if price and len(price) > 2 and price[2] != price[0] else input_usd * cached_ratio
    figures = analyse(run_records(run_dir), counter)
    return {
        "layout": layout,
        "workload": workload,
        "nodes": r["nodes"],
        "operations": r["operations"],
        "stages": sorted({k for k in figures["per_phase"]}),
        "model": model,
        "counter": counter.name,
        "price_per_mtok": {"input": input_usd, "cached": cached_usd},
        **figures,
        "usd": usd(figures, input_usd, cached_usd),
        "run_dir": str(run_dir),
    }


def _row(result: dict[str, Any], phase: str) -> dict[str, Any]:
    """One row of the table: a phase, ``TOTAL``, or ``REPORT`` (the report's phases together)."""
    if phase == "TOTAL":
        return result["total"]
    if phase != "REPORT":
        return result["per_phase"].get(phase, {})
    rows = [v for k, v in result["per_phase"].items() if k.startswith("report:")]
    out = {k: sum(r[k] for r in rows) for k in ("requests", "prompt_tokens", "cacheable_tokens")}
    out["openai_cached_tokens"] = sum(r["openai_cached_tokens"] for r in rows)
    out["novel_tokens"] = sum(r.get("novel_tokens", 0) for r in rows)
    p = out["prompt_tokens"] or 1
    return {
        **out,
        "cacheable_share": out["cacheable_tokens"] / p,
        "openai_share": out["openai_cached_tokens"] / p,
        "ceiling_share": 1 - out["novel_tokens"] / p,
    }


def report(result: dict[str, Any]) -> str:
    out = []
    base, new = result["legacy"], result["stable_first"]
    out.append(
        f"{new['nodes']} nodes ({base['nodes']} in the baseline run), workload {new['workload']}, "
        f"model {new['model']}, counter {new['counter']}"
    )
    rows = [
        [
            "phase",
            "requests",
            "prompt tok",
            "legacy share",
            "stable-first share",
            "OpenAI-rule share",
            "ceiling",
        ]
    ]
    phases = sorted(set(base["per_phase"]) | set(new["per_phase"]))
    report_rows = ["REPORT"] if any(p.startswith("report:") for p in phases) else []
    for ph in [*phases, *report_rows, "TOTAL"]:
        b = _row(base, ph)
        n = _row(new, ph)
        rows.append(
            [
                ph,
                str(n.get("requests", 0)),
                str(n.get("prompt_tokens", 0)),
                f"{100 * b.get('cacheable_share', 0):.1f} %",
                f"{100 * n.get('cacheable_share', 0):.1f} %",
                f"{100 * n.get('openai_share', 0):.1f} %",
                f"{100 * n.get('ceiling_share', 0):.1f} %",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out += lines
    for name, r in (("legacy", base), ("stable_first", new)):
        u, p = r["usd"], r["price_per_mtok"]
        out.append(
            f"{name}: {r['total']['prompt_tokens']} prompt tokens, {r['total']['cacheable_tokens']} cacheable; "
            f"USD at ${p['input']}/M input, ${p['cached']}/M cached: no cache {u['no_cache']:.4f}, "
            f"ideal cache {u['ideal_cache']:.4f}, OpenAI rule {u['openai_rule']:.4f}"
        )
    out.append(
        "where the shared prefix ends (stable-first layout; uncached tokens, requests, phase, last heading):"
    )
    for b in new.get("breaks", [])[:BREAK_ROWS]:
        out.append(
            f"  {b['uncached_tokens']:>7}  {b['requests']:>3} x  {b['phase']:<14} after {b['section']!r}"
        )
    out.append(
        f"ceiling (lines no earlier request held are paid in any order): "
        f"{new['total']['novel_tokens']} tokens, {100 * new['total']['ceiling_share']:.1f} % cacheable at most"
    )
    share = new["total"]["cacheable_share"]
    ratio = share / base["total"]["cacheable_share"] if base["total"]["cacheable_share"] else float("inf")
    out.append(
        f"cacheable share: {100 * share:.1f} % vs {100 * base['total']['cacheable_share']:.1f} % "
        f"(x{ratio:.2f}); target >= {100 * TARGET:.0f} %: {'met' if share >= TARGET else 'NOT met'}"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=56, help="target node count of each run (default 56)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cached-ratio", type=float, default=0.5, help="cached / input price (default 0.5)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("--no-report", action="store_true", help="leave the report out (search calls only)")
    ap.add_argument(
        "--workload",
        choices=("example", "trivial", "realistic"),
        default="example",
        help="a working node's code: the bundled example's experiment (default), a one-line script, "
        "or the example grown to ~20 kB, distinct per draft (realistic)",
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.nodes, args.no_report, args.workload, args.out = 6, True, "trivial", os.devnull
    extra = [] if args.no_report else ["report.enabled=true", "report.citations.enabled=false"]
    extra += args.set
    with tempfile.TemporaryDirectory(prefix="ai-sci-cache-") as tmp:
        work = Path(tmp)
        result: dict[str, Any] = {}
        for layout in ("legacy", "stable_first"):  # the baseline in the same process, same seed
            print(f"  running {layout} ...", flush=True)
            result[layout] = measure(
                work, args.nodes, args.seed, layout, args.cached_ratio, extra, args.workload
            )
        if args.keep:
            import shutil

            keep = Path(args.out).with_suffix(".runs")
            shutil.copytree(work, keep, dirs_exist_ok=True)
            print(f"run directories kept in {keep}")
    result["target"] = TARGET
    result["met"] = result["stable_first"]["total"]["cacheable_share"] >= TARGET
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
