"""Smoke test of bench/search_index.py: tiny sizes, checks the JSON it writes (no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_search_index", ROOT / "bench" / "search_index.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_writes_every_figure(tmp_path, capsys):
    out = tmp_path / "search_index.json"
    _bench().main(["--quick", "--sizes", "30,90", "--out", str(out)])
    data = json.loads(out.read_text())
    small, large = data["rows"]
    assert (small["nodes"], large["nodes"]) == (30, 90)  # every node of the history was written
    kinds = ("write_us", "index_write_us", "read_us", "tail_write_us", "tail_index_write_us", "tail_read_us")
    for row in (small, large):
        assert all(row[k] > 0 for k in kinds)
    s = data["summary"]
    own = [r["tail_index_write_us"] + r["tail_read_us"] for r in (small, large)]
    assert s["tail_ratio_index"] == round(own[1] / own[0], 3)
    assert s["tail_ratio_read"] == round(large["tail_read_us"] / small["tail_read_us"], 3)
    assert "tail at 90 vs 30 nodes" in capsys.readouterr().out


def test_sizes_must_grow(tmp_path):
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--sizes", "90,30", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
