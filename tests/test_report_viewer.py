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
from pipeline_support import journal_nodes

from ai_scientist.base.fileio import atomic_write_json
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.main import _view as cmd_view
from ai_scientist.reporting.viewer import script_json, write_view

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAYLOAD = (
    "</script><script>document.title='pwned'</script><img src=x onerror=\"document.body.dataset.pwned=1\">"
)


def _shown_node(run: Path) -> str:
    """A node of the run with figures and a memory snapshot in its prompt logs: the most to show."""
    for nd in sorted(run.glob("nodes/n*")):
        logs = sorted((nd / "prompt_logs").glob("*.json"))
        if list(nd.glob("plots/*.png")) and any(
            json.loads(p.read_text()).get("memory_snapshot") for p in logs
        ):
            return nd.name
    raise AssertionError(f"no node of {run} has both figures and a memory snapshot")


def _hostile_run(tmp_path: Path, run_copy) -> Path:
    """The pipeline's run, with what it cannot write itself: a payload and a key in one node's
    code and in its first run's output."""
    run = run_copy(tmp_path)
    node_dir = run / "nodes" / _shown_node(run)
    (node_dir / "workspace" / "experiment.py").write_text(
        f"# {PAYLOAD}\nKEY = 'sk-abcdefghijklmnopqrstuvwxyz123456'\n"
    )
    first = sorted((node_dir / "exec").glob("*.json"))[0]
    rec = json.loads(first.read_text())
    atomic_write_json(first, {**rec, "stdout": f"epoch 1 {PAYLOAD}"})
    return run


def _stages(run: Path) -> dict[str, list[str]]:
    by: dict[str, list[str]] = {}
    for nid, node in sorted(journal_nodes(run).items()):
        by.setdefault(str(node["stage"]), []).append(nid)
    return by


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    profile.mkdir()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]  # fmt: skip
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def test_page_is_self_contained_and_escaped(tmp_path, run_copy):
    run = _hostile_run(tmp_path, run_copy)
    html = write_view(run, tmp_path / "view.html").read_text()
    # no external reference of any kind
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "<link" not in html and "@import" not in html
    # only the two script elements of the template: the payload never closes the data block
    assert html.count("<script") == 2 and html.count("</script>") == 2
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in html and "[REDACTED]" in html
    data = json.loads(re.search(r'id="run-data">(.*?)</script>', html, re.S).group(1))
    assert set(data["nodes"]) == set(journal_nodes(run))
    nid = _shown_node(run)
    shown = data["nodes"][nid]
    logs = sorted((run / "nodes" / nid / "prompt_logs").glob("*.json"))
    records = [json.loads(p.read_text()) for p in logs]
    assert shown["calls"][0]["ledger"] == records[0]["ledger"] and records[0]["ledger"]
    assert shown["plots"][0]["url"].startswith("data:image/png;base64,")
    # relative to the page, to the log's rendering when the pipeline wrote one
    rendered = logs[0].with_suffix(".md")
    assert (
        shown["calls"][0]["href"]
        == (rendered if rendered.exists() else logs[0]).relative_to(tmp_path).as_posix()
    )
    assert shown["memory_snapshot"] == next(
        r["memory_snapshot"] for r in reversed(records) if r.get("memory_snapshot")
    )
    assert shown["cost"]["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in records) > 0
    assert data["stages"] == _stages(run)


def test_script_json_cannot_close_the_element():
    text = script_json({"x": "</script><!-- \u2028"})
    assert "<" not in text and json.loads(text)["x"] == "</script><!-- \u2028"


def test_cmd_view_default_path_and_bad_dir(tmp_path, capsys, run_copy):
    run = run_copy(tmp_path)
    assert cmd_view(argparse.Namespace(run_dir=str(run), html=None)) == 0
    assert capsys.readouterr().out.strip() == str(run / "tree.html") and (run / "tree.html").exists()
    from ai_scientist.cli.main import UsageError

    with pytest.raises(UsageError, match="not a run directory"):
        cmd_view(argparse.Namespace(run_dir=str(tmp_path / "nope"), html=None))


@pytest.mark.slow  # two headless Chromium launches: ~10-20 s on 2 cores
@needs("chromium", CHROMIUM is None, "chromium not installed (apt-get install -y chromium)")
def test_viewer_renders_every_node_in_headless_chromium(tmp_path, run_copy):
    run = _hostile_run(tmp_path, run_copy)
    nid = _shown_node(run)
    page = write_view(run, tmp_path / "view.html")
    url = page.as_uri() + f"#{nid}"
    dom = _chromium(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    nodes = journal_nodes(run)
    assert f'data-rendered="{len(nodes)}"' in html  # the script ran to the end
    for n in nodes:
        assert f'data-node-id="{n}"' in html
    for s in _stages(run):
        assert f'data-stage="{s}"' in html
    assert f'data-detail-id="{nid}"' in html and "Layer ledger" in html
    first = sorted((run / "nodes" / nid / "prompt_logs").glob("*.json"))[0]
    href = first.with_suffix(".md") if first.with_suffix(".md").exists() else first
    assert f'href="{href.relative_to(tmp_path).as_posix()}"' in html
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


def test_large_runs_cut_inlined_prompts_and_point_to_the_log(tmp_path, monkeypatch, run_copy):
    from ai_scientist.reporting import viewer

    run = run_copy(tmp_path)
    log = sorted(run.glob("nodes/n*/prompt_logs/*.json"))[0]  # its node's first call
    nid = log.parent.parent.name
    rec = json.loads(log.read_text())
    rec["messages"] = [{"role": "system", "content": "S" * 15_000}, {"role": "user", "content": "U" * 50_000}]
    atomic_write_json(log, rec)

    def page(path: Path) -> dict:
        html = write_view(run, path).read_text()
        return json.loads(re.search(r'id="run-data">(.*?)</script>', html, re.S).group(1))

    # the page shows the calls of the tree's nodes (not the run-level ones)
    n_calls = sum(len(RunPaths(run).node(n).prompt_log_files()) for n in journal_nodes(run))
    assert viewer.message_cap(n_calls) >= 15_000  # a small run: the default budget keeps them whole
    whole = page(tmp_path / "a.html")
    assert whole["nodes"][nid]["calls"][0]["messages"][0]["content"] == "S" * 15_000
    assert whole["run"]["message_cap"] == viewer.TEXT_CAP

    monkeypatch.setattr(viewer, "TEXT_BUDGET", 3 * n_calls * 2_000)  # as if the run were huge
    cut = page(tmp_path / "b.html")
    cap = cut["run"]["message_cap"]
    assert cap == 2_000
    for m in cut["nodes"][nid]["calls"][0]["messages"]:
        head, _, marker = m["content"].partition("\n[... ")
        assert len(head) == cap and "full text is in the linked prompt log" in marker
    linked = log.with_suffix(".md") if log.with_suffix(".md").exists() else log
    assert cut["nodes"][nid]["calls"][0]["href"].endswith(linked.name)
    assert len((tmp_path / "b.html").read_text()) < len((tmp_path / "a.html").read_text()) - 25_000
