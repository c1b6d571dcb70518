"""Issue 28, relay run s8 ln2 (requests 003, 007, 013): the "Data files" structure outline.

A plotting call got a results.json outline cut mid-token with no marker (``..."standardise": b``),
the same run record spelled out for every key because its loss lists had 50 or 200 values, the
keys of a grid elided to first, second and last (hiding ``main``), and ``"train_loss": [50 x
float]`` for a list the program writes nulls into. Read from the prompt logs and files of one
scripted run whose experiment also writes such a file (the relay run's shape: a grid of runs and
a second dict of noise runs, loss lists of two lengths, a field null at noise 0 and a field the
program writes as null that this run never nulled), and from the outline of larger files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run

from ai_scientist.phases import plots

DATA = "grid_results.json"
# the relay run's results.json, in miniature: 12 runs (one of 200 epochs), 6 noise runs whose
# flipped_fit_rate is null at noise 0, and a gflops the program nulls only when a run fails
GRID = f'''
import json as _json, math as _math

def _record(l2, lr, noise, epochs, ok=True):
    losses = [1.0 / (1 + lr * e) + l2 for e in range(epochs)]
    return {{
        "l2": l2, "lr": lr, "bias": True, "standardise": True,
        "val_accuracy": 0.9 - l2, "train_accuracy_noisy": 0.8 + lr / 10,
        "flipped_fit_rate": 0.1 + l2 if noise > 0 else None,
        "weights": [0.5, -0.25], "bias_value": 0.1,
        "gflops": 2.0 + lr if ok else None,
        "train_loss": [v if _math.isfinite(v) else None for v in losses],
        "diverged": not all(_math.isfinite(v) for v in losses),
    }}

_runs = {{f"grid_l2={{l2}}_lr={{lr}}": _record(l2, lr, 0.2, 50) for l2 in (0.0, 0.01, 0.1) for lr in (0.01, 0.1, 0.5)}}
_runs["main"] = _record(0.01, 0.1, 0.2, 200)
_runs["ablate_no_bias"] = _record(0.01, 0.1, 0.2, 50)
_runs["ablate_no_std_lr0.001"] = _record(0.01, 0.001, 0.2, 50)
_noise = {{f"noise={{nz}}_l2={{l2}}": _record(l2, 0.1, nz, 50) for nz in (0.0, 0.4) for l2 in (0.0, 0.01, 0.1)}}
with open("{DATA}", "w") as _fh:
    _json.dump({{"config": {{"n_train": 200, "n_val": 2000, "noise": 0.2, "epochs": 50, "main_epochs": 200}},
                "runs": _runs, "noise_runs": _noise}}, _fh)
'''


class GridResponder(ExampleResponder):
    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            if f["path"] == "experiment.py" and "results.json" in f["content"]:
                f["content"] += GRID
        return json.dumps(answer)


ONE_NODE = (
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("relay_s8_outline"), *ONE_NODE, responder=GridResponder(buggy_nodes=())
    )
    assert code == 0
    return run_dir


def _plot_calls(run: Path) -> list[tuple[dict, Path]]:
    nodes = journal_nodes(run)
    out = []
    for rec in prompt_records(run):
        if rec.get("phase") == "phase5_plot":
            ws = run / "nodes" / rec["node_id"] / "workspace"
            if (ws / DATA).is_file() and nodes[rec["node_id"]]["operation"] != "seed_eval":
                out.append((rec, ws))
    assert out, "no plotting call saw the grid file"
    return out


def _structure(text: str, file: str) -> str:
    """The structure the prompt's "Data files" section gives ``file``: inline or by its label."""
    section = text.split("## Data files", 1)[1]
    row = re.search(rf"^- {re.escape(file)} \(\d+ bytes\): (.*)$", section, re.M)
    assert row, file
    ref = re.fullmatch(r"structure (S\d+)", row[1])
    if not ref:
        return row[1]
    shared = re.search(rf"^- {ref[1]}(?: \(\d+ files\))?: (.*)$", section, re.M)
    assert shared, ref[1]
    return shared[1]


def _balanced(structure: str) -> bool:
    """Every bracket the outline opens is closed, outside the quoted key names."""
    depth = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', structure):
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _record_dicts(value: Any, path: str = "$") -> list[tuple[str, dict[str, dict]]]:
    """Every object of the data whose values (3 or more) are records with the same fields: a grid
    of runs."""
    found = []
    if isinstance(value, dict):
        records = list(value.values())
        if (
            len(records) >= 3
            and all(isinstance(v, dict) for v in records)
            and len({frozenset(v) for v in records}) == 1
        ):
            found.append((path, value))
        for k, v in value.items():
            found += _record_dicts(v, f"{path}.{k}")
    return found


def test_the_outline_names_every_key_and_is_whole(run):
    for rec, ws in _plot_calls(run):
        data = json.loads((ws / DATA).read_text())
        structure = _structure(record_text(rec), DATA)
        assert _balanced(structure), structure[-120:]
        assert "[... cut" not in structure  # this file's outline fits whole
        for _, records in _record_dicts(data):
            assert len(records) <= plots.OUTLINE_NAMES
            # every key, in the file's order, in one "<each of N keys: ...>" entry
            assert f"<each of {len(records)} keys: {', '.join(records)}>" in structure
        for key in data["config"]:
            assert f'"{key}":' in structure


def test_records_of_one_shape_are_outlined_once_whatever_their_lengths(run):
    for rec, ws in _plot_calls(run):
        data = json.loads((ws / DATA).read_text())
        structure = _structure(record_text(rec), DATA)
        groups = _record_dicts(data)
        fields = {f for _, records in groups for r in records.values() for f in r}
        for field in fields:  # once per group of records, not once per record
            assert structure.count(f'"{field}":') == len(groups), field
        for _, records in groups:
            lens = sorted({len(r["train_loss"]) for r in records.values()})
            said = " or ".join(map(str, lens))
            assert f'"train_loss": [{said} x float' in structure
        assert any(len({len(r["train_loss"]) for r in rs.values()}) > 1 for _, rs in groups)


def test_nullable_fields_say_so(run):
    for rec, ws in _plot_calls(run):
        data = json.loads((ws / DATA).read_text())
        structure = _structure(record_text(rec), DATA)
        records = [r for _, rs in _record_dicts(data) for r in rs.values()]
        program = (ws / "experiment.py").read_text()
        for field in records[0]:
            values = [r[field] for r in records]
            holds_null = any(v is None for v in values)
            # the program writes null for it on its line ("...: x if ok else None")
            written_null = bool(re.search(rf'"{field}": [^\n]*\bNone\b', program)) and not re.search(
                rf'"{field}": [^\n]*\bis None\b', program
            )
            scalar = all(not isinstance(v, (dict, list)) for v in values)
            if scalar and (holds_null or written_null):
                assert f'"{field}": float|null' in structure, field
            elif scalar:
                assert f'"{field}": ' in structure and f'"{field}": float|null' not in structure, field
        # a list the program fills with null for a non-finite value, none in this run
        assert not any(v is None for r in records for v in r["train_loss"])
        assert re.search(r'"train_loss": \[[^\]]* x float\|null\]', structure)
        # a field no null is ever written to keeps its type
        assert '"diverged": bool' in structure and '"diverged": bool|null' not in structure


# larger files than one prompt's outline allows ---------------------------------------------------


def _grid(n: int, fields: int, epochs: tuple[int, ...] = (50,)) -> dict[str, Any]:
    return {
        f"cell_{i:03d}_with_a_long_descriptive_name": {
            **{f"field_{j}": float(j) for j in range(fields)},
            "loss": [0.1] * epochs[i % len(epochs)],
        }
        for i in range(n)
    }


def test_past_the_name_limit_the_first_and_last_keys_are_named_with_a_count():
    data = {"runs": _grid(plots.OUTLINE_NAMES + 20, 3, (50, 200))}
    text = plots.json_outline(data)
    keys = list(data["runs"])
    assert _balanced(text)
    assert f"<each of {len(keys)} keys: {keys[0]}, " in text and f", {keys[-1]}>" in text
    shown = [k for k in keys if k in text]
    assert f"... ({len(keys) - len(shown)} more)" in text
    assert '"loss": [50 or 200 x float]' in text


def test_a_structure_too_long_loses_levels_with_a_marker_never_a_token():
    # 40 different objects of 40 fields each: no merge applies, the whole outline is too long
    data = {
        f"group_{g}": {f"g{g}_field_{j}": {"v": [1.0, 2.0], "w": j} for j in range(40)} for g in range(40)
    }
    whole = plots._json_outline(data)
    assert len(whole) > plots.OUTLINE_CHARS
    text = plots.json_outline(data)
    assert len(text) <= plots.OUTLINE_CHARS + 200
    assert _balanced(re.sub(r" ?\[\.\.\. cut[^\]]*\]", "", text))
    assert "[... cut" in text
    # every top-level key is named, outlined or in the list of keys left out with their count
    kept = sum(f'"{k}":' in text for k in data)
    left = re.search(r"\[\.\.\. cut: (\d+) more keys: ", text)
    assert kept + (int(left[1]) if left else 0) == len(data)


def test_a_deep_structure_is_cut_by_level_keeping_the_key_names():
    # 12 experiments of their own variants and settings (nothing to merge), too long whole
    data = {
        f"experiment_{e}": {f"e{e}_variant_{v}": {"settings": {f"e{e}_s{j}": j for j in range(30)}, "curve": [0.5] * 10}
                            for v in range(2)}
        for e in range(12)
    }  # fmt: skip
    assert len(plots._json_outline(data)) > plots.OUTLINE_CHARS
    text = plots.json_outline(data)
    assert len(text) <= plots.OUTLINE_CHARS + 200
    assert re.search(r"\[\.\.\. cut: objects below level \d+ shown by key count and names \.\.\.\]$", text)
    for e in data:
        assert e in text


def test_the_report_manifest_outlines_the_grid_once_too(run):
    """The aggregation call's data manifest (``reporting/manifest.py``) merges the same records."""
    from ai_scientist.reporting.manifest import describe_file

    nullable = 0
    for _, ws in _plot_calls(run):
        data = json.loads((ws / DATA).read_text())
        structure = describe_file(ws / DATA)["structure"]
        for path, records in _record_dicts(data):
            ((key, record),) = structure[path.split(".")[-1]].items()
            assert key == f"<each of {len(records)} keys: {', '.join(records)}>"
            lens = sorted({len(r["train_loss"]) for r in records.values()})
            assert record["train_loss"]["list_len"] == (f"{lens[0]}-{lens[-1]}" if len(lens) > 1 else lens[0])
            rates = [r["flipped_fit_rate"] for r in records.values()]
            if None in rates and any(v is not None for v in rates):
                assert record["flipped_fit_rate"] == "float|null"
                nullable += 1
    assert nullable  # the noise runs' rate is null at noise 0


def test_plain_lists_of_their_own_lengths_keep_their_names():
    """Merging is for records: loss and accuracy lists of different lengths are each named with
    their own length (which list has which matters, and each is short)."""
    data = {"train_loss": [0.5] * 50, "val_loss": [0.6] * 50, "test_acc": [0.9] * 10}
    text = plots.json_outline(data)
    for key, values in data.items():
        assert f'"{key}": [{len(values)} x float]' in text
