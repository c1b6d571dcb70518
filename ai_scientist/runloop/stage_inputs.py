"""What the stage shows one node besides its parent: the stage's own results so far.

* every node of stage 2-4: ``stage_summary`` (the summaries of the stages before it);
* every node scheduled once its stage's first working node fixed the evaluation protocol:
  ``evaluation_protocol`` (:mod:`.protocol`), which it must keep to be ranked; a later draft, which
  writes its program from nothing, also gets that node's code to copy the data and evaluation from
  (the parameters' values alone do not say how the data were generated);
* stage 2 (tuning): ``tried_hyperparams``, the settings tried in the stage with their results;
* stage 4 (ablations): ``ablation_plan`` (the planned ablations, each marked done / running /
  this node / to do, with how many nodes the stage may still create) and ``tried_ablations`` with
  their results;
* every node: ``siblings``, what the other nodes of its stage did and scored (the same parent's
  children first: a second draft sees the first, running or finished), shown in its brief.

:func:`proposal_inputs` is the same for the idea proposer (a run-level call): the node to grow,
all its metrics and the parameters its code exposes, the stage's tables, and the stage's budget.

The tables are ranked best first (:mod:`..treesearch.tried`), so their layers' ``head_rows``
policy cuts the worst rows first and the prompt's ledger records the cut. The values are
computed once, when the node is first scheduled, and frozen in ``nodes/<id>/stage_inputs.json``:
a node resumed after a crash sees the same tables as before it (its siblings may have finished
in between), so its prompts, and a replay of the run, stay the same.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Any

from ..base.artifacts import Plan, RunRecord, read_artifact
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import PLAN_FILE, RUN_FILE, STAGE_INPUTS_FILE, RunPaths
from ..context.kinds import experiment_kinds
from ..phases.base import answer_commands, parent_history
from ..phases.edits import text_files
from ..treesearch.components import components
from ..treesearch.parameters import (
    Parameter,
    argv_values,
    build_parameters,
    code_parameters,
    headline_fixes,
    machine_sizes,
    parameters,
    timed_commands,
)
from ..treesearch.seeds import (
    aggregate_seeds,
    basis_text,
    concurrency_text,
    differences_line,
    distinct_digits,
    noise_notes,
    noise_threshold,
    paired_differences,
    seed_draw,
    seed_noise,
    seed_plan,
)
from ..treesearch.tried import (
    ablation_plan,
    design_text,
    metrics_text,
    ordered_metrics,
    sentences,
    sibling_table,
    tried_table,
    untried,
)
from .protocol import (
    data_constants,
    distinct_seed_groups,
    headline_config,
    is_protocol_parameter,
    node_answer,
)
from .stage_facts import SEARCH_RUN_APART
from .stage_summary import summaries_text

# a later draft's copy of the protocol node's code (the data generation and evaluation to reuse)
REFERENCE_CODE_CHARS = 24000  # a later draft copies its data and evaluation code "as it is": whole where the budget allows (the layer is cut by its policy, marked, under a small one)
# the best node's metrics in the proposer's brief: whole items (all a grid's and ablations' cells)
BEST_METRICS_CHARS = 1200
IDEA_ABLATION_CHARS = 600
# an improve node's best sibling is shown as its diff to the node's parent when the diff is at most
# this share of its program (a few changed lines), else whole
SIBLING_DIFF_SHARE = 0.5

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..base.run import Run
    from ..treesearch.journal import JournalView
    from ..treesearch.node import Node
    from ..treesearch.stages import StageState


def compute_stage_inputs(run: Run, view: JournalView, node: Node, state: StageState | None) -> dict[str, Any]:
    """The stage-input values for ``node`` from the journal as it is now (empty ones left out)."""
    values: dict[str, Any] = {"stage_summary": summaries_text(run.dir, before=node.stage)}
    values["evaluation_protocol"] = with_noise(run, view, protocol_value(state, node.stage), node.stage)
    protocol = values["evaluation_protocol"]
    if protocol and node.operation == "draft" and protocol.get("node_id") != node.id:
        code = reference_code(text_files(node_answer(run.dir, str(protocol["node_id"]))))
        values["evaluation_protocol"] = {**protocol, "reference_code": code} if code else protocol
    carried_id = state.carried_id if state is not None and state.stage == node.stage else None
    carried = view.get(carried_id) if carried_id and carried_id in view else None
    if node.stage == 2:
        values["tried_hyperparams"] = tried_table(
            view,
            2,
            column="setting",
            exclude=node.id,
            carried=carried,
            noise=(protocol or {}).get("seed_noise"),
            loads=timing_loads(run, view, node.stage, protocol, carried),
        )
    elif node.stage == 4:
        planned = state.ideas if state is not None and state.stage == 4 else ()
        # the nodes the stage may create after this one (the view may or may not hold it yet)
        left = max(0, iterations_left(run, view, 4, exclude=node.id) - 1)
        values["ablation_plan"] = ablation_plan(view, 4, planned, current=node.idea, iterations_left=left)
        values["tried_ablations"] = tried_table(
            view,
            4,
            column="ablation",
            exclude=node.id,
            carried=carried,
            noise=(protocol or {}).get("seed_noise"),
            loads=timing_loads(run, view, 4, protocol, carried),
        )
    # a child's plotting call reuses the best working plotting script: its parent's, else the
    # stage's latest that worked (phases/plots.py), chosen now so a resume or replay shows the same
    from ..phases.plots import working_plot_source

    values["plot_script_node"] = working_plot_source(run.dir, view.nodes, node)
    parent = view.get(node.parent_id) if node.parent_id and node.parent_id in view else None
    if node.operation in ("tune", "ablate") and parent is not None:
        # each tuning or ablation changes one thing of the stage's base node: a relay run's tune
        # could not tell whether its sibling's change was already in its parent's code (015)
        others = [
            i for i in view.ids("idea", node.stage) if i != node.id and view.get(i).parent_id == parent.id
        ]
        values["base_node"] = {"id": parent.id, "others": others}
        if node.operation == "ablate" and parent.metric is not None:
            # the protocol says what the headline measures for a tuning and a replacement, not for
            # an ablation (relay s6 mm2 030): the ablated configuration; the base node's is the
            # baseline, its value said here
            m = parent.metric
            values["base_node"]["headline"] = {
                "metric": m.name,
                "value": f"{m.name}={m.value:.6g}" + _seed_mean(view, parent, why=False),
            }
    if node.operation in ("tune", "improve", "ablate") and parent is not None and protocol:
        # the parent's history with the protocol node's headline sentence referred to the
        # protocol's line, which says it (relay s7 ln2 011, 018, 028: said twice a prompt)
        history = parent_history(run.dir, parent)
        if (shorter := without_headline(history, protocol, str(protocol.get("node_id")))) != history:
            values["history"] = shorter
    if node.operation == "ablate" and parent is not None:
        # its plotting call reads this node's files only: the baseline's values to draw beside it
        values["parent_baseline"] = baseline_text(view, parent)
    if node.operation == "improve":  # told to build on what scored well: the code that did
        values["sibling_code"] = best_sibling_code(run, view, node)
    if node.operation == "improve" and node.stage == 3 and not node.idea:
        # the research proposal failed or offered nothing new (run_calls.py): its brief says whose
        # the direction is and what the stage's other nodes set out to do (relay s6 mm2 020, 024)
        values["direction"] = {"taken": _taken(run, view, node)}
    # the siblings layer, just before the node's brief (rows grow call by call)
    # a draft sees each earlier finished draft's design (its plan's goal and strategy): taking a
    # "clearly different approach" needs more than a metric and a finding
    designs = _designs(run, view, node) if node.operation == "draft" else None
    values["siblings"] = sibling_table(
        view, node.stage, node_id=node.id, parent_id=node.parent_id, designs=designs
    )
    return {k: v for k, v in values.items() if v}


# the parent's metrics an ablation's plotting call is given: all a figure may compare with (a relay
# run's cut after 6 of 18 dropped the grid values the ablation's comparison needed: s7 ln2 030)
BASELINE_METRICS = 40


def baseline_text(view: JournalView, parent: Node, limit: int = BASELINE_METRICS) -> str:
    """An ablation's baseline as its plotting call needs it: the parent's primary metric and its
    next few metrics (``name=value``, whole; "+N more" counted), and its seed re-runs' mean when it
    has them; "" without a metric. The plotting script reads this node's files only: a relay run's
    ablation plot could not show baseline against ablation (requests 028, 029)."""
    metrics = list(parent.metrics) or ([parent.metric] if parent.metric is not None else [])
    if parent.metric is not None:
        metrics = [parent.metric, *(m for m in metrics if m.key != parent.metric.key)]
    if not metrics:
        return ""
    shown = "; ".join(
        f"{m.name}={m.value:.6g}" + (f" ({m.dataset})" if m.dataset else "") for m in metrics[:limit]
    )
    more = f"; +{len(metrics) - limit} more" if len(metrics) > limit else ""
    out = f"{shown}{more} (its search run)"
    m = parent.metric
    same = [
        r.metric.value
        for r in view.seed_runs(parent.id)
        if m is not None
        and r.is_good
        and r.metric is not None
        and r.metric.key == m.key
        and r.metric.is_valid
    ]
    if m is not None and same:
        mean = sum(same) / len(same)
        runs = "re-run" if len(same) == 1 else "re-runs"
        out += f"; {m.name} over its {len(same)} seed {runs}: mean {mean:.6g} (values {', '.join(f'{v:.6g}' for v in same)})"
    return out


def protocol_value(state: StageState | None, stage: int) -> dict[str, Any] | None:
    """The ``evaluation_protocol`` layer's value: the protocol ``stage``'s first working node fixed
    (:mod:`.protocol`), None before one has (a stage's first drafts)."""
    if state is None or state.stage != stage or not state.protocol:
        return None
    if state.carried_id and state.protocol.get("node_id") == state.carried_id:
        # stages 2-4: the node the stage starts from, not a "first working node" of its own
        return {**state.protocol, "carried": True}
    return state.protocol


def with_noise(
    run: Run, view: JournalView, protocol: dict[str, Any] | None, stage: int
) -> dict[str, Any] | None:
    """``protocol`` with ``seed_noise``: the seed noise of its metric as the seed re-ranking
    estimates it (:mod:`..treesearch.seeds`: pooled within-node standard deviation over the good
    seed re-runs, and the band ``noise_z * sigma * sqrt 2`` within which two single-seed results
    are a tie) — the reviewers, tuners and ablation writers who judge a difference need it (a relay
    run's saw none and ranked 0.001 gains inside a 0.012 band). Over the distinct re-runs of the
    stages before ``stage`` (:func:`.protocol.distinct_seed_groups`): one figure for every call of
    the stage, no repeated draw counted twice. Unchanged without a metric or before any node has
    two distinct re-runs."""
    from .early_seeds import concurrency

    if not protocol:
        return protocol
    metric = protocol.get("metric")
    # what kind of experiment fixed it (context/kinds.py): a benchmark's protocol is its inputs and
    # problem sizes, no dataset to split or label noise (the layer says it in those words)
    protocol = {**protocol, "kinds": experiment_kinds([metric[0]] if metric else [], run.idea.to_markdown())}
    # whether its program reads the SEED the pipeline sets (a program that does not repeats the
    # same draw in every re-run: the layer says so instead of "each seed is a new dataset")
    files = text_files(node_answer(run.dir, str(protocol.get("node_id") or "")))
    if files:
        protocol["reads_seed"] = any(p.kind == "environment" and p.name == "SEED" for p in parameters(files))
    # which configuration of a grid its headline value is for (its review's answer): later nodes
    # report theirs for the same one (relay run s6: the protocol named only the metric)
    ref_id = str(protocol.get("node_id") or "")
    config = headline_config(run.dir, ref_id) if ref_id else ""
    if config:
        ref = view.get(ref_id) if ref_id in view else None
        m = ref.metric if ref is not None else None
        protocol["headline"] = {
            "config": config,
            "value": f"{m.name}={m.value:.6g}" if m is not None else "",
        }
    # the SEEDs every node is run with: one SEED is the same data for every node keeping the data code
    protocol["seeds"] = {
        "search": run.cfg.agent.seed,
        "reruns": seed_plan(run.cfg.agent.seed, run.cfg.agent.multi_seed_eval.num_seeds),
    }
    if not metric:
        return protocol
    key = (str(metric[0]), str(metric[1]), None if metric[2] is None else str(metric[2]))
    groups = distinct_seed_groups(run.dir, view.nodes, key, before_stage=stage)
    noise = seed_noise(groups)
    if noise.sigma is None:
        return protocol
    z = run.cfg.agent.multi_seed_eval.noise_z
    pooled = sorted(k for k, v in groups.items() if len(v) >= 2)
    # what one SEED draws, when a metric the methods share shows it (relay s9 ln2 009-041: the
    # band's sigma was dataset variation, said only as "where the data are drawn from SEED")
    draw = (
        seed_draw([n for n in view.nodes if n.stage < stage], key, run.cfg.agent.seed)
        if protocol.get("reads_seed") is not False
        else None
    )
    kinds = protocol.get("kinds") or []
    what = "data" if not kinds or "training" in kinds else "inputs"
    return {
        **protocol,
        "seed_noise": {
            "metric": key[0],
            "sigma": noise.sigma,
            "dof": noise.dof,
            "nodes": pooled,
            # what it rests on, said wherever the band is (relay s8 mm2 009-019: a band from two
            # re-runs that happened to agree called ties)
            "basis": basis_text(groups),
            "z": z,
            "band": noise_threshold(noise.sigma, z),
            **({"draw": draw.text(what)} if draw is not None else {}),
            # the node driving sigma, a band too wide to rank, whether the re-runs shared the machine
            # (relay s6 mm 009, 019, 028: a 70.77 band beside a mean of 60.08, a sigma 99% one node)
            **noise_notes(groups, noise_threshold(noise.sigma, z), ref_id),
            "concurrency": concurrency_text(
                concurrency(
                    run.dir, run.cfg.agent.num_workers, {r.id for g in groups for r in view.seed_runs(g)}
                )
            ),
        },
    }


def timing_loads(
    run: Run, view: JournalView, stage: int, protocol: dict[str, Any] | None, carried: Node | None
) -> dict[str, dict[str, Any]]:
    """Node id -> the machine's load during its run commands (``low``, ``high``, ``others``:
    :func:`..phases.evidence.load_summary`) for the stage's idea nodes and ``carried``, and
    ``cores`` -> ``{"count": ...}``: the tried tables' ranking of a timing headline says them
    (:func:`..treesearch.tried.load_note`; relay s8 mm2 012-016, mm1: timings ranked across runs
    under different loads). {} unless the protocol's headline is a timing (a benchmark kind,
    :mod:`..context.kinds`)."""
    from ..phases.evidence import load_summary

    if "benchmark" not in ((protocol or {}).get("kinds") or []):
        return {}
    out: dict[str, dict[str, Any]] = {}
    ids = [*view.ids("idea", stage), *([carried.id] if carried is not None else [])]
    for nid in dict.fromkeys(ids):
        record = read_artifact(RunPaths(run.dir).node(nid).file(RUN_FILE), RunRecord)
        load = load_summary(record.outputs) if record is not None else None
        if load is None:
            continue
        out[nid] = {"low": float(load["low"]), "high": float(load["high"]), "others": load.get("others")}
        if load.get("cores"):
            out["cores"] = {"count": load["cores"]}
    return out


def best_sibling_code(run: Run, view: JournalView, node: Node) -> dict[str, Any] | None:
    """The program of the best finished working node of ``node``'s stage (comparable, ranked as
    the stage ranks): as its diff to ``node``'s parent's program when that is much shorter, else
    whole (at most :data:`REFERENCE_CODE_CHARS`). An improve node is told to build on what scored
    well; a relay run's saw only the sibling's review and had to rewrite its changes. None when no
    other node has finished working; a running one is left out (a replay must see the same)."""
    from ..treesearch.best import rank_nodes

    done = [
        n
        for i in view.ids("search", node.stage)
        if i not in (node.id, node.parent_id)  # the parent's program is the node's own start
        and (n := view.get(i)).is_finished
        and n.is_good
        and not n.is_incomparable
        and n.metric is not None
    ]
    if not done:
        return None
    best = rank_nodes(done)[0]
    files = text_files(node_answer(run.dir, best.id))
    if not files:
        return None
    value: dict[str, Any] = {"node_id": best.id, "result": metrics_text(best, limit=BEST_METRICS_CHARS)}
    before = text_files(node_answer(run.dir, node.parent_id)) if node.parent_id else {}
    if before:
        diff = "\n".join(
            line
            for path in dict.fromkeys([*before, *files])
            for line in difflib.unified_diff(
                before.get(path, "").splitlines(),
                files.get(path, "").splitlines(),
                f"{node.parent_id}/{path}",
                f"{best.id}/{path}",
                n=2,
                lineterm="",
            )
        )
        if not diff:
            return {**value, "same_as": node.parent_id}
        if len(diff) <= SIBLING_DIFF_SHARE * sum(len(t) for t in files.values()):
            return {**value, "diff_of": node.parent_id, "code": diff}
    return {**value, "code": reference_code(files)}


def reference_code(files: dict[str, str], limit: int = REFERENCE_CODE_CHARS) -> str:
    """``files`` (path -> text) as fenced blocks, first files first, at most ``limit`` characters of
    content; what does not fit is named with its size, never cut silently."""
    parts, left = [], limit
    for path, text in files.items():
        if left <= 0:
            parts.append(f"[{path}: {len(text)} characters not shown]")
            continue
        shown = text if len(text) <= left else text[:left]
        more = (
            f"\n[... {len(text) - len(shown)} more characters of {path} not shown ...]"
            if shown != text
            else ""
        )
        parts.append(f"{path}:\n```\n{shown.rstrip()}\n```{more}")
        left -= len(shown)
    return "\n".join(parts)


def _plan_of(run: Run, node_id: str) -> dict[str, Any] | None:
    """The node's plan (``plan.json``, or the code answer that carried it), None without one."""
    plan = read_artifact(RunPaths(run.dir).node(node_id).file(PLAN_FILE), Plan)
    if plan is not None and plan.goal_summary:
        return plan.to_json()
    answer = node_answer(run.dir, node_id)
    return answer.to_json() if answer is not None else None


def _designs(run: Run, view: JournalView, node: Node) -> dict[str, str]:
    """The design line of every finished node of ``node``'s stage (its ``plan.json``, or the code
    answer that carried the plan): a running node's plan is left out — it appears at a moment that
    depends on timing, and a replay must see the same table."""
    out: dict[str, str] = {}
    for nid in view.ids("search", node.stage):
        other = view.get(nid)
        if nid == node.id or not other.is_finished:
            continue
        line = design_text(_plan_of(run, nid))
        if line:
            out[nid] = line
    return out


TAKEN_CHARS = 300  # a stage-3 sibling's goal, cut at a sentence end


def _taken(run: Run, view: JournalView, node: Node) -> list[str]:
    """What each other draft or improve node of ``node``'s stage set out to do: "n0013: <its plan's
    goal>" for a finished one, "n0014: running, its plan not known yet" otherwise (a running node's
    plan appears at a moment that depends on timing: a replay must see the same brief)."""

    out: list[str] = []
    for nid in view.ids("search", node.stage):
        other = view.get(nid)
        if nid == node.id or other.operation not in ("draft", "improve"):
            continue
        if not other.is_finished:
            out.append(f"{nid}: running, its plan not known yet")
            continue
        plan = _plan_of(run, nid) or {}
        goal = sentences(str(plan.get("goal_summary") or ""), TAKEN_CHARS)
        out.append(f"{nid}: {goal}" if goal else f"{nid}: (no plan recorded)")
    return out


def iterations_left(run: Run, view: JournalView, stage: int, exclude: str | None = None) -> int:
    """How many more search nodes stage ``stage`` may create (``agent.stages.stageN_max_iters``
    minus the nodes it has, ``exclude`` not counted)."""
    cap = getattr(run.cfg.agent.stages, f"stage{stage}_max_iters")
    return max(0, cap - len([i for i in view.ids("search", stage) if i != exclude]))


def proposal_inputs(
    run: Run, view: JournalView, state: StageState, parent: Node, kind: str
) -> dict[str, Any]:
    """The values of the ``propose_idea`` prompt asking for ``kind`` (tune / research / ablate)
    ideas to apply to ``parent``, on ``view``: the node to grow with all its metrics and the parameters its
    code exposes (read from its files: options, environment variables, named constants), what the
    stage tried (any node of it) and the earlier stages' summaries, how many planned ideas are not
    yet run and how many nodes the stage may still create."""
    carried = view.get(state.carried_id) if state.carried_id and state.carried_id in view else None
    protocol = with_noise(run, view, protocol_value(state, state.stage), state.stage)
    table = tried_table(
        view,
        state.stage,
        column="setting" if kind == "tune" else "ablation",
        carried=carried,
        noise=(protocol or {}).get("seed_noise"),
        loads=timing_loads(run, view, state.stage, protocol, carried),
    )
    code = node_answer(run.dir, parent.id)
    answer = code.to_json() if code is not None else None  # as saved: its build goes to build_parameters
    summaries = summaries_text(run.dir, before=state.stage)
    # why a seed mean leaves the search run out is said once, before the brief's best-node line:
    # by the earlier stages' headings or the protocol's seeds line, when the prompt has them
    said_why = SEARCH_RUN_APART in summaries or bool(
        protocol and protocol.get("seeds") and protocol.get("reads_seed") is not False
    )
    fixes = _fixed_note(protocol, parent, answer_commands(answer), text_files(answer))

    def knobs(fixed: bool) -> list[str]:
        return code_parameters(
            text_files(answer),
            note=fixes,
            fixed=fixed,
            build=answer.get("build") if isinstance(answer, dict) else None,
            # no knobs: the machine's cache sizes, the metric's dataset label (relay s6 mm 010)
            machine=machine_sizes(read_json(RunPaths(run.dir).environment, default=None)),
            labels={str(m.dataset) for m in parent.metrics if m.dataset},
            commands=answer_commands(answer),
        )

    # the node's within-run paired differences with their spread over its re-runs (relay s8 ln3
    # 009, 015, 025): a proposal judging whether its paired gain held needs more than the headline's
    paired = differences_line(
        [
            (
                parent.id,
                paired_differences(
                    view.seed_runs(parent.id), parent.metric.key if parent.metric else None, parent
                ),
            )
        ]
    )
    values: dict[str, Any] = {
        "kind": kind,
        # the stage's number and goal, one line (phases/stage_goal.j2 via the brief): the proposer
        # judged "what is informative" without knowing what the stage is for (relay run s4)
        "stage": state.stage,
        # training, benchmark or simulation (context/kinds.py): what "the protocol" is made of
        "kinds": experiment_kinds([m.name for m in parent.metrics], run.idea.to_markdown()),
        # each fact once (relay s7 ln2 010, 016, 027: the best node's metrics three times): its
        # headline configuration is the protocol's line; its metrics are listed here, but for
        # those an ablation brief's "Already measured" line gives (below)
        "best_summary": f"{parent.id}: {without_headline(parent.summary, protocol, parent.id)}"
        + f" ({metrics_text(parent, limit=BEST_METRICS_CHARS)})"
        + _seed_mean(view, parent, why=not said_why)
        + (f". {paired}" if paired else ""),
        # its plan's goal and strategy: the components an ablation can remove (relay run 2's
        # ablation proposer saw only the review's words for them)
        "best_design": design_text(_plan_of(run, parent.id)),
        # the data / split / size / noise / seed knobs are marked: a tuning or an ablation that
        # changes one makes its node incomparable (a relay run's proposer could not tell them apart)
        # and the build's compile flags (a C benchmark's knobs are often there)
        # what an idea may change; what the protocol or the headline fixes is listed apart, not
        # offered (relay s7 mm2 010, 011: the size arguments and the swept tile grid as knobs)
        "code_parameters": knobs(False),
        "fixed_parameters": knobs(True),
        # its build and run commands: what a command-line argument (argv[1], $2) stands for
        "commands": answer_commands(answer),
        "iterations_left": iterations_left(run, view, state.stage),
        "planned_left": len(untried(view, state.stage, state.ideas)),
        ("tried_hyperparams" if kind == "tune" else "tried_ablations"): table,
        "ablation_plan": ablation_plan(view, state.stage, state.ideas) if kind == "ablate" else [],
        "stage_summary": summaries,
        "evaluation_protocol": protocol,
        # the stage's nodes the tried table does not list (debug children, improve nodes)
        "siblings": "\n".join(sibling_table(view, state.stage, parent_id=parent.id)),
    }
    if kind == "research":
        # what was measured: a research idea is what no node of the run measured yet (relay s6 mm2
        # 020, 024: two stage-3 nodes re-ran the same study)
        values["research_measured"] = research_measured(run, view, state)
        # what an extra, larger size costs (relay s9 mm 020, 021): each run line's measured time
        # and the per-command limit
        record = read_artifact(RunPaths(run.dir).node(parent.id).file(RUN_FILE), RunRecord)
        took = [(o.command, o.duration_s) for o in record.outputs] if record is not None else []
        values["commands"] = timed_commands(values["commands"], took)
        values["command_timeout_s"] = run.cfg.exec.timeout if took else None
        best = values["research_measured"].get("best")
        if best and best["id"] == parent.id:  # its metrics are on the best-node line: named once
            best["metrics"], best["listed_below"] = [], True
    if kind == "ablate":
        # what the idea asks to ablate, and what the best node's own metrics already measure: a
        # proposer that cannot see both re-proposes ablations already done
        values["idea_ablations"] = idea_ablations(run.idea)
        values["measured_ablations"] = measured_ablations(
            parent, read_artifact(RunPaths(run.dir).node(parent.id).file(RUN_FILE), RunRecord), answer
        )
        values["measured_by_others"] = measured_by_others(run, view, parent, state.stage)
        listed = [
            x.split("=", 1)[0]
            for x in _measured_items(values["measured_ablations"])
            if "=" in x and not x.startswith("its output: ")
        ]
        if listed:  # those metrics are said with their values on the "Already measured" line
            others = metrics_text(parent, limit=BEST_METRICS_CHARS, skip=set(listed))
            values["best_summary"] = (
                f"{parent.id}: {without_headline(parent.summary, protocol, parent.id)} ({others}; its "
                f"{len(listed)} ablation metric(s): above)"
                + _seed_mean(view, parent, why=not said_why)
                + (f". {paired}" if paired else "")
            )
        shown = f"{values['best_summary']}\n{values['measured_ablations']}"
        values["components"] = ablation_inventory(parent, answer, shown)
    return values


HEADLINE_SAID = '(its headline configuration: under "Evaluation protocol")'


def without_headline(text: str, protocol: dict[str, Any] | None, node_id: str) -> str:
    """``text`` (a node's summary, or a state holding it) with ``node_id``'s "Headline: <metric>
    is for <config>." sentence (phases/review.py headline) referred to the protocol's headline
    configuration line when ``protocol`` shows that node's: the same sentence twice in one prompt
    (relay s7 ln2 011, 027)."""
    head = (protocol or {}).get("headline") or {}
    if not head.get("config") or (protocol or {}).get("node_id") != node_id:
        return text
    said = re.compile(r"Headline: \S+ is for " + re.escape(str(head["config"])) + r"\.(?:\s+|$)")
    return said.sub(HEADLINE_SAID + " ", text, count=1).rstrip()


def research_measured(run: Run, view: JournalView, state: StageState) -> dict[str, Any]:
    """What a research proposal must not propose again: the metric names the stage's best node
    so far reports (``best``: its id, ``metrics``) and, one line each, what every search node of
    the stage set out to do (``goals``: its idea, if it had one, and its plan's goal; a running
    node's plan appears at a moment that depends on timing, so it shows its idea only)."""

    out: dict[str, Any] = {}
    choice = view.best_choice(state.stage, state.carried_id if state.carried_id in view else None)
    shown: set[tuple[str, str]] = set()
    if choice.node_id is not None:
        best = view.get(choice.node_id)
        out["best"] = {"id": best.id, "metrics": list(dict.fromkeys(m.name for m in best.metrics))}
        shown = {(m.name, m.dataset or "") for m in best.metrics}
    out["elsewhere"] = measured_elsewhere(view, state.stage, shown, skip=choice.node_id)
    goals = []
    for nid in view.ids("search", state.stage):
        node = view.get(nid)
        what = node.operation + (f" of {node.parent_id}" if node.parent_id else "")
        if node.idea:
            what += f"; idea: {node.idea}"
        if not node.is_finished:
            goals.append(f"{nid} ({what}): running")
            continue
        goal = sentences(str((_plan_of(run, nid) or {}).get("goal_summary") or ""), TAKEN_CHARS)
        goals.append(f"{nid} ({what}): {goal or '(no plan recorded)'}")
    out["goals"] = goals
    return out


# characters of one node's line in "measured elsewhere" (a grid's 40 cells stay readable)
ELSEWHERE_CHARS = 600


def measured_elsewhere(
    view: JournalView, stage: int, shown: set[tuple[str, str]], skip: str | None = None
) -> list[str]:
    """One line per good search node of stages 1..``stage`` (but ``skip``, the best) with the
    metrics it measured that ``shown`` (the best's (name, dataset label) pairs) does not hold, by
    dataset label: ``n0002 (stage 1): [synthetic_noise0.4] val_accuracy_l2_0.0, ...``. A relay
    run's stage-3 proposer had a sibling's extra noise conditions only in a stage-1 summary's
    prose (relay s8 ln2 016, 022) and proposed them again."""
    out: list[str] = []
    for s in range(1, stage + 1):
        for nid in view.ids("search", s):
            node = view.get(nid)
            if nid == skip or not node.is_good:
                continue
            by_label: dict[str, list[str]] = {}
            for m in node.metrics:
                if (m.name, m.dataset or "") not in shown:
                    names = by_label.setdefault(m.dataset or "", [])
                    if m.name not in names:
                        names.append(m.name)
            if not by_label:
                continue
            parts, left = [], ELSEWHERE_CHARS
            total = sum(len(v) for v in by_label.values())
            said = 0
            for label, names in by_label.items():
                taken = []
                for name in names:
                    if len(name) + 2 > left:
                        break
                    taken.append(name)
                    left -= len(name) + 2
                if taken:
                    parts.append((f"[{label}] " if label else "") + ", ".join(taken))
                    said += len(taken)
            more = f" (+{total - said} more)" if total > said else ""
            out.append(f"{nid} (stage {s}): " + "; ".join(parts) + more)
    return out


def _seed_mean(view: JournalView, node: Node, why: bool = True) -> str:
    """ "; val_accuracy=0.918 is its search run; over its 2 seed re-runs (why the search run is left
    out): mean 0.9085" when the node was re-run over seeds: the stage chose it by that mean, not by
    the search run alone. ``why``: False when the prompt said it before (the protocol's seeds line)."""
    m = node.metric
    if m is None:
        return ""
    reruns = [
        r
        for r in view.seed_runs(node.id)
        if r.is_good and r.metric is not None and r.metric.key == m.key and r.metric.is_valid
    ]
    same = [r.metric for r in reruns if r.metric is not None]
    if not same:
        return ""
    agg = aggregate_seeds(same)
    runs = "re-run" if agg.n == 1 else "re-runs"
    d = distinct_digits([m.value, agg.mean])  # the two told apart where they differ past 4 digits
    # each re-run's value by SEED: a node compared with it seed by seed (the protocol's paired
    # comparison, an ablation against its base) needs them (relay s8 ln3 009, 015, 025)
    per_seed = ", ".join(
        f"SEED {r.seed} {r.metric.value:.{d}g}" if r.seed is not None else f"{r.metric.value:.{d}g}"
        for r in reruns
        if r.metric is not None
    )
    return (
        f"; {m.name}={m.value:.{d}g} is its search run; over its {agg.n} seed {runs}"
        + (f" ({SEARCH_RUN_APART})" if why else "")
        + f": mean {agg.mean:.{d}g} ({per_seed})"
    )


def _protocol_note(p: Parameter, data: frozenset[str] = frozenset()) -> str:
    # a loop's variable is no protocol parameter (runloop/protocol.py protocol_parameters)
    if p.kind not in ("argv", "grid") and is_protocol_parameter(p.name, data):
        return "evaluation protocol: keep"
    return ""


def _fixed_note(
    protocol: dict[str, Any] | None, node: Node, commands: list[str], files: dict[str, str]
) -> Callable[[Parameter], str]:
    """Why a parameter of ``node``'s code is fixed ("" when an idea may change it): the protocol's
    own parameters, and what the headline fixes (:func:`headline_fixes`: its problem-size arguments,
    the grid it takes its best over)."""
    metric = (protocol or {}).get("metric") or (
        [node.metric.name, node.metric.direction, node.metric.dataset] if node.metric is not None else []
    )
    headline = (str(metric[0]), str(metric[2] or "")) if metric else ("", "")
    config = str(((protocol or {}).get("headline") or {}).get("config") or "")
    data = data_constants(files)
    numbers = {
        float(w)
        for p in parameters(files)
        if p.kind in ("constant", "array", "grid") and is_protocol_parameter(p.name, data)
        for w in re.findall(r"-?\d+(?:\.\d+)?", p.value)
    }
    argv = argv_values(commands)

    def note(p: Parameter) -> str:
        return _protocol_note(p, data) or headline_fixes(
            p, argv=argv, headline=headline, config=config, protocol_numbers=numbers
        )

    return note


def idea_ablations(idea: Any, limit: int = IDEA_ABLATION_CHARS) -> str:
    """The research idea's own words on ablations: its lines that name one (any section), or a
    section titled so; whole lines, at most ``limit`` characters; "" when it names none."""
    lines: list[str] = []
    for head, body in (getattr(idea, "extra", None) or {}).items():
        if "ablat" in head.lower():
            lines += [ln.strip(" -*\t") for ln in str(body).splitlines() if ln.strip()]
    for section in (idea.experiments, idea.evaluation, idea.hypothesis):
        lines += [ln.strip(" -*\t") for ln in str(section or "").splitlines() if "ablat" in ln.lower()]
    shown: list[str] = []
    for line in dict.fromkeys(ln for ln in lines if ln):
        if len(" ".join([*shown, line])) > limit:
            break
        shown.append(line)
    return " ".join(shown)


# a metric name's word that says it measures a part removed or a control: "no_bias", "nobias",
# "nonative", "w/o", "without", "off", "ablation", "control", "noise_free"; "no..." words that are
# ordinary words are not ("noise", "norm", "node")
_ABLATION_WORDS = frozenset(
    "no non not without wo off disabled disable ablation ablated ablate ablations removed remove "
    "minus control free unregularised unregularized".split()
)
_NO_WORDS = frozenset(
    "noise noisy node nodes norm normal normed normalised normalized none nonzero north".split()
)
# a variant without the method's optimisation: "speedup_n1024_generic_O3" (no -march=native),
# "gflops_naive", "scalar", "plain" (relay s6 mm2 029: listed as measured only the -O1 build)
_PLAIN_WORDS = frozenset("generic naive plain scalar serial novec nosimd unvectorized unvectorised".split())
# "un..." words that name a part removed ("untiled", "unblocked", "unpacked", "unscaled"), not these
_UN_WORDS = frozenset("under uniform unit units until unique union unsigned unroll unrolled unknown".split())
# a knob set to zero names a part switched off ("val_accuracy_l2_0": no L2, relay s6 ln1 025),
# unless the word before the 0 counts something (an epoch, a seed, a size)
_COUNT_WORDS = frozenset(
    "epoch epochs step steps iter iteration seed run fold rank layer batch n m k t gpu cpu core thread "
    "size tile block trial rep repeat round stage node".split()
)
# an output line that reports one: "ablation ...", "without ...", "no-noise control: 0.93", "w/o ..."
_ABLATION_LINE = re.compile(r"\bablat|\bwithout\b|\bw/o\b|\bno[- ](?!error|failure)\w+|\bcontrol\b", re.I)
MEASURED_LINES = 6  # output lines shown, each at most MEASURED_LINE_CHARS
MEASURED_LINE_CHARS = 160


# a tile or block as large as the problem is no blocking at all ("gflops_blocked_tile1024" with
# n=1024: relay s6 mm2 029); the problem's size is read from metric names ("speedup_n1024") and from
# the code's size constants (N, SIZE, DIM, ...)
_TILE_WORDS = frozenset("tile tiles block blocks blk bs tb".split())
_SIZE_NAMES = frozenset("n size dim matrix_size matrix_n problem_size mat_size".split())


def _tile(words: list[str], i: int) -> int | None:
    """The tile size word ``i`` names ("tile1024", or "1024" after "tile"), else None."""
    m = re.fullmatch(r"([a-z]+)(\d+)", words[i])
    if m and m.group(1) in _TILE_WORDS:
        return int(m.group(2))
    if words[i].isdigit() and i > 0 and words[i - 1] in _TILE_WORDS:
        return int(words[i])
    return None


def problem_sizes(node: Node, answer: Any = None) -> frozenset[int]:
    """The problem sizes ``node`` measured: ``n<digits>`` words of its metric names and the
    integer values of its code's size constants (``N``, ``SIZE``, ``DIM``; ``answer``: its code
    answer)."""
    sizes = {
        int(w[1:])
        for m in node.metrics
        for w in re.split(r"[^a-z0-9]+", m.name.lower())
        if re.fullmatch(r"n\d+", w)
    }
    files = text_files(answer) if isinstance(answer, dict) else {}
    for p in parameters(files) if files else ():
        if p.name.lower() in _SIZE_NAMES and p.value.strip().isdigit():
            sizes.add(int(p.value.strip()))
    return frozenset(s for s in sizes if s > 1)


def _ablation_name(name: str, level: str | None = None, sizes: frozenset[int] = frozenset()) -> bool:
    """Whether a metric's name says it measures a removed part or a control; with ``level`` (the
    main build's optimisation flag, ``o3``) a name with another level (``..._O1_native``) is a
    build variant measured beside the main one; with ``sizes`` (:func:`problem_sizes`) a tile as
    large as the problem is the unblocked variant."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    if sizes and any(_tile(words, i) in sizes for i in range(len(words))):
        return True
    return any(
        w in _ABLATION_WORDS
        or w in _PLAIN_WORDS
        or (level is not None and re.fullmatch(r"o[0-3sgz]|ofast", w) is not None and w != level)
        or (w.startswith(("no", "wo")) and len(w) >= 5 and w not in _NO_WORDS and w[2:] not in ("rm", "rmal"))
        or (w.startswith("un") and len(w) >= 6 and w not in _UN_WORDS)
        or (w == "0" and i > 0 and re.fullmatch(r"[a-z]+[0-9]?", words[i - 1]) is not None
            and words[i - 1] not in _COUNT_WORDS)
        for i, w in enumerate(words)
    )  # fmt: skip


def measured_ablations(node: Node, record: Any = None, answer: Any = None) -> str:
    """What ``node`` measured of an ablation or a control inside its own run: its metrics whose
    names say so (``speedup_O3_nonative``, ``val_accuracy_no_l2``, ``acc_noise_free``, a tile as
    large as the problem such as ``gflops_blocked_tile1024`` at n=1024; not its primary metric), whole, ``name=value`` each, then the lines of its output (``record``, its
    run record) that report one (``no-noise control: val_accuracy=0.93``); "" when neither does.
    A relay run's ablation proposer saw "No ablation node has run" while the best node's own
    metrics held its -O1 and no -march=native builds, and its idea asked for both again."""
    primary = node.metric.name if node.metric is not None else None
    # the optimisation level of its first compiler call (``answer``, its code answer): a metric
    # named for another level measured a build variant
    flags = [p.value for p in build_parameters(answer.get("build") if isinstance(answer, dict) else None)]
    level = next((m.group(1).lower() for f in flags if (m := re.search(r"-(O[0-3sgz]|Ofast)\b", f))), None)
    sizes = problem_sizes(node, answer)
    # a metric of another dataset label is named with it: an extra dataset's val_accuracy_l2_0.0
    # stood beside the headline data's under one name with two values (relay s9 ln2 026)
    home = node.metric.dataset if node.metric is not None else None
    found = [
        f"{m.name}{f' [{m.dataset}]' if m.dataset and m.dataset != home else ''}={m.value:.6g}"
        for m in node.metrics
        if m.name != primary and _ablation_name(m.name, level, sizes)
    ]
    lines: list[str] = []
    for out in getattr(record, "outputs", None) or ():
        for line in str(getattr(out, "stdout_tail", "") or "").splitlines():
            line = " ".join(line.split())
            if line and _ABLATION_LINE.search(line) and re.search(r"\d", line) and line not in lines:
                lines.append(
                    line if len(line) <= MEASURED_LINE_CHARS else line[: MEASURED_LINE_CHARS - 3] + "..."
                )
    parts = []
    if found:
        parts.append("its metrics " + "; ".join(found))
    if lines:
        shown = lines[-MEASURED_LINES:]  # results are printed last
        parts.append("its output: " + " | ".join(f'"{x}"' for x in shown))
    return "; ".join(parts)


MEASURED_NODES = 4  # the other nodes whose in-run ablations or controls the proposer is shown


def measured_by_others(run: Run, view: JournalView, parent: Node, stage: int) -> list[str]:
    """What the other working nodes of the stages from the best node's to ``stage`` (not ablation
    nodes: the tried table lists those) measured of an ablation or a control inside their own runs,
    one "n0013 (stage 3): its metrics ..." line each (:func:`measured_ablations`), the latest first,
    at most :data:`MEASURED_NODES`. A proposer told only what the best node measured re-proposes
    what a later node grown from it already measured (relay s6 mm2 029)."""
    ids = dict.fromkeys(i for st in range(parent.stage, stage + 1) for i in view.ids("search", st))
    lines: list[str] = []
    # each measurement once: a node grown from the best repeats its in-run values (relay s7 ln1
    # 025: the same 13 metrics for four nodes), so a line keeps only what no line above showed
    best = RunPaths(run.dir).node(parent.id)
    code = node_answer(run.dir, parent.id)
    seen = set(
        _measured_items(
            measured_ablations(
                parent,
                read_artifact(best.file(RUN_FILE), RunRecord),
                code.to_json() if code is not None else None,
            )
        )
    )
    for nid in reversed(ids):
        node = view.get(nid)
        if nid == parent.id or node.operation == "ablate" or not (node.is_finished and node.is_good):
            continue
        paths = RunPaths(run.dir).node(nid)
        code = node_answer(run.dir, nid)
        found = measured_ablations(
            node, read_artifact(paths.file(RUN_FILE), RunRecord), code.to_json() if code is not None else None
        )
        items = _measured_items(found)
        fresh = [x for x in items if x not in seen]
        seen.update(items)
        if fresh:
            same = len(items) - len(fresh)
            said = f" (and {same} value(s) shown above, the same)" if same else ""
            metrics = [x for x in fresh if not x.startswith("its output: ")]
            parts = [f"its metrics {'; '.join(metrics)}"] if metrics else []
            parts += [x for x in fresh if x.startswith("its output: ")]
            lines.append(f"{nid} (stage {node.stage}): {'; '.join(parts)}{said}")
        elif items:
            lines.append(f"{nid} (stage {node.stage}): the same values as shown above")
        if len(lines) >= MEASURED_NODES:
            break
    return lines


def _measured_items(found: str) -> list[str]:
    """The ``name=value`` metrics and the output part of a :func:`measured_ablations` text."""
    metrics, _, output = found.partition("its output: ")
    names = [x.strip() for x in metrics.removeprefix("its metrics ").split("; ") if x.strip()]
    return names + ([f"its output: {output}"] if output else [])


def ablation_inventory(parent: Node, answer: Any, shown: str) -> list[str]:
    """What an ablation of ``parent`` can remove or disable besides the parameters its brief lists:
    the functions, switches and variants its program (``answer``, its code answer as saved) is
    made of (:func:`..treesearch.components.components`), and the names of the metrics it reports
    that ``shown`` (the best-node and "Already measured" lines) leaves out. Relay s8 ln2 027,
    mm1 030: an ablation proposal had no inventory of the best experiment's components."""
    lines = components(text_files(answer))
    unshown = [m.name for m in ordered_metrics(parent) if f"{m.name}=" not in shown]
    if unshown:
        lines.append(f"metrics it also reports (values not shown): {', '.join(dict.fromkeys(unshown))}")
    return lines


def stage_inputs(run: Run, view: JournalView, node: Node, state: StageState | None) -> dict[str, Any]:
    """``node``'s stage inputs: the frozen ones if it has any, else computed now and frozen."""
    path = RunPaths(run.dir).node(node.id).file(STAGE_INPUTS_FILE)
    stored = read_json(path)
    if isinstance(stored, dict):
        return stored
    values = compute_stage_inputs(run, view, node, state)
    atomic_write_json(path, values, durable=False)  # lost on power loss: recomputed, like a phase
    return values
