"""Which layers each prompt uses — the one place to read it.

``LAYERS`` is the catalogue: role, template, priority (higher survives longer),
pinned, minimum/maximum tokens, truncation policy. ``PROMPTS`` lists, per
(phase, operation/stage) prompt, its layers in the order they appear in the
messages. ``PROMPT_LAYERS`` gives a layer other settings in one prompt, where the
call's purpose makes it more (or less) important. Per-layer budgets can be
overridden by ``context.layers.<name>``.
"""

from __future__ import annotations

from dataclasses import replace
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
        # -- volatile run context (user message, after the stable layers: see PROMPTS)
        _L("memory", "user", 55, "whole_items", min_tokens=120, title="Memory"),
        _L("resource_index", "user", 50, "head", min_tokens=120, title="Resource index"),
        # -- task and history
        _L(
            "task",
            "user",
            100,
            "head_sentences",
            pinned=True,
            required=True,
            min_tokens=400,
            title="Research idea",
        ),
        _L("history", "user", 40, "tail", min_tokens=150, strip_reasoning=True, title="History so far"),
        # -- stage inputs
        _L("plan_snippet", "user", 70, "json_preview", min_tokens=150, strip_reasoning=True, title="Plan"),
        _L("prior_code", "user", 75, "head_tail", min_tokens=400, title="Current code"),
        # a child's plotting call: the parent's plotting script whose figures passed (reuse keeps
        # the two nodes' figures comparable); dropped first when the budget is short
        _L("parent_plot_script", "user", 35, "head_tail", min_tokens=200, title="Parent's plotting script"),
        # the user's seed code (run --load-code / the idea's code section): draft nodes only
        _L("seed_code", "user", 78, "head_tail", min_tokens=300, title="Seed code"),
        _L("execution_output", "user", 65, "json_preview", min_tokens=200, title="Execution output"),
        # what a run produced, for the calls that judge or use it (review, plotting, critique):
        # each command's exit code and every metric value (a few lines, kept before anything else
        # unpinned), the output's last lines (results are printed last), the data files by name
        _L("run_result", "user", 97, "head", min_tokens=150, title="Run result"),
        _L("run_output", "user", 90, "tail", min_tokens=250, title="Output (last lines)"),
        _L("data_files", "user", 96, "head", min_tokens=200, title="Data files"),
        _L("install_steps", "user", 62, "history_prune", min_tokens=150, title="Installer steps so far"),
        _L("plot_feedback", "user", 45, "head", min_tokens=80, strip_reasoning=True, title="Plot feedback"),
        _L("time_feedback", "user", 45, "head", min_tokens=40, title="Run time"),
        # the parent's failure (its error as recorded on the node): debug and improve see why
        _L("parent_error", "user", 68, "head_tail", min_tokens=80, title="Parent's failure"),
        # stage inputs: the tried tables [header, row, ..., ranking], rows in creation order (a new
        # row last: the prefix cache keeps the rows before it); a cut drops the worst rows first
        _L("tried_hyperparams", "user", 50, "rank_rows", min_tokens=80, title="Hyper-parameters tried"),
        _L("ablation_plan", "user", 50, "head_rows", min_tokens=60, title="Ablation plan"),
        _L("tried_ablations", "user", 48, "rank_rows", min_tokens=80, title="Ablations done"),
        # what the previous stages found (the summary role's stage summaries, oldest first)
        _L("stage_summary", "user", 58, "tail", min_tokens=100, title="Previous stages"),
        # what the other nodes of the stage did and scored ([header, row, ...]: the same parent's
        # children first, in creation order, so a later sibling's table extends an earlier one's)
        _L("siblings", "user", 60, "head_rows", min_tokens=80, title="Other nodes of this stage"),
        # an improve node's code call: the stage's best finished node other than its parent, with its
        # program (its diff to the parent's when short); cut before the siblings' table
        _L("sibling_code", "user", 59, "head_tail", min_tokens=200, title="Best other node of this stage"),
        # the stage's goal, one sentence (phases/stage_goal.j2): the same for every node of a stage,
        # so it sits with the stage's layers, before the lineage, where the prefix cache holds it
        _L("stage_goal", "user", 93, "head", min_tokens=40, title="This stage's goal"),
        # the metric and the data / split / size / noise / seed parameters the stage's first working
        # node fixed (runloop/protocol.py): a node that changes them is not ranked
        _L("evaluation_protocol", "user", 91, "head", min_tokens=80, title="Evaluation protocol"),
        # the stage being summarised: counts, best node, every node ranked (summary prompt only)
        _L("stage_facts", "user", 85, "head_rows", min_tokens=150, title="This stage"),
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
        # -- what this call is about (operation, stage, the node's idea, the installer step, ...):
        # rendered by phases/_node.j2, last in the prompt so the layers above stay a shared prefix
        _L("node_brief", "user", 92, "head", min_tokens=40, title="This call"),
        # the user's notes to the model (`ai-scientist steer RUN note`, the serve page): the notes
        # active when the node was created (runloop/steering.py), until withdrawn
        _L("user_note", "user", 94, "head", min_tokens=120, title="Note from the user"),
        # -- reporting: the paper review (templates in prompt/reporting/)
        _L("reviewer", "system", 100, template="reporting/review_system.j2", key=None, pinned=True),
        _L("fewshot", "user", 40, template="reporting/review_fewshot.j2", title="Example reviews"),
        _L(
            "paper",
            "user",
            90,
            "head_tail",
            pinned=True,
            required=True,
            min_tokens=800,
            title="Paper (LaTeX source)",
        ),
        # the run's records beside the paper: each stage's measurements and which of the paper's
        # numbers no measurement matches (reporting/review.measured_facts); untraced numbers first
        _L(
            "measured",
            "user",
            88,
            "head",
            template="reporting/text.j2",
            min_tokens=200,
            title="What the run measured (the pipeline's records)",
        ),
        _L("review_so_far", "user", 85, template="reporting/review_so_far.j2", title="Your review so far"),
        _L("reviews", "user", 85, template="reporting/review_reviews.j2", title="The reviews"),
        # -- reporting: the run's aggregated figures (reporting/aggregate.py)
        _L("plotter", "system", 100, template="reporting/plotting_system.j2", key=None, pinned=True),
        _L(
            "manifest",
            "user",
            90,
            "json_preview",
            template="reporting/plot_manifest.j2",
            pinned=True,
            required=True,
            min_tokens=300,
            title="Data manifest",
        ),
        # -- reporting: the paper's sections and their revisions (reporting/writeup.py), the
        # citation queries (its related-work search) and the vision model's figure review
        # (reporting/vlm.py; the figure travels as an image part after the text)
        _L("writer", "system", 100, template="reporting/writeup_system.j2", key=None, pinned=True),
        _L("citer", "system", 100, template="reporting/citation_system.j2", key=None, pinned=True),
        _L("figure_reviewer", "system", 100, template="reporting/vlm_system.j2", key=None, pinned=True),
        # what the run found (stages, lessons, figures, references): shared by every writeup call
        _L(
            "findings", "user", 88, "head", template="reporting/text.j2", min_tokens=300, title="Run findings"
        ),
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

# Stable first (docs/context.md, "Layer order and the prefix cache"): a provider caches the
# longest prefix a request shares with earlier ones, so the layers that are byte-identical across
# the calls of a run (system, working rules, environment — the system message — then the idea, the
# phase's instructions and its response format) open every prompt, and the layers that change from
# node to node or call to call follow, the least volatile first: what the stage carries (seed
# code, earlier stages' summaries), then the lineage — memory (the lineage's recall, oldest first)
# and the parent's material (history, plan, code, output, error, feedback), the same bytes for all
# siblings; a child's recall and history each extend its parent's, so the longer of the two, the
# recall, comes first: the child's prompt shares its parent's up to the parent's newest events —
# then what grows call by call (tried tables, installer steps, earlier answers) and last
# ``node_brief`` (operation, stage, the node's idea, a retry's problems).
_SYS = ["system", "domain", "environment"]
_TAIL = ["instructions", "response_format"]
_STABLE = [*_SYS, "task", *_TAIL]
# what a judge of one node's result compares it with: the stage's other nodes and their results
_JUDGED = ["tried_hyperparams", "tried_ablations", "siblings"]

_REVIEW: dict[str, list[str]] = {
    "review": ["reviewer", "fewshot", "paper", "measured", "instructions", "response_format"],
    "review_reflect": ["reviewer", "paper", "measured", "instructions", "response_format", "review_so_far"],
    "review_meta": ["reviewer", "paper", "measured", "instructions", "response_format", "reviews"],
    # the aggregation script over the run's data (its retry's problems go to node_brief, last)
    "plot_aggregate": ["plotter", "manifest", "instructions", "response_format", "node_brief"],
    # the paper's sections, a compile fix and a reflection round: one prompt whose node_brief (the
    # call's own request: the sections so far, the problem, the feedback) comes last
    "writeup": ["writer", "task", "instructions", "response_format", "findings", "node_brief"],
    # the related-work queries of one citation round (node_brief: queries asked, papers found)
    "citation_queries": ["citer", "task", "instructions", "response_format", "findings", "node_brief"],
    # one figure against its caption (node_brief: the file and caption; the image follows); for a
    # benchmark the machine it ran on (environment: reporting/vlm.py machine_facts, "" otherwise)
    "figure_review": ["figure_reviewer", "environment", "instructions", "response_format", "node_brief"],
    # the report-time critique of a stage's best node that got none in the loop (node_brief: the
    # node, its metrics and plot files; the plots follow as image parts)
    "plot_critique": [
        "figure_reviewer",
        "environment",
        "task",
        "instructions",
        "response_format",
        "node_brief",
    ],
}

PROMPTS: dict[str, list[str]] = {
    # Phase 0: plan the node (download / install / compile / run), from idea + history
    "phase0_plan": [
        *_STABLE,
        "seed_code",
        "stage_summary",
        "stage_goal",
        "evaluation_protocol",
        "resource_index",
        "memory",
        "history",
        "prior_outputs",
        "siblings",
        "user_note",
        "node_brief",
    ],
    # Phase 1: next installer command, given the plan and the steps so far
    "phase1_install": [
        *_STABLE,
        "resource_index",
        "memory",
        "history",
        "plan_snippet",
        "install_steps",
        "node_brief",
    ],  # fmt: skip
    # Phase 2/3/4: write the code + compile + run commands for one node operation
    "phase234_code": [
        *_STABLE,
        "seed_code",
        "stage_summary",
        "stage_goal",
        "evaluation_protocol",
        "resource_index",
        "memory",
        "history",
        "plan_snippet",
        "prior_code",
        "execution_output",
        "parent_error",
        "plot_feedback",
        "time_feedback",
        # an improve node's best sibling and its program: it changes only when the stage finds a
        # new best, the tables below with every node, so it comes first (bench/prompt_cache.py:
        # example 77.6 -> 78.1 %, trivial 76.6 -> 76.8 %, against the siblings' table's last row)
        "sibling_code",
        # the stage's tables: each grows by a row per node (a new row last, or by rank); the
        # ablation plan's header counts what is left, so it changes with every node and follows
        # the done ablations' table instead of cutting the prefix before it
        "tried_hyperparams",
        "tried_ablations",
        "ablation_plan",
        "siblings",
        "user_note",
        "node_brief",
    ],  # fmt: skip
    # judge one execution: bug or not, what it found (its code is cut first: PROMPT_LAYERS); the
    # environment (the machine) only for a benchmark (phases/review.py gives it then)
    "exec_review": [
        "system",
        "environment",
        "task",
        *_TAIL,
        # what the stage's nodes must measure alike: the review's "measurement" field judges
        # comparability (a relay run's reviewer had nothing to judge it against)
        "evaluation_protocol",
        # the stage's other nodes with their results: "is this result sensible, better or worse"
        # is judged against them; in stages 2 and 4 the tuning / ablation nodes are in the tried
        # tables, not in siblings. Stage-level and growing (a later node's table extends an
        # earlier one's), so before the node's own program and output (the prefix cache)
        *_JUDGED,
        "prior_code",
        "run_output",
        "run_result",
        "node_brief",
    ],
    # a working node's plotting code (reads the data files its experiment saved) and its critique
    # by the vision model (the figures travel as image parts in the user message; the machine for a
    # benchmark, as in the review)
    # (the parent's plotting script, the same for siblings, before the node's own code and data;
    # the program itself only when no line of it names a data file: phases/plots.py). Both figure
    # calls get the stage's protocol (which configuration is the headline, the seed noise) and,
    # for a benchmark, the machine (the idea relates figures to its caches: relay s7 mm2)
    "node_plot": [
        "system",
        "environment",
        "task",
        *_TAIL,
        "evaluation_protocol",
        "parent_plot_script",
        "prior_code",
        "data_files",
        "run_result",
        "node_brief",
    ],
    "node_vlm": [
        "system",
        "environment",
        "task",
        *_TAIL,
        "evaluation_protocol",
        "run_result",
        *_JUDGED,
        "node_brief",
    ],
    # fallback: read the metrics from the run output when metrics.json is missing
    "metrics_parse": ["system", "task", *_TAIL, "execution_output", "node_brief"],
    # LLM tie-break between candidate nodes
    "select_tiebreak": ["system", "task", *_TAIL, "candidates", "node_brief"],
    # propose the next hyper-parameter / ablation idea
    "propose_idea": [
        "system",
        "task",
        *_TAIL,
        "stage_summary",
        "evaluation_protocol",
        "memory",
        "ablation_plan",
        "tried_hyperparams",
        "tried_ablations",
        "user_note",
        "node_brief",
    ],
    # the summary role at a stage's end: what was tried, what worked (stage_summaries/stageN.json)
    "stage_summary": ["system", "task", *_TAIL, "stage_summary", "stage_facts", "node_brief"],
    # ideation: draft / search / refine one research idea from a topic (``ai-scientist ideate``);
    # the ideas already proposed sit next to the instruction that refers to them
    "ideation": ["system", "topic", "previous_ideas", *_TAIL, "idea_draft", "literature"],
    # the paper review (reporting/review.py): a reviewer's first review (with the few-shot examples),
    # its reflection rounds, the area chair's meta-review; the paper is the shared prefix
    **_REVIEW,
}

# The node-centred order: a node's review and its plotting call, made one after the other, both
# re-send the node's program. When the program is long (NODE_FIRST_MIN_TOKENS, counted as the
# prompt renders it), both open with the same bytes — the system message (the persona alone), the
# idea, the program — and a provider's prefix cache serves the program to the plotting call; their
# own instructions, formats, tables and briefs follow it (a benchmark review's machine facts too,
# in the user message). A shorter program (a child's diff, a small script) keeps the stable-first
# order above: there the instructions and the stage's tables, which every review or plotting call
# shares, are worth more than the program. bench/prompt_cache.py --workload realistic (~5k-token
# programs, distinct per draft as a real run's are): cacheable 55.5 -> 63.4 %, plotting 22.7 ->
# 88.8 %; the example and trivial workloads (programs under 800 tokens) are unchanged.
NODE_FIRST_MIN_TOKENS = 2000
NODE_FIRST: dict[str, list[str]] = {
    "exec_review": [
        "system",
        "task",
        "prior_code",
        "run_output",
        "run_result",
        *_TAIL,
        "environment",
        "evaluation_protocol",
        *_JUDGED,
        "node_brief",
    ],
    "node_plot": [
        "system",
        "task",
        "prior_code",
        "data_files",
        "run_result",
        *_TAIL,
        "environment",
        "evaluation_protocol",
        "parent_plot_script",
        "node_brief",
    ],
}
# layers a node-centred prompt moves from the system message to the user message (after the
# program), so that the review's and the plotting call's system messages are the same bytes
_NODE_FIRST_USER = {"environment"}


def node_first(prompt_name: str, layers: list[Layer], program_tokens: int) -> list[Layer]:
    """``layers`` (of ``prompt_name``, as configured) in the node-centred order when the prompt has
    one and the program takes ``NODE_FIRST_MIN_TOKENS`` or more; else ``layers`` unchanged."""
    order = NODE_FIRST.get(prompt_name)
    if order is None or program_tokens < NODE_FIRST_MIN_TOKENS or _layout != "stable_first":
        return layers
    by_name = {x.name: x for x in layers}
    if set(by_name) != set(order):
        raise ValueError(f"NODE_FIRST[{prompt_name!r}] lists other layers than PROMPTS[{prompt_name!r}]")
    return [replace(by_name[n], role="user") if n in _NODE_FIRST_USER else by_name[n] for n in order]


# What a call is for decides which of its layers are protected: one layer's settings in one prompt,
# over the catalogue's (a ``context.layers.<name>`` config entry still applies on top of both).
PROMPT_LAYERS: dict[str, dict[str, dict[str, Any]]] = {
    # a review judges the output: the program (head and tail kept) is cut before the output's tail
    "exec_review": {"prior_code": {"priority": 30, "min_tokens": 200}},
    # plotting reads the data files: the program that wrote them is cut before their names
    "node_plot": {"prior_code": {"priority": 30, "min_tokens": 200}},
    # reading the metrics from stdout (a string): its last lines hold the results
    "metrics_parse": {"execution_output": {"priority": 90, "policy": "tail", "min_tokens": 300}},
}

# The layout before issue 14, kept so bench/prompt_cache.py measures its baseline in the same run
# (``use_layout("legacy")``): memory and the resource index in the system message, the volatile
# layers between the idea and the instructions, the node's own lines at the head of the
# instructions, the full response schema in the text. Not for production use.
_LEGACY_BASE = ["system", "domain", "environment", "memory", "resource_index"]
_LEGACY_TAIL = ["node_brief", "instructions", "response_format"]
_LEGACY_PROMPTS: dict[str, list[str]] = {
    # (layers added since, e.g. stage_summary and parent_error, sit among the stage inputs)
    "phase0_plan": [
        *_LEGACY_BASE,
        "task",
        "seed_code",
        "stage_summary",
        "stage_goal",
        "history",
        "prior_outputs",
        "siblings",
        *_LEGACY_TAIL,
    ],
    "phase1_install": [*_LEGACY_BASE, "task", "plan_snippet", "history", "install_steps", *_LEGACY_TAIL],
    "phase234_code": [
        *_LEGACY_BASE,
        "task",
        "stage_summary",
        "stage_goal",
        "plan_snippet",
        "history",
        "seed_code",
        "prior_code",
        "execution_output",
        "parent_error",
        "plot_feedback",
        "time_feedback",
        "tried_hyperparams",
        "ablation_plan",
        "tried_ablations",
        "siblings",
        *_LEGACY_TAIL,
    ],  # fmt: skip
    "exec_review": ["system", "task", "prior_code", "run_output", "run_result", *_LEGACY_TAIL],
    "node_plot": ["system", "task", "prior_code", "data_files", "run_result", *_LEGACY_TAIL],
    "node_vlm": ["system", "task", "run_result", *_LEGACY_TAIL],
    "metrics_parse": ["system", "task", "execution_output", *_LEGACY_TAIL],
    "select_tiebreak": ["system", "task", "candidates", *_LEGACY_TAIL],
    "propose_idea": [
        "system",
        "task",
        "memory",
        "stage_summary",
        "tried_hyperparams",
        "ablation_plan",
        "tried_ablations",
        *_LEGACY_TAIL,
    ],  # fmt: skip
    "stage_summary": ["system", "task", "stage_summary", "stage_facts", *_LEGACY_TAIL],
    "ideation": ["system", "topic", "previous_ideas", "idea_draft", "literature", *_TAIL],
    **_REVIEW,  # (built ad hoc before issue 14: their layout is new)
}
_LEGACY_ROLES = {"memory": "system", "resource_index": "system"}
_layout = "stable_first"


def use_layout(name: str) -> str:
    """Select the layer layout ("stable_first", the default, or "legacy"); returns the previous one.

    Process-wide; only the prompt-cache benchmark switches it (to measure its baseline).
    """
    global _layout
    if name not in ("stable_first", "legacy"):
        raise ValueError(f"unknown layout {name!r}; one of stable_first, legacy")
    previous, _layout = _layout, name
    return previous


def layout() -> str:
    """The layer layout in use ("stable_first" unless the benchmark switched it)."""
    return _layout


def layers_for(prompt_name: str) -> list[Layer]:
    """The layers of ``prompt_name`` in message order (a clear error lists the known prompts)."""
    table = _LEGACY_PROMPTS if _layout == "legacy" else PROMPTS
    try:
        names = table[prompt_name]
    except KeyError:
        raise KeyError(f"unknown prompt {prompt_name!r}; known: {', '.join(sorted(PROMPTS))}") from None
    own = PROMPT_LAYERS.get(prompt_name, {})
    layers = [replace(LAYERS[n], **own[n]) if n in own else LAYERS[n] for n in names]
    if _layout == "legacy":
        return [replace(x, role=_LEGACY_ROLES.get(x.name, x.role)) for x in layers]  # type: ignore[arg-type]
    return layers
