"""The offline tree viewer: one self-contained file, every node shown, no script injection.

Checked in headless Chromium with networking disabled; the screenshot is kept
under test-artifacts/ (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from components import needs
from test_report_support import NODES, make_run

from ai_scientist.base.fileio import atomic_write_json
from ai_scientist.cli.main import _view as cmd_view
from ai_scientist.reporting.viewer import script_json, write_view

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAYLOAD = (
    "</script><script>document.title='pwned'</script><img src=x onerror=\"document.body.dataset.pwned=1\">"
)


def _hostile_run(tmp_path: Path) -> Path:
    run = make_run(tmp_path)
    node_dir = run / "nodes" / "n0006"
    (node_dir / "workspace" / "experiment.py").write_text(
        f"# {PAYLOAD}\nKEY = 'sk-abcdefghijklmnopqrstuvwxyz123456'\n"
    )
    (node_dir / "exec").mkdir()
    atomic_write_json(node_dir / "exec" / "001_run.json", {"command": ["python", "experiment.py"], "exit_code": 0,
                      "duration_s": 1.5, "stdout": f"epoch 1 {PAYLOAD}", "stderr": ""})  # fmt: skip
    return run


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    profile.mkdir()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]  # fmt: skip
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def test_page_is_self_contained_and_escaped(tmp_path):
    run = _hostile_run(tmp_path)
    html = write_view(run, tmp_path / "view.html").read_text()
    # no external reference of any kind
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "<link" not in html and "@import" not in html
    # only the two script elements of the template: the payload never closes the data block
    assert html.count("<script") == 2 and html.count("</script>") == 2
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in html and "[REDACTED]" in html
    data = json.loads(re.search(r'id="run-data">(.*?)</script>', html, re.S).group(1))
    assert set(data["nodes"]) == {n[0] for n in NODES}
    n3 = data["nodes"]["n0003"]
    assert n3["calls"][0]["ledger"][1]["tokens_after"] == 500 and n3["plots"][0]["url"].startswith(
        "data:image/png;base64,"
    )
    assert (
        n3["calls"][0]["href"] == "run/nodes/n0003/prompt_logs/001_phase2_code.json"
    )  # relative to the page
    assert n3["memory_snapshot"]["core"] == "prefers linear warm-up" and n3["cost"]["prompt_tokens"] == 120
    assert data["stages"] == {
        "1": ["n0001", "n0002"],
        "2": ["n0003", "n0004", "n0005"],
        "3": ["n0006"],
        "4": ["n0007"],
    }


def test_script_json_cannot_close_the_element():
    text = script_json({"x": "</script><!-- \u2028"})
    assert "<" not in text and json.loads(text)["x"] == "</script><!-- \u2028"


def test_cmd_view_default_path_and_bad_dir(tmp_path, capsys):
    run = make_run(tmp_path)
    assert cmd_view(argparse.Namespace(run_dir=str(run), html=None)) == 0
    assert capsys.readouterr().out.strip() == str(run / "tree.html") and (run / "tree.html").exists()
    from ai_scientist.cli.main import UsageError

    with pytest.raises(UsageError, match="not a run directory"):
        cmd_view(argparse.Namespace(run_dir=str(tmp_path / "nope"), html=None))


@pytest.mark.slow  # two headless Chromium launches: ~10-20 s on 2 cores
@needs("chromium", CHROMIUM is None, "chromium not installed (apt-get install -y chromium)")
def test_viewer_renders_every_node_in_headless_chromium(tmp_path):
    run = _hostile_run(tmp_path)
    page = write_view(run, tmp_path / "view.html")
    url = page.as_uri() + "#n0006"
    dom = _chromium(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-rendered="7"' in html  # the script ran to the end
    for nid, *_ in NODES:
        assert f'data-node-id="{nid}"' in html
    for s in ("1", "2", "3", "4"):
        assert f'data-stage="{s}"' in html
    assert 'data-detail-id="n0006"' in html and "Layer ledger" in html
    assert 'href="run/nodes/n0006/prompt_logs/001_phase2_code.json"' in html
    assert "data-pwned" not in html and "<title>pwned" not in html
    assert "&lt;/script&gt;&lt;script&gt;document.title='pwned'" in html  # shown as text
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report_viewer.png"
    shot.unlink(missing_ok=True)
    done = _chromium(["--window-size=1300,1000", f"--screenshot={shot}", url], tmp_path)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_message_cap_shares_the_page_budget():
    from ai_scientist.reporting import viewer

    assert viewer.message_cap(10) == viewer.TEXT_CAP  # a small run inlines whole messages
    assert viewer.message_cap(1000, budget=30_000_000) == 10_000
    assert viewer.message_cap(10**7) == viewer.MIN_MESSAGE_CAP  # never below the floor


def test_large_runs_cut_inlined_prompts_and_point_to_the_log(tmp_path, monkeypatch):
    from ai_scientist.reporting import viewer

    run = make_run(tmp_path)
    log = run / "nodes" / "n0003" / "prompt_logs" / "001_phase2_code.json"
    rec = json.loads(log.read_text())
    rec["messages"] = [{"role": "system", "content": "S" * 15_000}, {"role": "user", "content": "U" * 50_000}]
    atomic_write_json(log, rec)

    def page(path: Path) -> dict:
        html = write_view(run, path).read_text()
        return json.loads(re.search(r'id="run-data">(.*?)</script>', html, re.S).group(1))

    whole = page(tmp_path / "a.html")  # a handful of calls: the default budget keeps 15,000 chars
    assert whole["nodes"]["n0003"]["calls"][0]["messages"][0]["content"] == "S" * 15_000
    assert whole["run"]["message_cap"] == viewer.TEXT_CAP

    n_calls = sum(1 for _ in run.glob("nodes/*/prompt_logs/*.json"))
    monkeypatch.setattr(viewer, "TEXT_BUDGET", 3 * n_calls * 2_000)  # as if the run were huge
    cut = page(tmp_path / "b.html")
    cap = cut["run"]["message_cap"]
    assert cap == 2_000
    for m in cut["nodes"]["n0003"]["calls"][0]["messages"]:
        head, _, marker = m["content"].partition("\n[... ")
        assert len(head) == cap and "full text is in the linked prompt log" in marker
    assert cut["nodes"]["n0003"]["calls"][0]["href"].endswith("001_phase2_code.json")
    assert len((tmp_path / "b.html").read_text()) < len((tmp_path / "a.html").read_text()) - 25_000
