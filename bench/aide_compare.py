"""AIDE's nodes per second, and ours, on one fake OpenAI-compatible server with a fixed latency.

    python bench/aide_compare.py --aide /tmp/aide/bin/aide [--ours [--ours-large] [--keep]]
                                 [--steps 12] [--latency 1.0] [--out bench/results/aide_compare.json]

Needs AIDE (``aideml==0.2.2``) in its own venv (``python -m venv /tmp/aide &&
/tmp/aide/bin/pip install aideml==0.2.2``); nothing of it is imported here. Starts a fake
OpenAI-compatible chat-completions server on 127.0.0.1 (stopped at the end) that sleeps
``--latency`` seconds per request and answers AIDE's two kinds of call: a plan and a trivial
working program in a fenced block (draft / improve / debug), and a ``submit_review`` tool call
(execution review). Runs ``aide`` for ``--steps`` steps with report generation off, and prints
steps, LLM calls, wall seconds and nodes per second.

``--ours`` (run this script with the project's interpreter, e.g. ``.venv/bin/python``) also runs
our pipeline, as a process of its own like AIDE, against the same server at the same latency: the
bundled example with ``bench/calls_per_node.py``'s configuration (one worker, subprocess sandbox,
node plots off — AIDE draws none), ``llm.backend=openai``. The server tells our requests by their
``response_format`` and answers them with the scripted example responder (every draft works: a
request does not say which node it is for). Our figures are counted three ways, all from the run
directory: every node / wall; nodes that call the LLM / wall; and like with like — nodes that call
the LLM / (wall - the run-level calls AIDE does not make (stage summaries, idea proposals) - the
seed re-run nodes' time (AIDE has none)). Both walls include the process start. Per node, the
seconds besides the LLM (wall - all LLM call time, over every node) are given for both. Both
sides pay a start-up of seconds, so compare at the same number of LLM-calling nodes: ours makes 9
(``--ours-large``: 14), so ``--steps 9`` (or 14). The load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROGRAM = "import random\nacc = 0.8 + random.random() / 100\nprint(f'validation accuracy: {acc:.4f}')\n"


# which scripted phase answers one of our requests, told by its schema's properties
# (as tests/test_pipeline_promptlog_exact.py's fake server)
_PHASES = [
    ("files", "phase2"),  # a code answer, with its plan merged in or not
    ("goal_summary", "phase0"),
    ("command", "phase1"),
    ("is_bug", "review"),
    ("ideas", "ideas"),
    ("node_id", "select"),
]
_RESPONDER: list[Any] = []


def _ours_answer(body: dict[str, Any]) -> str:
    from types import SimpleNamespace

    if not _RESPONDER:
        from ai_scientist_testing.scripted import ExampleResponder

        _RESPONDER.append(ExampleResponder(buggy_nodes=()))
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    props = schema.get("properties", {})
    phase = next((ph for key, ph in _PHASES if key in props), "other")
    text = json.dumps(body["messages"])
    label = (
        "exec_review" if phase == "review" else ("ablate" if "ablation" in text.lower()[-3000:] else "tune")
    )
    return str(
        _RESPONDER[0](body["messages"], schema, SimpleNamespace(node_id="?", phase=phase, label=label))
    )


class FakeOpenAI(BaseHTTPRequestHandler):
    latency_s = 1.0
    calls = 0
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # /v1/models
        self._send({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with FakeOpenAI.lock:
            FakeOpenAI.calls += 1
        time.sleep(self.latency_s)
        message: dict[str, Any]
        if body.get("response_format"):  # ours: a structured answer from the scripted example responder
            message = {"role": "assistant", "content": _ours_answer(body)}
        elif body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            args = {"is_bug": False, "summary": "ran; accuracy 0.80", "metric": 0.8, "lower_is_better": False}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        else:
            message = {
                "role": "assistant",
                "content": f"Plan: train a small model and print the validation accuracy.\n\n```python\n{PROGRAM}```\n",
            }
        self._send(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if body.get("tools") else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
            }
        )

    def _send(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def run_aide(aide: str, steps: int, latency: float, port: int) -> dict[str, Any] | None:
    FakeOpenAI.calls = 0
    with tempfile.TemporaryDirectory(prefix="aide_compare_") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        (data / "README.md").write_text("Predict y from x; report validation accuracy.\n")
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_API_KEY": "fake-key",
        }
        cmd = [
            aide,
            f"data_dir={data}",
            "goal=Predict y from x",
            "eval=validation accuracy",
            f"agent.steps={steps}",
            "agent.code.model=fake-model",
            "agent.feedback.model=fake-model",
            "generate_report=False",
            f"log_dir={tmp}/logs",
            f"workspace_dir={tmp}/ws",
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return None
    return {
        "steps": steps,
        "latency_s": latency,
        "llm_calls": FakeOpenAI.calls,
        "wall_s": round(wall, 2),
        "nodes_per_s": round(steps / wall, 4),
        "calls_per_node": round(FakeOpenAI.calls / steps, 2),
        "non_llm_s_per_node": round((wall - FakeOpenAI.calls * latency) / steps, 3),
    }


# --ours-large: about 20 nodes that call the LLM (5 drafts as AIDE's default, 6 improve, up to 4 tune,
# 5 ablate), for a comparison with AIDE's 20 steps at the same node count
LARGE = [
    "agent.search.num_drafts=5",
    "agent.stages.stage1_max_iters=5",
    "agent.stages.stage2_max_iters=6",
    "agent.stages.stage2_good_nodes=6",
    "agent.stages.stage3_max_iters=4",
    "agent.stages.stage4_max_iters=5",
]


def run_ours(
    latency: float, port: int, keep: bool = False, large: bool = False, smoke: bool = False
) -> dict[str, Any] | None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ai_scientist_testing.bench_support import SMOKE_RUN
    from calls_per_node import CONFIG, IDEA, ROOT

    FakeOpenAI.calls = 0
    with tempfile.TemporaryDirectory(prefix="ours_compare_") as tmp_root:
        tmp = tempfile.mkdtemp(prefix="ours_compare_") if keep else tmp_root
        env = {**os.environ, "OPENAI_API_KEY": "fake-key", "PYTHONPATH": str(ROOT)}
        sets = [
            *CONFIG,
            *(LARGE if large else []),
            *(SMOKE_RUN if smoke else []),
            "agent.plots.enabled=false",
            "llm.backend=openai",
            f"llm.base_url=http://127.0.0.1:{port}/v1",
        ]
        cmd = [
            sys.executable,
            "-m",
            "ai_scientist.cli",
            "run",
            "--idea",
            str(IDEA),
            "--out",
            tmp,
            "--name",
            "ours",
        ]
        for kv in sets:
            cmd += ["--set", kv]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return None
        run_dir = Path(tmp) / "ours"
        nodes: dict[str, dict[str, Any]] = {}
        for p in sorted(run_dir.glob("nodes/n*/node.json")):
            n = json.loads(p.read_text())
            nodes[n["id"]] = n

        def call_time(paths: list[Path]) -> tuple[int, float]:
            recs = [json.loads(p.read_text()) for p in paths]
            return len(recs), sum(float(r.get("latency_s") or 0.0) for r in recs)

        node_calls, node_call_s = call_time(sorted(run_dir.glob("nodes/n*/prompt_logs/*.json")))
        run_calls, run_call_s = call_time(sorted(run_dir.glob("nodes/run/prompt_logs/*.json")))
        seed = [n for n in nodes.values() if n["operation"] == "seed_eval"]
        llm_nodes = [n for n in nodes.values() if n["operation"] != "seed_eval"]
        seed_s = sum(float(n["finished_at"]) - float(n["created_at"]) for n in seed)
        fair_wall = wall - run_call_s - seed_s
        ops: dict[str, int] = {}
        for n in nodes.values():
            ops[n["operation"]] = ops.get(n["operation"], 0) + 1
    return {
        "latency_s": latency,
        "nodes": len(nodes),
        "operations": ops,
        "llm_nodes": len(llm_nodes),
        "server_calls": FakeOpenAI.calls,
        "node_calls": node_calls,
        "run_level_calls": run_calls,
        "run_level_call_s": round(run_call_s, 2),
        "seed_rerun_s": round(seed_s, 2),
        "wall_s": round(wall, 2),
        "nodes_per_s": round(len(nodes) / wall, 4),
        "llm_nodes_per_s": round(len(llm_nodes) / wall, 4),
        "like_with_like_wall_s": round(fair_wall, 2),
        "like_with_like_nodes_per_s": round(len(llm_nodes) / fair_wall, 4),
        "calls_per_llm_node": round(node_calls / max(1, len(llm_nodes)), 2),
        "non_llm_s_per_node": round((wall - (node_call_s + run_call_s)) / len(nodes), 3),
        **({"run_dir": str(run_dir)} if keep else {}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aide", help="the aide executable of AIDE's venv (left out: AIDE is not run)")
    ap.add_argument("--ours", action="store_true", help="also run our pipeline against the same server")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--out", help="write the figures here as JSON")
    ap.add_argument("--ours-large", action="store_true", help="ours with about 20 LLM-calling nodes")
    ap.add_argument("--keep", action="store_true", help="keep our run directory (its path is printed)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="ours only, a tiny run against the fake server with no latency (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.ours, args.latency = True, 0.0
    if not args.aide and not args.ours:
        ap.error("give --aide, --ours or both")
    FakeOpenAI.latency_s = args.latency
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    result: dict[str, Any] = {
        "latency_s": args.latency,
        "workers": 1,
        "ours_large": args.ours_large,
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        if args.aide:
            result["aide"] = run_aide(args.aide, args.steps, args.latency, port)
            if result["aide"] is None:
                return 1
            print(json.dumps({"aide": result["aide"]}))
        if args.ours:
            result["ours"] = run_ours(args.latency, port, args.keep, args.ours_large, args.smoke)
            if result["ours"] is None:
                return 1
            print(json.dumps({"ours": result["ours"]}))
    finally:
        server.shutdown()
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"load_before": result["load_before"], "load_after": result["load_after"]}))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
