"""What a schema's ``maxLength`` bounds cost on llama-cpp-python's OpenAI server (the
``json_object_schema`` rung of the structured-output ladder).

    python bench/llm_server.py [--n 3] [--max-tokens 48]

Starts ``python -m llama_cpp.server`` with the shipped SmolLM2 GGUF on 127.0.0.1 (stopped by pid
at the end) and sends the same short plan request, temperature 0, in three forms, alternating:
no ``response_format`` (baseline), ``json_object`` with the plan schema as the run logs it
(``maxLength`` 20..800), and with every ``maxLength`` left out. ``negotiation.grammar_form`` keeps
bounds up to 1000 because this shows they cost nothing measurable (a 60,000 bound, by contrast,
kills the server). Prints median seconds per request and per generated token, and
the ratio of each form to the baseline, all measured in this run.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

from openai import OpenAI

from ai_scientist.llm.local_backend import default_local_model_path
from ai_scientist.phases.schemas import PLAN_SCHEMA

MESSAGES = [
    {"role": "system", "content": "You plan small machine-learning experiments. Answer in JSON."},
    {"role": "user", "content": "Plan an experiment on label noise in logistic regression (numpy only)."},
]


def _no_max_length(schema: object) -> object:
    if isinstance(schema, list):
        return [_no_max_length(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: _no_max_length(v) for k, v in schema.items() if k != "maxLength"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.n, args.max_tokens = 1, 4
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_local_model_path()),
           "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench", max_retries=0, timeout=900)
        deadline = time.monotonic() + 120
        while True:
            try:
                client.models.list()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit("llama_cpp.server did not start") from None
                time.sleep(0.5)
        forms = {
            "no response_format": None,
            "json_object + schema as logged": {"type": "json_object", "schema": PLAN_SCHEMA},
            "json_object + no maxLength": {"type": "json_object", "schema": _no_max_length(PLAN_SCHEMA)},
        }
        times: dict[str, list[float]] = {k: [] for k in forms}
        per_token: dict[str, list[float]] = {k: [] for k in forms}
        client.chat.completions.create(model="smollm2", messages=MESSAGES, max_tokens=4)  # warm-up
        for _ in range(args.n):
            for name, fmt in forms.items():
                extra = {"response_format": fmt} if fmt else {}
                t = time.perf_counter()
                resp = client.chat.completions.create(
                    model="smollm2", messages=MESSAGES, max_tokens=args.max_tokens, temperature=0.0, **extra
                )
                dt = time.perf_counter() - t
                times[name].append(dt)
                per_token[name].append(dt / max(1, resp.usage.completion_tokens))
        base = statistics.median(per_token["no response_format"])
        print(
            f"llama-cpp-python server, SmolLM2-135M, n={args.n}, max_tokens={args.max_tokens}, load {os.getloadavg()[0]:.1f}"
        )
        for name in forms:
            med, tok = statistics.median(times[name]), statistics.median(per_token[name])
            print(
                f"{name:32s} {med:7.2f} s/request {tok * 1000:8.1f} ms/token  x{tok / base:5.2f} vs baseline"
            )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
