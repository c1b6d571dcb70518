"""``ai-scientist serve``: the live page in a real headless Chromium (Debian's package), its access
token, hostile content, path traversal; steering from the page reaches the run.

The browser is driven over the DevTools protocol (testsupport/ai_scientist_testing/cdp.py). The run is a scripted run of the
bundled example going on in this process while ``ai-scientist serve`` runs as its own process:
what each check expects comes from the run's files (journal, events, prompt logs)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ai_scientist_testing.cdp import CHROMIUM, Browser
from ai_scientist_testing.scripted import ExampleResponder
from components import needs
from pipeline_support import events, journal_nodes, run_args

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.treesearch.node import node_sort_key

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
PAYLOAD = '</pre><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
NOTE = "Try a smaller L2 penalty first <i>please</i>."


class Serve:
    """``ai-scientist serve PATH`` as its own process; ``url`` is the line it printed."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ai_scientist.cli", "serve", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.url: str = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.proc.stderr.read()
        self.base, _, self.token = self.url.partition("/?token=")

    def get(self, path: str, token: str | None = "", headers: dict | None = None) -> tuple[int, str]:
        tok = self.token if token == "" else token
        sep = "&" if "?" in path else "?"
        url = self.base + path + (f"{sep}token={tok}" if tok else "")
        req = urllib.request.Request(url, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_token_host_and_traversal_are_refused(tmp_path, run_copy):
    run = run_copy(tmp_path)
    srv = Serve(run)
    try:
        assert srv.get("/", token=None)[0] == 401
        assert srv.get("/api/run/run/tree", token=None)[0] == 401
        assert srv.get("/api/run/run/tree", token="wrong")[0] == 403
        assert srv.get("/", headers={"Host": "evil.example:80"})[0] == 403  # DNS rebinding
        status, page = srv.get("/")
        assert status == 200 and "cdn" not in page.lower() and "http" not in page.replace(srv.base, "")
        tree = json.loads(srv.get("/api/run/run/tree")[1])
        assert [n["id"] for n in tree["nodes"]] == list(journal_nodes(run))
        nid = next(n for n in journal_nodes(run) if (run / "nodes" / n / "prompt_logs").is_dir())
        log = sorted((run / "nodes" / nid / "prompt_logs").glob("*.json"))[0]
        assert srv.get(f"/api/run/run/node/{nid}/prompt/{log.name}") == (200, log.read_text())
        # traversal: encoded or not, through every route that takes a name
        for path in (
            "/static/..%2F..%2Fbase%2Fconfig.py",
            "/static/%2e%2e/app.py",
            f"/api/run/run/node/{nid}/prompt/..%2F..%2F..%2Fstate.json",
            f"/api/run/run/node/{nid}/prompt/..%2Fnode.json",
            "/api/run/run/node/..%2F..%2Fetc",
            "/api/run/..%2Frun/tree",
            "/api/run/run/node/n0001%2F..%2F..%2Fstate.json",
            "/../../etc/passwd",
        ):
            status, body = srv.get(path)
            assert status in (400, 404), (path, status)
            assert '"status"' not in body and "root:" not in body
        # a steering request is checked before anything is written
        req = urllib.request.Request(
            f"{srv.base}/api/run/run/steer?token={srv.token}", data=b'{"action": "rm -rf"}', method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(req, timeout=30)
        assert bad.value.code == 400 and not (run / "steer").exists()
    finally:
        srv.close()


class LiveResponder(ExampleResponder):
    """The example's answers; n0002's execution review carries a script in its text."""

    def __call__(self, messages, schema, ctx):
        answer = super().__call__(messages, schema, ctx)
        if ctx.node_id == "n0002" and ctx.phase == "review":
            data = json.loads(answer)
            key = next(k for k, v in data.items() if isinstance(v, str) and v)
            data[key] = f"{data[key]} {PAYLOAD}"
            return json.dumps(data)
        return answer


def _wait(cond, timeout: float = 90, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _event(run: Path, kind: str) -> list[dict]:
    return [e for e in events(run) if e["type"] == kind]


@pytest.mark.slow  # a scripted run with LLM latency, the server and Chromium: ~40 s
@needs("chromium", CHROMIUM is None, "chromium not installed (apt-get install -y chromium)")
def test_live_page_steers_a_run_in_headless_chromium(tmp_path):
    run, resources = setup_run(run_args(tmp_path, "agent.num_workers=2"))
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(
            code=execute(run, resources=resources, backend=ScriptedBackend(LiveResponder(), latency_s=0.5))
        ),
        daemon=True,
    )
    thread.start()
    _wait(lambda: run.journal_path.exists(), what="the journal")
    srv = Serve(run.dir)
    profile = tmp_path / "profile"
    profile.mkdir()
    browser = Browser(profile)
    try:
        browser.open(srv.url)
        browser.wait("document.body.dataset.ready === '1'")
        browser.js("window.__born = 'same page'")  # gone if the page reloads
        first = int(browser.js("document.getElementById('tree').dataset.rendered || 0"))

        # a note typed in the page
        browser.js(f"document.getElementById('note-text').value = {json.dumps(NOTE)}")
        browser.js("document.getElementById('note-send').click()")
        (note,) = _wait(lambda: _event(run.dir, "steer"), what="the note to be applied")
        assert note["text"] == NOTE and note["source"] == "web"

        # the tree grows without a reload
        browser.wait(f"Number(document.getElementById('tree').dataset.rendered) > {first}", 60)
        assert browser.js("window.__born") == "same page"

        # pause from the page: the nodes in flight finish, nothing new starts; then resume
        browser.wait("!!document.getElementById('pause')", 30)
        browser.js("document.getElementById('pause').click()")
        _wait(lambda: _event(run.dir, "run_paused"), what="the pause")
        paused = journal_nodes(run.dir)
        assert all(n["status"] in ("good", "buggy") for n in paused.values())
        browser.wait("document.getElementById('run-status').textContent.includes('paused')", 30)
        time.sleep(1.0)
        assert journal_nodes(run.dir) == paused and thread.is_alive()
        browser.js("document.getElementById('resume').click()")
        thread.join(180)
        assert result.get("code") == 0

        # the page follows the run to its end, every node shown
        nodes = journal_nodes(run.dir)
        browser.wait(f"document.getElementById('tree').dataset.rendered === '{len(nodes)}'", 30)
        browser.wait("document.getElementById('run-status').textContent.includes('completed')", 30)
        assert browser.js("window.__born") == "same page"
        finished = [e["node_id"] for e in _event(run.dir, "node_finished")]
        assert sorted(finished) == sorted(nodes) and len(set(finished)) == len(finished)
        assert len(nodes) > len(paused)

        # the note reached the next prompts as its own layer
        later = [
            json.loads(p.read_text())
            for p in sorted(run.dir.glob("nodes/n*/prompt_logs/*_phase2_*.json"))
            if node_sort_key(p.parent.parent.name) >= node_sort_key(note["at"])
        ]
        assert later
        for rec in later:
            entry = next(e for e in rec["ledger"] if e["layer"] == "user_note")
            assert entry["action"] == "kept" and any(NOTE in str(m["content"]) for m in rec["messages"])

        # n0002's page: the model's script is text, and each prompt log is shown as the file is;
        # so is a file name the generated code could have written
        hostile_name = "<img src=x onerror=window.__pwned=3>.py"
        (run.dir / "nodes" / "n0002" / "workspace" / hostile_name).write_text("# written by the experiment\n")
        browser.js("location.hash = 'node=n0002'")
        browser.wait("document.getElementById('detail').dataset.nodeId === 'n0002'")
        # (inside the answer's JSON its quotes are escaped: the tags are compared); the node's
        # prompt logs may arrive after its page (a loaded CI machine read the page before them)
        shown = "</pre><script>window.__pwned=1</script><img src=x"
        browser.wait(
            f"[...document.querySelectorAll('#detail pre')].some(p => p.textContent.includes({shown!r}))",
            timeout=30,
        )
        texts = browser.js("[...document.querySelectorAll('#detail pre')].map(p => p.textContent)")
        assert any(shown in t for t in texts)
        assert browser.js("window.__pwned === undefined && document.scripts.length === 1")
        names = browser.js(
            "[...document.querySelectorAll('#detail details.code summary')].map(s => s.textContent)"
        )
        assert hostile_name in names
        assert browser.js("document.querySelectorAll('#detail img[src=\"x\"], #detail script').length") == 0
        logs = sorted((run.dir / "nodes" / "n0002" / "prompt_logs").glob("*.json"))
        assert browser.js("document.querySelectorAll('#detail details.call').length") == len(logs)
        for i, log in enumerate(logs):
            browser.js(f"document.querySelectorAll('#detail details.raw')[{i}].open = true")
            shown = browser.wait(
                f"(() => {{ const p = document.querySelectorAll('#detail details.raw pre')[{i}];"
                " return p.dataset.loaded ? p.textContent : null; })()"
            )
            assert shown == log.read_text(), log.name
        ARTIFACTS.mkdir(exist_ok=True)
        browser.js("document.querySelectorAll('#detail details.raw').forEach(d => d.open = false)")
        browser.js("location.hash = ''")
        browser.wait("document.getElementById('detail').dataset.view === 'overview'")
        browser.screenshot(ARTIFACTS / "serve_overview.png")
        browser.js("location.hash = 'node=n0002'")
        browser.wait("document.getElementById('detail').dataset.nodeId === 'n0002'")
        shot = browser.screenshot(ARTIFACTS / "serve.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # the same server without the token: refused in the browser too
        browser.js(f"location.href = {json.dumps(srv.base + '/')}")
        browser.wait("document.body && document.body.textContent.includes('access token required')", 30)
        assert re.search(r"ready", browser.js("JSON.stringify(document.body.dataset)") or "") is None
    finally:
        browser.close()
        srv.close()
        thread.join(60)


def test_serve_dir_lists_its_runs_and_steers_the_one_named(tmp_path, run_copy):
    first = run_copy(tmp_path / "a")
    second = Path(shutil.copytree(first, tmp_path / "runs" / "second"))
    shutil.copytree(first, tmp_path / "runs" / "first")
    (tmp_path / "runs" / "not-a-run").mkdir()
    srv = Serve(tmp_path / "runs")
    try:
        assert json.loads(srv.get("/api/runs")[1]) == {"runs": ["first", "second"], "single": False}
        assert srv.get("/api/run/not-a-run/tree")[0] == 404
        tree = json.loads(srv.get("/api/run/second/tree")[1])
        assert [n["id"] for n in tree["nodes"]] == list(journal_nodes(second))
        body = json.dumps({"action": "note", "text": "<script>x</script>"}).encode()
        req = urllib.request.Request(
            f"{srv.base}/api/run/second/steer?token={srv.token}", data=body, method="POST"
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            made = json.loads(r.read())
        (pending,) = (second / "steer" / "pending").glob("*.json")
        assert json.loads(pending.read_text()) == made and made["source"] == "web"
        assert not (tmp_path / "runs" / "first" / "steer").exists()
        overview = json.loads(srv.get("/api/run/second/overview")[1])
        assert [r["text"] for r in overview["steering"]["pending"]] == ["<script>x</script>"]
    finally:
        srv.close()
