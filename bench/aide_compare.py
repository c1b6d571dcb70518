"""AIDE's nodes per second on a fake OpenAI-compatible server with a fixed latency.

    python bench/aide_compare.py --aide /tmp/aide/bin/aide [--steps 12] [--latency 1.0]

Needs AIDE (``aideml==0.2.2``) in its own venv (``python -m venv /tmp/aide &&
/tmp/aide/bin/pip install aideml==0.2.2``); nothing of it is imported here. Starts a fake
OpenAI-compatible chat-completions server on 127.0.0.1 (stopped at the end) that sleeps
``--latency`` seconds per request and answers AIDE's two kinds of call: a plan and a trivial
working program in a fenced block (draft / improve / debug), and a ``submit_review`` tool call
(execution review). Runs ``aide`` for ``--steps`` steps with report generation off, and prints
steps, LLM calls, wall seconds and nodes per second — the figure to compare with
``bench/calls_per_node.py`` (our pipeline at the same latency, one worker).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROGRAM = "import random\nacc = 0.8 + random.random() / 100\nprint(f'validation accuracy: {acc:.4f}')\n"


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
        if body.get("tools"):
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aide", required=True, help="the aide executable of AIDE's venv")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--latency", type=float, default=1.0)
    args = ap.parse_args(argv)
    FakeOpenAI.latency_s = args.latency
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
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
                args.aide,
                f"data_dir={data}",
                "goal=Predict y from x",
                "eval=validation accuracy",
                f"agent.steps={args.steps}",
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
                return 1
    finally:
        server.shutdown()
    result = {
        "steps": args.steps,
        "latency_s": args.latency,
        "llm_calls": FakeOpenAI.calls,
        "wall_s": round(wall, 2),
        "nodes_per_s": round(args.steps / wall, 4),
        "calls_per_node": round(FakeOpenAI.calls / args.steps, 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
