"""Seed re-runs started before a stage's last node is in: no idle worker at a stage end (issue 37).

When a free-running stage accepts no more nodes (cap reached, criteria met, ideas exhausted) but
some of its nodes still run, a worker that comes free starts a seed re-run of the stage's
*provisional best*: the node the stage end would choose on the journal as it stands (the
policy's ``stage_best`` with the stage end's rng, without the LLM tie-break). One re-run per free
worker, so when a later node takes the lead the next free worker re-runs the new best. Nothing
else changes: the stage ends when its last node (re-runs included) is in, then its final best is
chosen as before and re-run for the seeds it still lacks; re-runs of a node that did not stay
best are kept as that node's re-runs (the re-ranking over seeds compares a runner-up that has
them by its mean, at no cost). Stage caps count search nodes only, so they stay exact.

Each such decision is recorded (``seeds_started`` event, ``early: true``, fsync'd before the
nodes enter the journal) with the provisional best, the new node ids, their seeds and
``waiting`` (the nodes in flight it saw, as ``node_selected`` records). A replay makes the
decision at the same node id on the same finished nodes (:func:`recorded_early_seeds`); a
decision a ``kill -9`` cut off before its nodes existed is voided when the run resumes
(``seeds_void``), as the resumed run may create those ids otherwise. With one worker a free
worker never coexists with a node in flight, so a one-worker run is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import failpoints
from ..base.errors import UnrecordedPrompt
from ..base.fileio import read_jsonl
from ..base.paths import RunPaths
from ..treesearch.node import format_node_id
from ..treesearch.policies import decision_rng
from ..treesearch.seeds import missing_seeds, seed_plan

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal, JournalView
    from ..treesearch.node import Node
    from ..treesearch.policies.base import SearchPolicy
    from ..treesearch.stages import StageState


@dataclass(frozen=True)
class EarlySeeds:
    """One recorded decision: re-runs ``node_ids`` of ``parent``, made while ``waiting`` ran."""

    parent: str
    node_ids: tuple[str, ...]
    waiting: frozenset[str]


def provisional_best(policy: SearchPolicy, view: JournalView, state: StageState, seed: int) -> str | None:
    """The node the stage end would choose on ``view`` now (no LLM tie-break); None without one."""
    rng = decision_rng(seed, f"best{state.stage}")  # the stage end's rng (Orchestrator._finish_stage)
    return policy.stage_best(view, state, rng=rng, tie_break=None).node_id


def _live(events: list[dict]) -> dict[str, EarlySeeds]:
    """First node id -> early decision, after the voids (a later decision for an id replaces it)."""
    out: dict[str, EarlySeeds] = {}
    for ev in events:
        if ev.get("type") == "seeds_started" and ev.get("early"):
            ids = tuple(ev["node_ids"])
            out[ids[0]] = EarlySeeds(ev["node_id"], ids, frozenset(ev.get("waiting", ())))
        elif ev.get("type") == "seeds_void":
            void = set(ev["node_ids"])
            for first, d in list(out.items()):
                kept = tuple(i for i in d.node_ids if i not in void)
                if kept != d.node_ids:
                    if kept and kept[0] == first:
                        out[first] = EarlySeeds(d.parent, kept, d.waiting)
                    else:
                        del out[first]
    return out


def recorded_early_seeds(src: str | Path) -> dict[str, EarlySeeds]:
    """The early seed decisions of a recording, keyed by their first node id."""
    path = RunPaths(Path(src)).events
    return _live(list(read_jsonl(path))) if path.exists() else {}


def concurrency(run_dir: str | Path, num_workers: int, node_ids: set[str] | None = None) -> dict[str, object]:
    """Whether the run's commands ran at the same time, as facts of the config and the recording:
    ``workers`` (``agent.num_workers``), the early seed re-runs (``early_reruns``; of ``node_ids``
    only when given, e.g. the re-runs a noise figure pools) and the nodes in flight beside them
    (``beside``). Read from the events, not wall-clock times, so a replay states the same.
    :func:`..treesearch.seeds.concurrency_text` words it."""
    early = list(recorded_early_seeds(run_dir).values())
    ids = [i for d in early for i in d.node_ids if node_ids is None or i in node_ids]
    beside = sorted({w for d in early if any(i in ids for i in d.node_ids) for w in d.waiting})
    return {"workers": num_workers, "early_reruns": ids, "beside": beside}


def void_cut_off(run: Run, journal: Journal) -> list[str]:
    """A resumed run: void the early decisions whose nodes a ``kill -9`` kept out of the journal
    (``seeds_void`` event), so a replay does not make them. Returns the voided ids."""
    missing = [i for d in _live(run.events()).values() for i in d.node_ids if i not in journal]
    if missing:
        run.event("seeds_void", node_ids=missing, reason="the run was killed before these nodes were created")
    return missing


def create_early_seeds(
    run: Run,
    journal: Journal,
    policy: SearchPolicy,
    view: JournalView,
    state: StageState,
    waiting: list[str],
    free: int,
    recorded: EarlySeeds | None = None,
) -> list[Node]:
    """Record and create up to ``free`` seed re-runs of the provisional best on ``view`` (the
    seeds it lacks, in plan order); [] when there is none to start. ``waiting``: the nodes in
    flight. A replay passes the ``recorded`` decision for this node id: the same node and count,
    or the replay stops (the recording and this code disagree)."""
    cfg = run.cfg.agent
    parent = provisional_best(policy, view, state, cfg.seed)
    seeds = missing_seeds(view, parent, seed_plan(cfg.seed, cfg.multi_seed_eval.num_seeds)) if parent else []
    seeds = seeds[: len(recorded.node_ids) if recorded is not None else max(free, 0)]
    if recorded is not None and (parent != recorded.parent or len(seeds) != len(recorded.node_ids)):
        raise UnrecordedPrompt(
            f"the recording started seed re-runs {', '.join(recorded.node_ids)} of {recorded.parent} "
            f"before stage {state.stage}'s last node was in; this replay's provisional best is {parent} "
            f"with {len(seeds)} seed(s) to start"
        )
    if not seeds:
        return []
    first = int(journal.next_node_id()[1:])  # only the main thread creates nodes
    ids = [format_node_id(first + k) for k in range(len(seeds))]
    # the decision is durable before its nodes exist (a kill in between: void_cut_off)
    run.event(
        "seeds_started",
        stage=state.stage,
        node_id=parent,
        node_ids=ids,
        seeds=seeds,
        early=True,
        waiting=sorted(waiting),
    )
    failpoints.hit(f"seeds_started:{ids[0]}")
    nodes = []
    for nid, seed in zip(ids, seeds, strict=True):
        node = journal.new_node(stage=state.stage, operation="seed_eval", parent_id=parent, seed=seed)
        if node.id != nid:  # another writer created a node meanwhile: the record would lie
            raise RuntimeError(f"seeds_started recorded {nid} but the journal created {node.id}")
        nodes.append(node)
    return nodes
