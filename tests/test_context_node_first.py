"""The node-centred order (context/spec.py ``NODE_FIRST``): a node's review and its plotting call
open with the same bytes through the node's program when the program is long, so a provider's
prefix cache serves the program to the second call; with a short program both keep the
stable-first order (instructions and format before the node's material)."""

from __future__ import annotations

import os

from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.context.spec import NODE_FIRST_MIN_TOKENS

COUNTER = counter_for("gpt-4o-mini")


def _program(functions: int) -> str:
    return "".join(f"def scale_{i}(x):\n    return x * {i}\n\n" for i in range(functions))


def _calls(program: str, environment: str | None = None):
    """A node's review and plotting prompts, as the pipeline assembles them one after the other."""
    node = {
        "task": "# Idea\nMeasure X on Y.",
        "prior_code": program,
        "run_result": "Command 1: `python experiment.py` exited 0\nMetrics (1):\n- acc = 0.9",
        "node_brief": "Call: about node n0003.",
        "operation": "draft",
    }
    review = {
        **node,
        "instructions": "Review the run of the node named under This call.",
        "response_format": "JSON: findings, is_bug.",
        "run_output": "epoch 1 loss 0.5\nacc 0.9",
        "siblings": ["| node | result |\n|---|---|", "| n0002 | acc=0.8 |"],
        "judging": True,
        **({"environment": environment} if environment else {}),
    }
    plot = {
        **node,
        "instructions": "Write the plotting script for the node named under This call.",
        "response_format": "JSON: script, figures.",
        "data_files": "1 data file in the working directory:\n- results.json (80 bytes)",
    }
    budget = Budget(100_000)
    return assemble("exec_review", review, budget, COUNTER), assemble("node_plot", plot, budget, COUNTER)


def _text(prompt) -> str:
    """The request as a prefix cache sees it (bench/prompt_cache.py request_text)."""
    return "".join(f"{m['role']}\n{m['content']}\n" for m in prompt.messages)


def test_a_long_program_opens_the_review_and_the_plotting_call_alike():
    review, plot = _calls(_program(300))
    program = review.sections["prior_code"]
    assert COUNTER.count(program) >= NODE_FIRST_MIN_TOKENS
    shared = os.path.commonprefix([_text(review), _text(plot)])
    assert program in shared  # the plotting call's cache holds the program its review sent
    for p in (review, plot):  # each call's own instructions and format follow the node's material
        user = p.messages[-1]["content"]
        assert user.index(program) < user.index(p.sections["instructions"])
        assert user.index(p.sections["run_result"]) < user.index(p.sections["response_format"])
    user = review.messages[-1]["content"]
    assert user.index(review.sections["instructions"]) < user.index(review.sections["siblings"])


def test_a_short_program_keeps_the_instructions_first():
    review, plot = _calls(_program(5))
    assert COUNTER.count(review.sections["prior_code"]) < NODE_FIRST_MIN_TOKENS
    for p in (review, plot):
        user = p.messages[-1]["content"]
        assert user.index(p.sections["response_format"]) < user.index(p.sections["prior_code"])
    # two reviews of different short programs share the instructions, the format and the tables
    other, _ = _calls(_program(6))
    shared = os.path.commonprefix([_text(review), _text(other)])
    assert review.sections["siblings"] in shared


def test_a_benchmark_review_moves_its_machine_after_the_program():
    """A benchmark's review carries the machine (environment); with a long program it goes to the
    user message after the node's material, so the review's system message is the plotting
    call's and the shared prefix reaches the program."""
    machine = "## Machine\nCPU: 8 cores, AVX2, L1d 32 KiB, L2 1 MiB"
    review, plot = _calls(_program(300), environment=machine)
    assert review.messages[0] == plot.messages[0]
    user = review.messages[-1]["content"]
    assert user.index(review.sections["run_result"]) < user.index(review.sections["environment"])
    assert review.sections["prior_code"] in os.path.commonprefix([_text(review), _text(plot)])
    short, _ = _calls(_program(5), environment=machine)  # stable-first: the machine in the system message
    assert short.sections["environment"] in short.messages[0]["content"]
