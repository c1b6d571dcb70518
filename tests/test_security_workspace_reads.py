"""Generated code writes the workspace; the orchestrator reads it afterwards. Links it planted
(to ``/proc/self/environ``, another run's journal, ``/dev/zero``) and FIFOs must not make the
orchestrator read, copy or show anything outside the workspace, nor hang it.
(The same attack through a real run and the HTML viewer: tests/test_security_pipeline.py.)"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import load_scaled

from ai_scientist.base.fileio import read_file_inside, regular_file_inside
from ai_scientist.phases.experiment import MAX_METRICS_BYTES, read_metrics
from ai_scientist.reporting.manifest import _node_entry


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "workspace"
    ws.mkdir()
    (tmp_path / "outside.json").write_text('{"secret": "canary-outside"}')
    (ws / "inside.json").write_text('{"val_accuracy": 0.9}')
    (ws / "sub").mkdir()
    os.symlink(ws / "inside.json", ws / "link_inside.json")
    os.symlink(tmp_path / "outside.json", ws / "link_out.json")
    os.symlink("/proc/self/environ", ws / "environ.json")
    os.symlink("/dev/zero", ws / "zero.json")
    os.mkfifo(ws / "fifo.json")
    return ws


def test_only_regular_files_really_inside_count(ws):
    assert regular_file_inside(ws, ws / "inside.json")
    assert regular_file_inside(ws, ws / "link_inside.json")  # a link that stays inside is fine
    for name in ("link_out.json", "environ.json", "zero.json", "fifo.json", "sub", "missing.json"):
        assert not regular_file_inside(ws, ws / name), name


def test_read_file_inside_is_bounded(ws):
    assert read_file_inside(ws, ws / "inside.json", 100) == b'{"val_accuracy": 0.9}'
    with pytest.raises(ValueError, match="larger than 5 bytes"):
        read_file_inside(ws, ws / "inside.json", 5)
    with pytest.raises(ValueError, match="not a regular file inside the workspace"):
        read_file_inside(ws, ws / "environ.json", 100)


def _read_metrics_with(ws: Path, target: str | None, data: bytes | None = None):
    metrics = ws / "metrics.json"
    if target == "fifo":
        os.mkfifo(metrics)
    elif target is not None:
        os.symlink(target, metrics)
    else:
        metrics.write_bytes(data or b"")
    result: list = []
    t = threading.Thread(target=lambda: result.append(read_metrics(SimpleNamespace(workspace=ws), [])))
    t.daemon = True
    t.start()
    t.join(load_scaled(20))
    assert result, "read_metrics hung (a FIFO or device was opened)"
    metrics.unlink()
    return result[0]


@pytest.mark.parametrize("target", ["/proc/self/environ", "/dev/zero", "fifo", "outside"])
def test_metrics_link_or_fifo_is_refused_without_hanging(ws, target, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef0123456789abcdef")
    target = str(ws.parent / "outside.json") if target == "outside" else target
    metrics, why = _read_metrics_with(ws, target)
    assert metrics == [] and "not a regular file inside the workspace" in why
    assert "sk-test" not in why and "canary" not in why


def test_metrics_file_is_size_capped(ws):
    metrics, why = _read_metrics_with(ws, None, b" " * (MAX_METRICS_BYTES + 1))
    assert metrics == [] and f"larger than {MAX_METRICS_BYTES} bytes" in why
    metrics, why = _read_metrics_with(ws, None, b'{"val_accuracy": 0.9}')
    assert why == "metrics.json" and metrics  # the ordinary case still works


def test_report_manifest_copies_no_linked_file(ws, tmp_path):
    node_dir = ws.parent
    view = SimpleNamespace(node_dir=lambda nid: node_dir, metrics=lambda nid: {})
    dest = tmp_path / "report"
    entry = _node_entry(view, {"id": "n0001"}, "best", dest)
    copied = sorted(Path(f["path"]).name for f in entry["files"])
    assert copied == ["inside.json", "link_inside.json"]  # a link that stays inside is an ordinary file
    assert "canary-outside" not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
