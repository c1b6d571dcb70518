"""Which layers each prompt uses — the one place to read it.

``LAYERS`` is the catalogue: role, template, priority (higher survives longer),
pinned, minimum/maximum tokens, truncation policy. ``PROMPTS`` lists, per
(phase, operation/stage) prompt, its layers in the order they appear in the
messages. Per-layer budgets can be overridden by ``context.layers.<name>``.
"""

from __future__ import annotations

from typing import Any, Literal

from .layer import Layer


def _L(name: str, role: Literal["system", "user"], priority: int, policy: str = "none", **kw: Any) -> Layer:
    """A layer whose value is ``values[name]`` rendered by ``prompt/context/<name>.j2``."""
    template = kw.pop("template", f"context/{name}.j2")
    key = kw.pop("key", name)
    return Layer(name=name, role=role, template=template, key=key, priority=priority, policy=policy, **kw)


LAYERS: dict[str, Layer] = {
    layer.name: layer
    for layer in (
        # -- base context (system message)
        _L("system", "system", 100, template="core/system.j2", key=None, pinned=True),
        _L("domain", "system", 90, template="core/domain_neutral.j2", key=None, title="Working rules"),
        _L("environment", "system", 60, "head", min_tokens=150, title="Environment"),  # sandbox first
        _L("memory", "system", 55, "head", min_tokens=120, title="Memory"),
        _L("resource_index", "system", 50, "head", min_tokens=120, title="Resource index"),
        # -- task and history
        _L("task", "user", 100, "head", pinned=True, required=True, min_tokens=400, title="Research idea"),
        _L("history", "user", 40, "tail", min_tokens=150, strip_reasoning=True, title="History so far"),
        # -- stage inputs
        _L("plan_snippet", "user", 70, "json_preview", min_tokens=150, strip_reasoning=True, title="Plan"),
        _L("prior_code", "user", 75, "head_tail", min_tokens=400, title="Current code"),
        # the user's seed code (run --load-code / the idea's code section): draft nodes only
        _L("seed_code", "user", 78, "head_tail", min_tokens=300, title="Seed code"),
        _L("execution_output", "user", 65, "json_preview", min_tokens=200, title="Execution output"),
        _L("install_steps", "user", 62, "history_prune", min_tokens=150, title="Installer steps so far"),
        _L("plot_feedback", "user", 45, "head", min_tokens=80, strip_reasoning=True, title="Plot feedback"),
        _L("time_feedback", "user", 45, "head", min_tokens=40, title="Run time"),
        _L("tried_hyperparams", "user", 50, "history_prune", min_tokens=80, title="Hyper-parameters tried"),
        _L("ablation_plan", "user", 50, "json_preview", min_tokens=80, title="Ablation plan"),
        _L("tried_ablations", "user", 48, "history_prune", min_tokens=80, title="Ablations done"),
        _L(
            "candidates",
            "user",
            80,
            "json_preview",
            pinned=True,
            required=True,
            min_tokens=200,
            title="Candidates",
        ),
        _L(
            "prior_outputs", "user", 35, "tail", min_tokens=100, strip_reasoning=True, title="Earlier answers"
        ),
        # -- instructions (text rendered by the phase's own template), pinned
        _L("instructions", "user", 95, pinned=True, required=True, title="Instructions"),
        _L("response_format", "user", 95, pinned=True, title="Response format"),
        # -- ideation (``ai-scientist ideate``; templates in prompt/ideation/)
        _L(
            "topic",
            "user",
            100,
            "head",
            template="ideation/topic.j2",
            pinned=True,
            required=True,
            min_tokens=300,
            title="Research topic",
        ),
        _L(
            "previous_ideas",
            "user",
            45,
            "history_prune",
            template="ideation/previous_ideas.j2",
            min_tokens=80,
            title="Ideas already proposed",
        ),
        _L(
            "idea_draft",
            "user",
            85,
            "head",
            template="ideation/idea_draft.j2",
            min_tokens=200,
            title="Your current draft",
        ),
        _L(
            "literature",
            "user",
            70,
            "history_prune",
            template="ideation/literature.j2",
            min_tokens=150,
            title="Literature search results",
        ),
    )
}

_BASE = ["system", "domain", "environment", "memory", "resource_index"]
_TAIL = ["instructions", "response_format"]

PROMPTS: dict[str, list[str]] = {
    # Phase 0: plan the node (download / install / compile / run), from idea + history
    "phase0_plan": [*_BASE, "task", "seed_code", "history", "prior_outputs", *_TAIL],
    # Phase 1: next installer command, given the plan and the steps so far
    "phase1_install": [*_BASE, "task", "plan_snippet", "history", "install_steps", *_TAIL],
    # Phase 2/3/4: write the code + compile + run commands for one node operation
    "phase234_code": [
        *_BASE,
        "task",
        "plan_snippet",
        "history",
        "seed_code",
        "prior_code",
        "execution_output",
        "plot_feedback",
        "time_feedback",
        "tried_hyperparams",
        "ablation_plan",
        "tried_ablations",
        *_TAIL,
    ],  # fmt: skip
    # judge one execution: bug or not, metric, summary
    "exec_review": ["system", "task", "prior_code", "execution_output", *_TAIL],
    # fallback: read the metrics from the run output when metrics.json is missing
    "metrics_parse": ["system", "task", "execution_output", *_TAIL],
    # LLM tie-break between candidate nodes
    "select_tiebreak": ["system", "task", "candidates", *_TAIL],
    # propose the next hyper-parameter / ablation idea
    "propose_idea": ["system", "task", "memory", "tried_hyperparams", "tried_ablations", *_TAIL],
    # ideation: draft / search / refine one research idea from a topic (``ai-scientist ideate``)
    "ideation": ["system", "topic", "previous_ideas", "idea_draft", "literature", *_TAIL],
}


def layers_for(prompt_name: str) -> list[Layer]:
    """The layers of ``prompt_name`` in message order (a clear error lists the known prompts)."""
    try:
        names = PROMPTS[prompt_name]
    except KeyError:
        raise KeyError(f"unknown prompt {prompt_name!r}; known: {', '.join(sorted(PROMPTS))}") from None
    return [LAYERS[n] for n in names]
