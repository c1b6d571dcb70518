"""Helpers for the pipeline tests: start a run of the bundled example with a scripted LLM."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from waiting import load_scaled

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"

# small, fast, sandbox = subprocess (always available); the sandbox python is this venv's python
# only when the system python lacks what the plot script needs (numpy-free experiment otherwise)
FAST = [
    "agent.stages.stage1_max_iters=4",
    "agent.stages.stage2_max_iters=2",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=2",
    "agent.stages.stage2_good_nodes=2",
    "agent.search.num_drafts=2",
    "agent.search.debug_prob=1.0",
    "agent.multi_seed_eval.num_seeds=2",
    "exec.backend=subprocess",
    "exec.timeout=60",
    "memory.embedding.backend=none",
    "report.enabled=false",
]


# one node of a real (slow) model: one draft, short answers, one installer step
ONE_REAL_NODE = [
    "agent.stages.stage1_max_iters=1",
    "agent.search.num_drafts=1",
    "agent.code.max_tokens=500",
    "agent.feedback.max_tokens=300",  # the review answers findings + remarks + is_bug
    "context.max_prompt_tokens=3000",
    "exec.phase1_max_steps=1",
    "exec.timeout=30",
]


def run_args(tmp_path: Path, *overrides: str, name: str = "run") -> Namespace:
    return Namespace(
        config=None,
        overrides=[*FAST, *overrides],
        idea=str(IDEA),
        resources=None,
        out=str(tmp_path / "experiments"),
        name=name,
        from_phase=None,
        run_dir=None,
        stop_after=None,
    )


def start_run(
    tmp_path: Path, *overrides: str, responder: Any = None, name: str = "run", latency_s: float = 0.0
) -> tuple[int, Path, ExampleResponder]:
    """Create and execute a run with the scripted example LLM; returns (exit code, run dir, responder)."""
    responder = responder or ExampleResponder()
    run, resources = setup_run(run_args(tmp_path, *overrides, name=name))
    code = execute(run, resources=resources, backend=ScriptedBackend(responder, latency_s=latency_s))
    return code, run.dir, responder


def journal_nodes(run_dir: Path) -> dict[str, dict]:
    from ai_scientist.base.fileio import read_jsonl

    latest: dict[str, dict] = {}
    for rec in read_jsonl(run_dir / "journal.jsonl"):  # skips a torn tail like the journal does
        latest[rec["node"]["id"]] = rec["node"]
    return latest


def prompt_records(run_dir: Path) -> list[dict]:
    """Every prompt-log record of the run (all nodes, the ``run`` pseudo-node included), in call
    order per node."""
    from ai_scientist.base.paths import RunPaths

    paths = RunPaths(run_dir)
    return [
        json.loads(p.read_text(encoding="utf-8"))
        for nid in paths.node_ids()
        for p in paths.node(nid).prompt_log_files()
    ]


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


# what a replay must rebuild: the tree (these journal fields of every node) and the decisions
TREE_FIELDS = ("id", "parent_id", "stage", "operation", "status", "idea", "seed", "tree", "metric", "error")
DECISIONS = ("node_selected", "stage_best", "stage_completed", "ideas_planned")


def tree(run_dir: Path) -> dict[str, dict]:
    return {nid: {k: n[k] for k in TREE_FIELDS} for nid, n in journal_nodes(run_dir).items()}


def decisions(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "ts"} for e in events(run_dir) if e["type"] in DECISIONS]


def phase_records(run_dir: Path, node_id: str, phase: str) -> list[dict]:
    """The prompt-log records of one node's calls in ``phase``, in call order."""
    folder = run_dir / "nodes" / node_id / "prompt_logs"
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"*_{phase}_*.json"))]


def content_text(content: Any) -> str:
    """A message's text: the string, or its text parts (images left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def string_messages_text(record: dict) -> str:
    """The messages of a prompt-log record whose content is a plain string, joined."""
    return "\n".join(m["content"] for m in record["messages"] if isinstance(m.get("content"), str))


def record_text(record: dict) -> str:
    """Every text of a prompt-log record's messages (string contents and the text parts of a
    message with images), joined."""
    parts = []
    for m in record["messages"]:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(parts)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m ai_scientist.cli ARGS`` from the repository root, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def python_has(module: str, python: str = "/usr/bin/python3") -> bool:
    try:
        return (
            subprocess.run(
                [python, "-c", f"import {module}"], capture_output=True, timeout=load_scaled(30)
            ).returncode
            == 0
        )
    except OSError:
        return False


PYTHON = sys.executable


SEED_ENV = "AI_SCI_TEST_SEED"


def random_seeds(default: list[int] | None = None) -> list[int]:
    """The seeds of a test that acts at a random moment (a kill, a SIGINT): ``AI_SCI_TEST_SEED``
    if set (replays one a failure printed), else ``default``, else one new seed from the clock —
    a moment seen once under load must be reproducible (docs/testing.md)."""
    if os.environ.get(SEED_ENV):
        return [int(os.environ[SEED_ENV])]
    return list(default) if default is not None else [time.time_ns() % 1_000_000]


def say_seed(seed: int) -> random.Random:
    """Print how to replay ``seed`` (pytest shows it with a failure) and return its generator."""
    print(f"{SEED_ENV}={seed} replays this random moment")
    return random.Random(seed)
