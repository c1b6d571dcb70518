"""The embedded models side by side: SmolLM2-135M-Instruct (``llm.local_model: smollm2``) and Gemma 3
270M (``gemma3-270m``) on the same short prompt with a JSON schema (issue 17, item 4).

    python bench/local_models.py [--rounds 3] [--calls 3] [--threads N] [--max-tokens 160] [--out JSON]

Each round starts one fresh process per model (SmolLM2 then Gemma, so a change of machine load hits
both alike); the process resolves the file as a run does (``local_model_file``: Gemma's chunks are
joined once beforehand), reads it once so the page cache is warm, then measures

- load: seconds to construct the ``Llama`` (``load_llama``, the backend's own loader, with its chat
  format: Gemma's from ``llm/local_chat.py``) and the process RSS it added;
- per call (``--calls``), through ``LocalBackend.complete`` as in a run (``reuse_kv=False``: every
  call decodes its whole prompt; temperature 0), each streamed token timed: the prefill (seconds to
  the first token), decode tokens/s after the first token (grammar-constrained sampling included),
  the call's wall time, the finish reason, and whether the answer is valid against the schema; and
  the decode tokens/s of the same prompt without a schema (64 tokens), which shows what
  the grammar costs (llama.cpp checks every vocabulary token against it at every step: Gemma's
  vocabulary is 262,144 tokens, SmolLM2's 49,152);
- prefill tokens/s of a long real prompt: the recorded run's first call (the first node's plan and
  code in one answer; ``tests/fixtures/run_*``, found by ``testing.bench_support.recorded_run``:
  system + user as sent), one token sampled;
- the process's RSS after the calls and its peak (``ru_maxrss``).

Prints the medians per model and the ratio Gemma / SmolLM2 measured in this run, and writes
``bench/results/local_models.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "local_models.json"
MODELS = ("smollm2", "gemma3-270m")
FREE_TOKENS = 64  # the unconstrained call's length


def long_prompt() -> Path:
    """The recorded run's first prompt log (the first node's first call)."""
    from ai_scientist_testing.bench_support import recorded_run

    logs = sorted((recorded_run() / "nodes" / "n0001" / "prompt_logs").glob("[0-9][0-9][0-9]_*.json"))
    if not logs:
        raise FileNotFoundError(f"no prompt log under {recorded_run()}/nodes/n0001/prompt_logs")
    return logs[0]


MESSAGES = [
    {
        "role": "system",
        "content": "You are a careful machine-learning researcher. You answer with one JSON object.",
    },
    {
        "role": "user",
        "content": (
            "Idea: does L2 regularisation make logistic regression robust to label noise? The data are "
            "two 2-D Gaussian classes, 400 training points with 20% of the labels flipped and 400 clean "
            "validation points. Plan one experiment: give it a short title, the hypothesis, up to four "
            "steps, and the metric to report."
        ),
    },
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 80},
        "hypothesis": {"type": "string", "maxLength": 240},
        "steps": {
            "type": "array",
            "items": {"type": "string", "maxLength": 120},
            "minItems": 1,
            "maxItems": 4,
        },
        "metric": {"type": "string", "enum": ["val_accuracy", "val_loss", "train_loss"]},
    },
    "required": ["title", "hypothesis", "steps", "metric"],
}


def rss_mib() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


def measure(model: str, calls: int, threads: int, max_tokens: int, long_chars: int = 0) -> dict[str, Any]:
    """One model in this process: load, then ``calls`` schema-constrained calls from a cold KV state,
    all through ``LocalBackend.complete`` (the path of a run: chat format, grammar, token counting)."""
    import jsonschema

    from ai_scientist.llm.call import CallContext
    from ai_scientist.llm.local_backend import LocalBackend
    from ai_scientist.llm.local_models import local_model_file

    path = local_model_file(model, None)
    with path.open("rb") as f:  # warm the page cache: load time is llama's, not the disk's
        while f.read(1 << 24):
            pass
    backend = LocalBackend(str(path), n_ctx=4096, n_threads=threads, reuse_kv=False)
    before = rss_mib()
    t = time.perf_counter()
    llama, _lock = backend._llama()  # the backend's loader (load_llama), as the first call of a run
    load_s = time.perf_counter() - t
    loaded = rss_mib()
    # time every streamed token of the backend's own generation (a bench-only wrapper on this object)
    stamps: list[float] = []
    generate = llama.create_chat_completion

    def timed(**kwargs: Any) -> Any:
        for chunk in generate(**kwargs):
            if chunk["choices"][0]["delta"].get("content"):
                stamps.append(time.perf_counter())
            yield chunk

    llama.create_chat_completion = timed

    def call(tokens: int, schema: dict[str, Any] | None, messages: list[Any] = MESSAGES) -> dict[str, Any]:
        stamps.clear()
        t0 = time.perf_counter()
        reply = backend.complete(
            messages,
            model=model,
            temperature=0.0,
            max_tokens=tokens,
            schema=schema,
            timeout=600,
            ctx=CallContext(),
        )
        wall = time.perf_counter() - t0
        n = len(stamps)
        return {
            "reply": reply,
            "prefill_s": round(stamps[0] - t0, 4) if stamps else None,  # prompt decode + first sample
            "decode_tok_s": round((n - 1) / (stamps[-1] - stamps[0]), 2) if n > 1 else None,
            "wall_s": round(wall, 4),
        }

    runs = []
    for _ in range(calls):
        # reuse_kv=False: each call decodes its whole prompt
        constrained = call(max_tokens, SCHEMA)
        free = call(FREE_TOKENS, None)  # the same prompt, no grammar: what the grammar costs
        reply = constrained["reply"]
        try:
            jsonschema.validate(json.loads(reply.text), SCHEMA)
            valid = True
        except (ValueError, jsonschema.ValidationError):
            valid = False
        runs.append(
            {
                "prompt_tokens": reply.usage.prompt_tokens,
                "prefill_s": constrained["prefill_s"],
                "completion_tokens": reply.usage.completion_tokens,
                "decode_tok_s": constrained["decode_tok_s"],
                "wall_s": constrained["wall_s"],
                "free_completion_tokens": free["reply"].usage.completion_tokens,
                "free_prefill_s": free["prefill_s"],
                "free_decode_tok_s": free["decode_tok_s"],
                "finish_reason": reply.finish_reason,
                "schema_valid": valid,
                "answer": reply.text,
            }
        )
    # a long real prompt (the recorded run's first planning call): prefill only
    recorded = json.loads(long_prompt().read_text(encoding="utf-8"))["messages"]
    if long_chars:  # --smoke: the same messages, each cut short
        recorded = [{**m, "content": m["content"][:long_chars]} for m in recorded]
    long = call(1, None, recorded)
    long_tokens = long["reply"].usage.prompt_tokens
    return {
        "long_prompt_tokens": long_tokens,
        "long_prefill_s": long["prefill_s"],
        "long_prefill_tok_s": round(long_tokens / long["prefill_s"], 2) if long["prefill_s"] else None,
        "model": model,
        "file": path.name,
        "file_mib": round(path.stat().st_size / 2**20, 1),
        "load_s": round(load_s, 4),
        "rss_before_mib": round(before, 1),
        "rss_loaded_mib": round(loaded, 1),
        "rss_load_added_mib": round(loaded - before, 1),
        "rss_after_calls_mib": round(rss_mib(), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "calls": runs,
    }


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 3) if vals else None


def summary(results: list[dict[str, Any]], models: tuple[str, ...] = MODELS) -> dict[str, Any]:
    """Medians per model over every round (and every call of every round)."""
    out: dict[str, Any] = {}
    for model in models:
        mine = [r for r in results if r["model"] == model]
        calls = [c for r in mine for c in r["calls"]]
        out[model] = {
            "load_s": _median([r["load_s"] for r in mine]),
            "rss_load_added_mib": _median([r["rss_load_added_mib"] for r in mine]),
            "peak_rss_mib": _median([r["peak_rss_mib"] for r in mine]),
            "prompt_tokens": _median([c["prompt_tokens"] for c in calls]),
            "prefill_s": _median([c["prefill_s"] for c in calls]),
            "completion_tokens": _median([c["completion_tokens"] for c in calls]),
            "decode_tok_s": _median([c["decode_tok_s"] for c in calls]),
            "free_decode_tok_s": _median([c["free_decode_tok_s"] for c in calls]),
            "wall_s": _median([c["wall_s"] for c in calls]),
            "long_prompt_tokens": _median([r["long_prompt_tokens"] for r in mine]),
            "long_prefill_tok_s": _median([r["long_prefill_tok_s"] for r in mine]),
            "schema_valid": f"{sum(c['schema_valid'] for c in calls)}/{len(calls)}",
            "finish_stop": f"{sum(c['finish_reason'] == 'stop' for c in calls)}/{len(calls)}",
        }
    if set(MODELS) - set(models):
        return out
    a, b = out["gemma3-270m"], out["smollm2"]
    out["ratio_gemma_over_smollm2"] = {
        k: round(a[k] / b[k], 2)
        for k in (
            "load_s",
            "rss_load_added_mib",
            "peak_rss_mib",
            "prefill_s",
            "decode_tok_s",
            "free_decode_tok_s",
            "wall_s",
            "long_prefill_tok_s",
        )
        if a[k] and b[k]
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--one", choices=MODELS, help=argparse.SUPPRESS)  # the child process
    ap.add_argument(
        "--long-chars", type=int, default=0, help=argparse.SUPPRESS
    )  # the child: cut the long prompt
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="SmolLM2 only (Gemma is an optional extra), one round of one short call; writes no results file",
    )
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.calls, args.threads, args.max_tokens, args.long_chars)))
        return
    models = MODELS
    if args.smoke:
        models, args.rounds, args.calls, args.max_tokens, args.out = ("smollm2",), 1, 1, 8, Path(os.devnull)
        args.long_chars, args.threads = 300, 1  # one thread: llama.cpp's barriers stall on a busy machine
    from ai_scientist.llm.local_models import local_model_file

    for model in models:  # join Gemma's chunks before anything is timed; fail early if missing
        local_model_file(model, None)
    results = []
    load_at_start = os.getloadavg()
    for r in range(args.rounds):
        for model in models:
            cmd = [sys.executable, __file__, "--one", model, "--calls", str(args.calls)]
            cmd += ["--threads", str(args.threads), "--max-tokens", str(args.max_tokens)]
            cmd += ["--long-chars", str(args.long_chars)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["round"] = r + 1
            results.append(res)
            c = res["calls"][-1]
            print(
                f"round {r + 1} {model:12s} load {res['load_s']:.2f} s, +{res['rss_load_added_mib']:.0f} MiB, "
                f"peak {res['peak_rss_mib']:.0f} MiB; prefill {c['prefill_s']:.2f} s ({c['prompt_tokens']} tok), "
                f"decode {c['decode_tok_s']} tok/s x {c['completion_tokens']}, {c['finish_reason']}, "
                f"valid {c['schema_valid']}",
                flush=True,
            )
    summ = summary(results, models)
    for model in models:
        print(f"median {model:12s} {json.dumps(summ[model])}")
    if "ratio_gemma_over_smollm2" in summ:
        print(f"ratio gemma3-270m / smollm2: {json.dumps(summ['ratio_gemma_over_smollm2'])}")
    load = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                    "loadavg_at_start": load_at_start,
                    "loadavg_at_end": load,
                },
                "args": {k: v for k, v in vars(args).items() if k not in ("out", "one")},
                "messages": MESSAGES,
                "schema": SCHEMA,
                "summary": summ,
                "runs": results,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"written {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
