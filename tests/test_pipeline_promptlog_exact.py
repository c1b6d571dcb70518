"""Every request an OpenAI-compatible endpoint received equals a prompt-log record, byte for byte;
the API key appears in no file of the run; `logs show-prompt` prints what was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import run_args

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.cli.main import main

SECRET = "sk-test-abcdefghijklmnopqrstuvwxyz0123456789"

# which scripted phase answers a request, told by the schema's properties
_PHASES = [
    ("files", "phase2"),  # a code answer, with its plan merged in or not
    ("goal_summary", "phase0"),
    ("command", "phase1"),
    ("is_bug", "review"),
    ("ideas", "ideas"),
    ("node_id", "select"),
]


def _ctx_for(body: dict) -> SimpleNamespace:
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    props = schema.get("properties", {})
    phase = next((ph for key, ph in _PHASES if key in props), "other")
    text = json.dumps(body["messages"])
    label = (
        "exec_review" if phase == "review" else ("ablate" if "ablation" in text.lower()[-3000:] else "tune")
    )
    return SimpleNamespace(node_id="?", phase=phase, label=label), schema


class FakeOpenAI:
    def __init__(self):
        self.bodies: list[bytes] = []
        self.auth: list[str] = []
        responder = ExampleResponder(buggy_nodes=())
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output quiet
                pass

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(raw)
                outer.auth.append(self.headers.get("Authorization", ""))
                body = json.loads(raw)
                ctx, schema = _ctx_for(body)
                answer = responder(body["messages"], schema, ctx)
                out = json.dumps({
                    "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_requests_equal_prompt_logs_and_key_never_written(tmp_path, monkeypatch, capsys):
    server = FakeOpenAI()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    try:
        args = run_args(
            tmp_path,
            "llm.backend=openai",
            f"llm.base_url={server.url}",
            "llm.prices={gpt-4o-mini: {input_per_mtok: 1.0, output_per_mtok: 2.0}}",
            "agent.stages.stage3_max_iters=1",
            "agent.stages.stage4_max_iters=1",
        )
        run, resources = setup_run(args)
        code = execute(run, resources=resources)
    finally:
        server.close()
    assert code == 0
    run_dir = run.dir
    records = [json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/*/prompt_logs/*.json"))]
    sent = [json.loads(b) for b in server.bodies]
    assert len(sent) == len(records) > 10
    logged = {json.dumps(r["messages"], sort_keys=True) for r in records}
    for body in sent:
        assert json.dumps(body["messages"], sort_keys=True) in logged
    # byte for byte: each message's content as sent is the content in the log, character for character
    by_key = {json.dumps(r["messages"], sort_keys=True): r for r in records}
    for body in sent:
        rec = by_key[json.dumps(body["messages"], sort_keys=True)]
        for m_sent, m_log in zip(body["messages"], rec["messages"], strict=True):
            assert m_sent["content"].encode() == m_log["content"].encode()
        assert rec["params"]["model"] == body["model"]
    assert all(a == f"Bearer {SECRET}" for a in server.auth)

    # token and cost accounting add up
    cost = json.loads((run_dir / "cost.json").read_text())
    assert cost["total"]["prompt_tokens"] == 100 * len(sent)
    assert abs(cost["total"]["usd"] - len(sent) * (100 * 1.0 + 20 * 2.0) / 1e6) < 1e-9

    # the key never reaches any file the run wrote
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), f"API key leaked into {p}"

    # show-prompt prints exactly what was sent
    rec = records[0]
    node, call = rec["call_id"].split("/")
    capsys.readouterr()
    assert main(["logs", str(run_dir), "show-prompt", node, "--call", str(int(call))]) == 0
    out = capsys.readouterr().out
    for m in rec["messages"]:
        assert m["content"] in out
