"""A real OpenAI-compatible server that no one here wrote: llama-cpp-python's own server
(``python -m llama_cpp.server``, the ``server`` extra) running the shipped SmolLM2 GGUF on
127.0.0.1, behind a small recording proxy that keeps every request's bytes.

It answers ``response_format: json_schema`` with HTTP 500 ("Input should be 'text' or
'json_object'"). In ``auto`` mode the run must recognise that as a refusal (not an outage),
step down to ``json_object`` with a ``schema`` (which this server turns into a grammar), and
finish; ``doctor`` must report the same mode.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from components import llama_missing, needs
from pipeline_support import FAST, IDEA, ONE_REAL_NODE
from waiting import load_scaled

from ai_scientist.llm.negotiation import NEGOTIATION_FILE, grammar_form
from ai_scientist.llm.structured import AnswerError, parse_answer, validate_answer


def _server_missing() -> str | None:
    why = llama_missing()
    if why is None:
        try:
            import llama_cpp.server.app  # noqa: F401 - fastapi, uvicorn, ...: the server extra
        except ImportError as exc:
            why = f"the server extra is missing ({exc}; pip install -e '.[server]')"
    return why


MISSING = _server_missing()
pytestmark = needs("llama", MISSING is not None, MISSING or "")

KEY = "sk-real-server-0123456789abcdefSECRET"
MODEL = "smollm2"
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RecordingProxy:
    """Forwards every request to ``upstream`` and keeps (method, path, body bytes, auth)."""

    def __init__(self, upstream_port: int):
        self.seen: list[tuple[str, str, bytes, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append((self.command, self.path, body, self.headers.get("Authorization", "")))
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=1800)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = _forward  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self) -> list[dict]:
        return [json.loads(b) for m, p, b, _ in self.seen if m == "POST" and p.endswith("/chat/completions")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory):
    from ai_scientist.llm.local_backend import default_local_model_path

    gguf = default_local_model_path()
    assert gguf is not None  # else the module's needs marker skipped it
    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    # one thread: llama.cpp's thread barriers stall when the cores are shared with other jobs; a
    # fixed seed: the server's default draws one at random, so whether a 135M model's grammar-bound
    # answer ends before max_tokens (which the run test counts) varied from run to run (a CI dry
    # run found none that did)
    cmd = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "1",
        "--seed", "0", "--api_key", KEY,
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + load_scaled(120)
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        proxy = RecordingProxy(port)
        yield proxy
        proxy.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: only the server we started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "OPENAI_API_KEY": KEY, **env}
    full_env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=900,
    )


SETTINGS = [
    "llm.backend=openai",
    f"llm.model={MODEL}",
    "llm.structured_output=auto",
    "llm.timeout_s=900",  # generous: a loaded CI machine is slow, and a timed-out request still
    # occupies this single-slot server
]


@pytest.mark.slow
def test_doctor_reports_the_negotiated_mode(llama_server: RecordingProxy) -> None:
    sets = [x for s in [*SETTINGS, f"llm.base_url={llama_server.url}"] for x in ("--set", s)]
    done = _cli(["doctor", "--json", *sets])
    report = json.loads(done.stdout)
    rows = {r["name"]: r for r in report["llm"]}
    assert rows["llm endpoint"]["status"] == "reachable" and MODEL in rows["llm endpoint"]["detail"]
    structured = rows["structured output"]
    assert structured["ok"] and structured["status"] == "json_object_schema", structured
    assert "refused json_schema (HTTP 500)" in structured["detail"]
    assert rows["images"]["status"] in ("accepted", "refused")
    assert rows["context window"]["status"]  # reported or "unknown", never absent
    assert KEY not in done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the CLI run's own limit is 900 s
def test_a_run_through_the_real_server_in_auto_mode(llama_server: RecordingProxy, tmp_path: Path) -> None:
    before = len(llama_server.posts())
    overrides = [
        *FAST,
        *SETTINGS,
        f"llm.base_url={llama_server.url}",
        *ONE_REAL_NODE,
    ]
    sets = [x for s in overrides for x in ("--set", s)]
    done = _cli(["run", "--idea", str(IDEA), "--out", str(tmp_path), "--name", "real", *sets])
    assert done.returncode in (0, 3), done.stderr[-3000:]
    run_dir = tmp_path / "real"
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed"

    records = [json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/*/prompt_logs/*.json"))]
    sent = llama_server.posts()[before:]
    assert len(sent) == len(records) > 1

    # negotiated once: json_schema refused with a 500 (not retried), then json_object + schema
    negotiation = json.loads((run_dir / NEGOTIATION_FILE).read_text())
    (entry,) = negotiation["endpoints"].values()
    assert entry["mode"] == "json_object_schema" and entry["confirmed"]
    assert [(r["mode"], r["status"]) for r in entry["rejected"]] == [("json_schema", 500)]
    refused = [r for r in records if (r.get("error") or "").startswith("StructuredOutputUnsupported")]
    assert len(refused) == 1 and refused[0]["params"]["structured"] == "json_schema"
    assert not any((r.get("error") or "").startswith("ServerError") for r in records)
    structured = [r for r in records if r["params"].get("structured") and not r.get("error")]
    assert structured and all(r["params"]["structured"] == "json_object_schema" for r in structured)

    # every request equals its prompt log, byte for byte, and is sent in the logged mode
    for body, rec in zip(sent, records, strict=True):
        assert len(body["messages"]) == len(rec["messages"])
        for m_sent, m_log in zip(body["messages"], rec["messages"], strict=True):
            assert m_sent["role"] == m_log["role"]
            assert m_sent["content"].encode() == m_log["content"].encode()
        assert body["model"] == rec["params"]["model"] == MODEL
        assert body["max_tokens"] == rec["params"]["max_tokens"]
        fmt = body.get("response_format")
        if rec["params"]["structured"] == "json_object_schema":
            # the grammar form of the logged schema (bounds above 1000 left out; the client checks them)
            assert fmt == {"type": "json_object", "schema": grammar_form(rec["params"]["schema"])}
        elif rec["params"]["structured"] == "json_schema":
            assert fmt["type"] == "json_schema"
        else:
            assert fmt is None

    # answers constrained by the server's grammar are schema-valid (unless cut at max_tokens)
    valid = 0
    for rec in structured:
        if rec["response"].get("finish_reason") == "length":
            continue
        try:
            validate_answer(parse_answer(rec["response"]["context"]), rec["params"]["schema"])
            valid += 1
        except AnswerError as exc:
            pytest.fail(f"{rec['call_id']}: a grammar-constrained answer does not match its schema: {exc}")
    assert valid >= 1
    assert (records[0]["phase"], records[0]["label"]) == (
        "phase2",
        "code+plan",
    )  # a draft plans in its code answer

    # usage as the server reported it, and counted in cost.json
    answered = [r for r in records if r.get("response")]
    assert all(r["usage"]["estimated"] is False and r["usage"]["prompt_tokens"] > 0 for r in answered)
    cost = json.loads((run_dir / "cost.json").read_text())
    assert cost["total"]["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in answered)

    # the key went to the server on every request and into no file of the run
    assert all(auth == f"Bearer {KEY}" for _, _, _, auth in llama_server.seen)
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"API key leaked into {path}"

    # quiet terminal: library records went to run.log, none reached the output
    out = done.stdout + done.stderr
    assert not [line for line in out.splitlines() if line.startswith("INFO") or "HTTP Request:" in line]
    assert "HTTP Request: POST" in (run_dir / "run.log").read_text()
