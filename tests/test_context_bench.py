"""The context-retention benchmark runs and its scoring is meaningful (small, seeded run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "context_retention.py"


def _bench():
    spec = importlib.util.spec_from_file_location("context_retention", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file executes
    spec.loader.exec_module(mod)
    return mod


def test_generator_is_seeded_and_plants_every_fact_kind():
    cr = _bench()
    a, b = cr.generate(3, 60), cr.generate(3, 60)
    assert [s.assistant for s in a[2]] == [s.assistant for s in b[2]]
    kinds = {f.kind for f in a[1]}
    assert kinds == {"constraint", "static", "static_json", "updated", "thinking"}
    text = "\n".join(s.assistant + s.tool for s in a[2])
    for f in a[1]:
        if f.kind == "thinking" and f.step < 60:
            assert "<think>" in text and f.value in text  # planted, inside thinking only


def test_small_run_scores_policies(tmp_path):
    cr = _bench()
    out = tmp_path / "r.json"
    assert cr.main(["--steps", "50", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    p = res["policies"]
    assert p["naive"]["retention"] == 1.0 and p["naive"]["thinking_leaks"] > 0  # the scorer sees leaks
    for name in ("ours", "ours_fill"):
        assert p[name]["pinned_violations"] == 0 and p[name]["thinking_leaks"] == 0
        assert p[name]["by_kind"]["constraint"] == 1.0
        assert p[name]["tokens_vs_naive"] <= 0.25
    assert p["ours_fill"]["retention"] >= p["tail@ours_tokens"]["retention"]
