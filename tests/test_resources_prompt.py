"""Resource contents reach the prompts (issue 13, "Resources in the prompt"): the resource-index
layer carries digests, a file tree and excerpts of the most relevant text files, within its budget;
a cut is marked in the text and recorded in the ledger; binary files and symlinks are never read."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import run_args

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.execution.resource_excerpts import EXCERPT_CHARS
from ai_scientist.execution.resources import load_resources, render_resource_index, stage_resources
from ai_scientist.llm.scripted_backend import ScriptedBackend

ONE_NODE = (
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
)
LAYER_MAX_TOKENS = 400
NOTES = (
    "Notes on label noise in logistic regression:\n"
    "- flip 20 % of the training labels, keep validation labels clean\n"
    "- an L2 penalty of 0.1 kept validation accuracy highest in our earlier runs\n"
)
SECRET = "host-only-file-content-7f3a"


def _resources(base: Path) -> Path:
    tmpl = base / "tmpl"
    tmpl.mkdir(parents=True)
    (tmpl / "label_noise_logistic_regression_notes.md").write_text(NOTES)
    # a long file no word of the idea names: ranked after the notes, shown by its head only
    lines = [f"row {i:05d} lorem ipsum dolor sit amet consectetur" for i in range(700)]
    (tmpl / "zz_appendix.txt").write_text("\n".join(lines) + "\n")
    (tmpl / "weights.bin").write_bytes(bytes(range(256)) * 8)  # binary: listed, never excerpted
    outside = base / "outside.txt"
    outside.write_text(SECRET + "\n")
    os.symlink(outside, tmpl / "link_to_outside.txt")  # a symlink: never followed
    spec = base / "resources.yaml"
    spec.write_text(
        "resources:\n  - {id: tmpl, type: local, path: tmpl, "
        "summary: notes and a template for the label noise study, class: code}\n"
    )
    return spec


def _resource_section(record: dict) -> str:
    # the resource index is a volatile layer of the user message (after the stable layers)
    system = "\n\n".join(m["content"] for m in record["messages"] if isinstance(m.get("content"), str))
    start = system.index("## Resources available to your code")
    end = system.find("\n## ", start + 5)
    return system[start:] if end == -1 else system[start:end]


def test_excerpts_reach_the_phase_prompt_and_the_layer_budget_is_recorded(tmp_path):
    spec = _resources(tmp_path)
    args = run_args(tmp_path, *ONE_NODE, f"context.layers.resource_index.max_tokens={LAYER_MAX_TOKENS}")
    args.resources = str(spec)
    run, resources = setup_run(args)
    code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder(buggy_nodes=())))
    assert code == 0
    logs = sorted((run.dir / "nodes/n0001/prompt_logs").glob("*_phase2_*.json"))
    record = json.loads(logs[0].read_text())
    section = _resource_section(record)
    # the most relevant file is shown whole, under the path the code reads it from
    assert "#### `resources/tmpl/label_noise_logistic_regression_notes.md` (whole file" in section
    assert NOTES.strip() in section
    # the file tree lists every regular file with its size (the binary one too) and the digest
    index = json.loads((run.dir / "resources/index.json").read_text())
    item = index["items"][0]
    assert f"sha256 {item['sha256'][:16]}" in section
    assert "weights.bin (2048 B)" in section and "zz_appendix.txt" in section
    # never read: the binary file's contents, the symlink's target
    assert "#### `resources/tmpl/weights.bin`" not in section
    assert SECRET not in json.dumps(record["messages"])
    # the layer is over its max_tokens: the packer cut it (head kept), the text and the ledger say so
    entry = next(e for e in record["ledger"] if e["layer"] == "resource_index")
    assert entry["action"] == "truncated", entry
    assert entry["tokens_before"] > LAYER_MAX_TOKENS >= entry["tokens_after"]
    assert entry["chars_after"] < entry["chars_before"]
    assert "more characters cut ...]" in section
    # the rest is where the excerpt says: the whole file is readable in the node's workspace
    appendix = run.dir / "nodes/n0001/workspace/resources/tmpl/zz_appendix.txt"
    assert appendix.stat().st_size == (tmp_path / "tmpl/zz_appendix.txt").stat().st_size


def test_a_big_file_is_excerpted_by_its_head_and_the_text_stays_within_budget(tmp_path):
    spec = _resources(tmp_path)
    index = stage_resources(load_resources(spec), tmp_path / "run")
    query = "label noise logistic regression"
    text = render_resource_index(index, relevant_to=query, budget_chars=20_000)
    size = (tmp_path / "tmpl/zz_appendix.txt").stat().st_size
    head = (tmp_path / "tmpl/zz_appendix.txt").read_text()[:EXCERPT_CHARS]
    assert f"first {EXCERPT_CHARS} characters of {size} bytes" in text
    assert "can read the whole file at `resources/tmpl/zz_appendix.txt`" in text
    assert head in text and (tmp_path / "tmpl/zz_appendix.txt").read_text()[: EXCERPT_CHARS + 1] not in text
    assert text.index("label_noise_logistic_regression_notes.md` (whole") < text.index(
        "zz_appendix.txt` (first"
    )
    # a tighter budget drops the less relevant excerpt first, then cuts the last one; never over
    for budget in (3000, 1200, 700, 400):
        shorter = render_resource_index(index, relevant_to=query, budget_chars=budget)
        assert len(shorter) <= budget, (budget, len(shorter))
        assert "`tmpl`" in shorter
    assert NOTES.strip() in render_resource_index(index, relevant_to=query, budget_chars=1200)
    assert "zz_appendix.txt` (first" not in render_resource_index(index, relevant_to=query, budget_chars=1200)


def test_in_a_large_item_the_file_named_for_the_task_is_found(tmp_path):
    from ai_scientist.execution.resource_excerpts import MAX_READ

    data = tmp_path / "many"
    data.mkdir()
    for i in range(MAX_READ * 3):
        (data / f"shard_{i:04d}.txt").write_text(f"unrelated shard {i}\n")
    (data / "zz_label_noise_settings.txt").write_text("noise rate 0.2\n")
    spec = tmp_path / "resources.yaml"
    spec.write_text("resources:\n  - {id: many, type: local, path: many}\n")
    index = stage_resources(load_resources(spec), tmp_path / "run")
    text = render_resource_index(index, relevant_to="label noise study", budget_chars=20_000)
    first = text.index("#### `resources/many/")
    assert text[first:].startswith("#### `resources/many/zz_label_noise_settings.txt` (whole file")
    assert f"and {MAX_READ * 3 + 1 - 12} more" in text  # the tree lists 12 files and counts the rest
