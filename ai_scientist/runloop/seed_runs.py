"""Seed re-runs of a stage's best and the re-ranking over seeds (:mod:`..treesearch.seeds`: plan,
estimator, threshold, ranking). A seed re-run asks no LLM: the node's code runs again with SEED
set. The nodes run under the run's scheduler, handed in as ``run_nodes``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base import failpoints
from ..treesearch.best import ABLATION_STAGE, Choice, comparable_metric, rank_nodes

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import Journal
    from ..treesearch.node import Node
    from ..treesearch.seeds import SeedAggregate
    from ..treesearch.stages import StageState


class SeedRuns:
    """``run_nodes(nodes)`` runs the given nodes to their end (both schedulers)."""

    def __init__(self, run: Run, journal: Journal, run_nodes: Callable[[list[Node]], None]):
        self.run_ = run
        self.cfg = run.cfg
        self.journal = journal
        self.run_nodes = run_nodes

    def run_seeds(self, stage: int, node_id: str) -> None:
        """Run the seed re-runs of ``node_id`` it lacks (``seeds.seed_plan``: agent.seed + 1 ..
        agent.seed + num_seeds), and those a crash left unfinished; no LLM call (its code is run
        again with SEED set)."""
        from ..treesearch.seeds import missing_seeds, seed_plan

        plan = seed_plan(self.cfg.agent.seed, self.cfg.agent.multi_seed_eval.num_seeds)
        pending = [r for r in self.journal.seed_runs(node_id) if not r.is_finished]
        for seed in missing_seeds(self.journal, node_id, plan):
            pending.append(
                self.journal.new_node(stage=stage, operation="seed_eval", parent_id=node_id, seed=seed)
            )
        self.run_nodes(pending)

    def findings(self, stage: int, best_id: str) -> dict[str, Any] | None:
        """Re-run over the stage's seeds the good nodes whose finding is in metrics their parent
        did not report, at most ``agent.multi_seed_eval.finding_reruns`` of them
        (:func:`..treesearch.seeds.finding_nodes`: the rule). The choice is recorded first
        (``finding_seeds`` event) and a resumed stage end reuses it, so the re-runs a crash left
        do not shift the cap to another node. None in the ablation stage (its nodes are measured
        against their parent's headline) or with the key at 0."""
        from ..treesearch.seeds import finding_nodes, new_metrics, seed_plan

        cap = self.cfg.agent.multi_seed_eval.finding_reruns
        if stage == ABLATION_STAGE or cap == 0:
            return None
        recorded = [
            e for e in self.run_.events() if e.get("type") == "finding_seeds" and e.get("stage") == stage
        ]
        if recorded:
            record = {
                k: recorded[-1].get(k) for k in ("cap", "node_ids", "left_out", "new_metrics", "parents")
            }
        else:
            plan = seed_plan(self.cfg.agent.seed, self.cfg.agent.multi_seed_eval.num_seeds)
            chosen, eligible = finding_nodes(self.journal, stage, plan, cap, exclude=[best_id])
            new = {
                nid: [m.name + (f" [{m.dataset}]" if m.dataset else "") for m in new_metrics(n, parent)]
                for nid in eligible
                if (n := self.journal.get(nid)) and (parent := self.journal.get(n.parent_id or ""))
            }
            record = {
                "cap": cap,
                "node_ids": chosen,
                "left_out": [nid for nid in eligible if nid not in chosen],
                "new_metrics": new,
                "parents": {nid: self.journal.get(nid).parent_id for nid in eligible},
            }
            if eligible:  # nothing qualified: nothing to reuse on resume, no record
                self.run_.event("finding_seeds", stage=stage, **record)
        for nid in record["node_ids"] or []:
            self.run_seeds(stage, nid)
        # crash tests: the re-runs are journaled, the stage's best not recorded yet; without the
        # recorded choice a resume would find the node re-run in full and re-run the next one
        failpoints.hit(f"finding_seeds:{stage}")
        return record

    def result(self, stage: int, best_id: str, findings: dict[str, Any] | None = None) -> dict[str, Any]:
        """The aggregate of the stage's best's seed re-runs (``seed_eval`` event, ``state.json``);
        with ``findings`` (:meth:`findings`), each re-run finding node's runs and the aggregate of
        every new metric its good re-runs all report (``findings.aggregates``)."""
        from ..treesearch.seeds import aggregate_seeds, new_metrics

        measured = [(r, r.metric) for r in self.journal.seed_runs(best_id) if r.is_good and r.metric]
        # only re-runs measuring what the node measured are averaged: a model that put the seed in
        # its metric's dataset label made every re-run another metric (recorded, not a crash)
        best = self.journal.get(best_id)
        key = best.metric.key if best.metric is not None else (measured[0][1].key if measured else None)
        same = [m for _, m in measured if m.key == key]
        agg = aggregate_seeds(same) if same else None
        result: dict[str, Any] = {
            "node_id": best_id,
            "runs": [r.id for r in self.journal.seed_runs(best_id)],
            "aggregate": agg.to_dict() if agg is not None else None,
        }
        other = [(r, m) for r, m in measured if m.key != key]
        if other:
            result["incomparable"] = [{"node_id": r.id, "metric": list(m.key)} for r, m in other]
            result["incomparable_reason"] = (
                f"{len(other)} seed re-run(s) of {best_id} report another metric than its "
                f"{list(key) if key else None} (name, direction and dataset must agree; a dataset "
                "label must not depend on SEED): not averaged"
            )
        if findings is not None:
            result["findings"] = {**findings, "runs": {}, "aggregates": {}}
            for nid in findings["node_ids"]:
                runs = self.journal.seed_runs(nid)
                good = [r for r in runs if r.is_good]
                result["findings"]["runs"][nid] = [r.id for r in runs]
                node = self.journal.get(nid)
                parent = (
                    self.journal.get(node.parent_id)
                    if node.parent_id and node.parent_id in self.journal
                    else None
                )
                aggs = []
                for m in new_metrics(node, parent):
                    got = [next((x for x in r.metrics if x.key == m.key and x.is_valid), None) for r in good]
                    if got and all(g is not None for g in got):
                        aggs.append(aggregate_seeds([g for g in got if g is not None]).to_dict())
                result["findings"]["aggregates"][nid] = aggs
        self.run_.event("seed_eval", stage=stage, **result)
        return result

    def rerank(self, state: StageState, first: Choice) -> Choice:
        """The stage's best after re-ranking over seeds: the runners-up whose metric is within the
        seed noise of ``first`` (the metric's choice, already re-run over seeds) are re-run over
        the same seeds, and the best mean wins (:mod:`..treesearch.seeds`: estimator, threshold,
        ranking). Bounded by ``agent.multi_seed_eval.rerank_candidates`` (0: off). The decision and
        its evidence go to the ``seed_rerank`` event and the choice's evidence (``stage_best``,
        ``state.json``, the stage summary). The ablation stage keeps its carried node."""
        from ..treesearch.seeds import noise_threshold, rank_by_mean, ratio_parts, seed_noise, within_noise
        from .early_seeds import concurrency

        cfg = self.cfg.agent.multi_seed_eval
        best = self.journal.get(first.node_id)  # type: ignore[arg-type]
        m = best.metric
        if state.stage == ABLATION_STAGE or cfg.rerank_candidates == 0 or m is None or not m.is_valid:
            return first
        pool = self.journal.good_nodes(state.stage)
        carried = self.journal.get(state.carried_id) if state.carried_id else None
        if carried is not None and carried.is_good:
            pool = [carried, *pool]
        ranked = [
            (n.id, c.score)
            for n in rank_nodes(pool)
            if n.id != best.id and (c := comparable_metric(n, m.key))
        ]
        groups = self._groups(m.key)
        noise = seed_noise(groups)
        pooled_runs = {r.id for nid in groups for r in self.journal.seed_runs(nid)}
        record: dict[str, Any] = {
            "node_id": best.id,
            "metric": list(m.key),
            "search_value": m.value,
            "noise": noise.to_dict(),
            "noise_z": cfg.noise_z,
            "rerank_candidates": cfg.rerank_candidates,
            "seeds": self.cfg.agent.multi_seed_eval.num_seeds,
            # whether the pooled re-runs shared the machine with other nodes of this run (config
            # and recorded early re-runs: a replay states the same)
            "concurrency": concurrency(self.run_.dir, self.cfg.agent.num_workers, pooled_runs),
        }
        # a headline that is the ratio of two metrics each re-run reports: each part's values, so
        # the noise line shows which one moves it (a speed-up over a re-measured baseline)
        ratios = {
            nid: parts
            for nid in groups
            if (parts := ratio_parts([list(r.metrics) for r in self._good_runs(nid, m.key)], m.key))
        }
        if ratios:
            record["ratios"] = ratios
        if noise.sigma is None:
            record["decision"] = (
                f"no noise estimate (no node has 2 good seed re-runs of {m.name}): {best.id} stays"
            )
        else:
            threshold = noise_threshold(noise.sigma, cfg.noise_z)
            # the runners-up are judged against what the best really measures: its seed re-runs'
            # mean when it has them, not the single search run it was chosen on (biased upwards by
            # that choice — a relay run kept a node for four stages on a search run of 70.65 whose
            # re-runs' mean was 52.02, level with a runner-up's 53.6 that was never re-run)
            own = self._aggregate(best.id, m.key)
            reference = m.score if own is None else (own.mean if m.direction == "maximize" else -own.mean)
            record["reference"] = {
                "value": m.value if own is None else own.mean,
                "from": "search run" if own is None else f"mean of {own.n} seed re-run(s)",
            }
            # a runner-up re-run over seeds already (the node the stage started from) is ranked by
            # its mean at no cost: its single search value may be far below it (a relay run kept a
            # tuning node over its parent whose re-run mean was higher, judged on the parent's
            # noisy search run); it is never re-run again
            measured = [nid for nid, _ in ranked if self._aggregate(nid, m.key) is not None]
            unmeasured = [(nid, score) for nid, score in ranked if nid not in measured]
            # a node re-run for a finding that only added measurements to its parent's program
            # reports the parent's headline value on every seed: a copy, not a contender (relay s7
            # ln2 026: "tied with n0010, n0011" — children of n0007 with its values by construction);
            # the note goes to the record's decision
            copies = self._copies(best.id, measured, m.key)
            measured = [nid for nid in measured if nid not in copies]
            candidates = within_noise(reference, unmeasured, threshold, cfg.rerank_candidates)
            values = {n.id: n.metric.value for n in pool if n.metric is not None}
            record["threshold"] = threshold
            record["runners_up"] = [{"node_id": i, "value": values[i]} for i, _ in ranked[:5]]
            record["candidates"] = candidates
            record["measured"] = measured
            if copies:
                record["same_as_parent"] = copies
            if not candidates and not measured:
                ref = record["reference"]
                record["decision"] = (
                    f"no runner-up within the seed noise of {best.id} ({ref['from']}: {ref['value']:.6g}): it stays"
                )
            else:
                for nid in candidates:
                    self.run_seeds(state.stage, nid)
                # a runner-up re-run here may prove a copy too (its re-runs repeat its parent's)
                later = self._copies(best.id, [*measured, *candidates], m.key)
                copies |= later
                candidates = [nid for nid in candidates if nid not in later]
                measured = [nid for nid in measured if nid not in later]
                record["measured"] = measured
                if copies:
                    record["same_as_parent"] = copies
                compared = [best.id, *candidates, *measured]
                aggs = [(nid, self._aggregate(nid, m.key)) for nid in compared]
                order = rank_by_mean(aggs)
                chosen = order[0] if order else best.id
                record["means"] = {nid: (a.to_dict() if a else None) for nid, a in aggs}
                record["ranking"] = order
                record["chosen"] = chosen
                tied = [
                    nid
                    for nid, a in aggs
                    if a is not None and nid != chosen and a.mean == dict(aggs)[chosen].mean  # type: ignore[union-attr]
                ]
                record["decision"] = (
                    f"{chosen} has the best mean over the seed re-runs of {', '.join(compared)}"
                    + (f" ({', '.join(measured)} re-run before)" if measured else "")
                    + (f", tied with {', '.join(tied)}: the earlier choice wins a tie" if tied else "")
                    + (_replaces(record, best.id) if chosen != best.id else f": {best.id} stays")
                )
        if record.get("same_as_parent"):
            record["decision"] += "; " + _copies_text(record["same_as_parent"], m.name)
        record["changed"] = record.get("chosen", best.id) != best.id
        self.run_.event("seed_rerank", stage=state.stage, **record)
        evidence = {**first.evidence, "seed_rerank": record}
        if not record["changed"]:
            return replace(first, evidence=evidence)
        reason = (
            f"{record['chosen']} has the best {m.name} mean over seed re-runs among {best.id} (best single "
            f"search run, {m.value:.4g}) and the runner-up(s) within its seed noise; {first.reason}"
        )
        return Choice(
            node_id=record["chosen"],
            method="seed_mean",
            reason=reason,
            candidates=(best.id, *record["candidates"], *record.get("measured", [])),
            evidence=evidence,
        )

    def _copies(self, best: str, measured: list[str], key: tuple[str, str, str | None]) -> dict[str, str]:
        """The nodes of ``measured`` left out of the ranking, each with the node it repeats: a
        node and its parent, both among ``best`` and ``measured``, whose headline ``key`` is the
        same on the search run and on every seed both were re-run with are identical by
        construction (the child adds measurements beside an unchanged headline), so ranking one
        beside the other decides nothing: the child is left out, or — when the child is ``best``
        — the parent, which the best then stands for."""
        compared = [best, *measured]
        out: dict[str, str] = {}
        for nid in compared:
            pid = self.journal.get(nid).parent_id
            if not pid or pid not in compared or pid in out or nid in out or not self._same(nid, pid, key):
                continue
            if nid == best:
                out[pid] = nid
            else:
                out[nid] = pid
        return out

    def _same(self, nid: str, pid: str, key: tuple[str, str, str | None]) -> bool:
        """``nid`` measured ``key`` exactly as ``pid``: the search run and each shared seed's re-run."""
        node, parent = self.journal.get(nid), self.journal.get(pid)
        if node.metric is None or parent.metric is None or node.metric.value != parent.metric.value:
            return False
        mine = {r.seed: r.metric.value for r in self._good_runs(nid, key) if r.metric is not None}
        theirs = {r.seed: r.metric.value for r in self._good_runs(pid, key) if r.metric is not None}
        shared = mine.keys() & theirs.keys()
        return bool(shared) and all(mine[s] == theirs[s] for s in shared)

    def _groups(self, key: tuple[str, str, str | None]) -> dict[str, list[float]]:
        """Node id -> the values of its good seed re-runs of metric ``key`` (every stage), a
        byte-identical repeat of an earlier re-run left out (not an independent draw)."""
        from .protocol import distinct_seed_groups

        return distinct_seed_groups(self.run_.dir, self.journal.nodes, key)

    def _good_runs(self, node_id: str, key: tuple[str, str, str | None]) -> list[Node]:
        """The node's good seed re-runs reporting a valid metric ``key``, in creation order."""
        return [
            r
            for r in self.journal.seed_runs(node_id)
            if r.is_good and r.metric is not None and r.metric.key == key and r.metric.is_valid
        ]

    def _aggregate(self, node_id: str, key: tuple[str, str, str | None]) -> SeedAggregate | None:
        """Mean ± s.e. of the node's good seed re-runs of metric ``key``; None without one."""
        from ..treesearch.seeds import aggregate_seeds

        same = [r.metric for r in self._good_runs(node_id, key) if r.metric is not None]
        return aggregate_seeds(same) if same else None


def _replaces(record: dict[str, Any], previous: str) -> str:
    """How the decision says the chosen node takes ``previous``'s place: "; it replaces n0002"
    when its mean is beyond the seed noise of ``previous``'s, else that it is carried by its mean
    alone, level with it — "n0012 replaces n0002" stood beside "a tie" (relay s8 mm2 030)."""
    from .stage_facts import rerank_tie, rough_note

    tie = rerank_tie(record)
    level = next((o for o in (tie or {}).get("level") or [] if o["node_id"] == previous), None)
    if level is None:
        return f"; it replaces {previous}"
    return (
        f"; it is carried on in place of {previous} by its higher mean alone: {level['gap']:.4g} apart, "
        f"within the seed noise of {previous}'s (band {level['band']:.4g}), a tie{rough_note(record)}, "
        "not a better result"
    )


def _copies_text(copies: dict[str, str], name: str) -> str:
    """The decision's note on the nodes left out of the ranking (:meth:`SeedRuns._copies`),
    grouped by the node each repeats."""
    by: dict[str, list[str]] = {}
    for nid, other in copies.items():
        by.setdefault(other, []).append(nid)
    return "; ".join(
        f"{', '.join(left)} not ranked: {'its' if len(left) == 1 else 'their'} {name} is {other}'s on "
        "the search run and on every seed re-run, identical by construction (a program that only "
        "adds measurements to the other's)"
        for other, left in by.items()
    )
