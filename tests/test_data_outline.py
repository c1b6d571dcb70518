"""A data file's outline shows every type a record's field takes (issue 28, relay run 1 of the
blocked-matmul idea: a list of 21 runs whose first run had ``"tile": null`` was outlined as
``[21 x {... "tile": null ...}]``, so a plotting call working from the outline could not know the
blocked runs carry their tile there)."""

from __future__ import annotations

import json

from ai_scientist.phases.plots import _outline


def _runs() -> list[dict]:
    runs = [{"kernel": "naive", "n": 256, "tile": None, "gflops": 0.4}]
    runs += [{"kernel": "blocked", "n": 256, "tile": t, "gflops": 2.0 + t / 100} for t in (16, 32, 64)]
    runs.append({"kernel": "packed", "n": 256, "tile": 64, "gflops": 5.1, "pack_ms": 0.3})
    return runs


def test_outline_merges_the_types_of_every_record(tmp_path):
    runs = _runs()
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"runs": runs}))
    structure = _outline(path)["structure"]
    tile_types = {type(r["tile"]).__name__ for r in runs}  # NoneType and int in this data
    assert tile_types == {"NoneType", "int"}
    assert '"tile": int|null' in structure
    # a field only some records have is named with how many have it
    having = sum("pack_ms" in r for r in runs)
    assert f'"pack_ms": float (in {having} of {len(runs)})' in structure
    assert structure.startswith(f'{{"runs": [{len(runs)} x {{')


def test_records_of_one_shape_keep_the_short_outline(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"runs": [{"seed": s, "acc": 0.5 + s / 10} for s in range(4)]}))
    assert _outline(path)["structure"] == '{"runs": [4 x {"seed": int, "acc": float}]}'
