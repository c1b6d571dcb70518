"""A model the window table does not know is budgeted from the window its server reports (issue 28).

A relay run with ``llm.model=relay`` was budgeted from the default 8,192-token window less a
4,096-token answer: every stage summary, memory and plot critique was cut to its minimum. Now
``run`` asks the server once (``/v1/models``, as ``doctor`` does) and writes the window into the
resolved config, so ``resume`` and ``replay`` budget the same; a server that does not say gets a
warning line. Fake servers on 127.0.0.1 in the documented ``/v1/models`` shapes (vLLM's
``max_model_len``; OpenAI's, which has none).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml
from pipeline_support import run_args

from ai_scientist.cli.commands import setup_run


def _serve(models_body: dict) -> tuple[ThreadingHTTPServer, list[str]]:
    seen: list[str] = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            body = json.dumps(models_body if self.path.endswith("/models") else {}).encode()
            self.send_response(200 if self.path.endswith("/models") else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def _setup(tmp_path, monkeypatch, srv, model="my-local-model"):
    monkeypatch.setenv("AI_SCI_TEST_KEY", "k")
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    args = run_args(
        tmp_path,
        "llm.backend=openai",
        f"llm.base_url={url}",
        "llm.api_key_env=AI_SCI_TEST_KEY",
        f"llm.model={model}",
        "context.max_prompt_tokens=auto",
    )
    run, _ = setup_run(args)
    return yaml.safe_load((run.dir / "config.resolved.yaml").read_text())


def test_the_servers_window_is_written_into_the_resolved_config(tmp_path, monkeypatch, capsys):
    srv, seen = _serve({"object": "list", "data": [{"id": "my-local-model", "max_model_len": 65536}]})
    try:
        cfg = _setup(tmp_path, monkeypatch, srv)
    finally:
        srv.shutdown()
    assert seen == ["/v1/models"]
    assert cfg["context"]["model_context_window"] == 65536
    assert "65536 tokens, as the server reports (/models max_model_len)" in capsys.readouterr().err
    from ai_scientist.base.config import load_config
    from ai_scientist.context.budget import Budget

    budget = Budget.from_config(load_config(None, ["context.model_context_window=65536"]).context, model="x")
    assert budget.max_tokens == 32000  # balanced: the policy cap under the reported window


def test_a_server_that_does_not_say_gets_a_warning_and_no_window(tmp_path, monkeypatch, capsys):
    srv, seen = _serve({"object": "list", "data": [{"id": "my-local-model", "object": "model"}]})
    try:
        cfg = _setup(tmp_path, monkeypatch, srv)
    finally:
        srv.shutdown()
    assert "/v1/models" in seen
    assert cfg["context"]["model_context_window"] is None
    err = capsys.readouterr().err
    assert "context window of my-local-model unknown" in err and "set context.model_context_window" in err


def test_a_known_model_asks_no_server(tmp_path, monkeypatch):
    srv, seen = _serve({"data": []})
    try:
        cfg = _setup(tmp_path, monkeypatch, srv, model="gpt-4o-mini")
    finally:
        srv.shutdown()
    assert seen == [] and cfg["context"]["model_context_window"] is None
