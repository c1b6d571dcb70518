"""Multi-seed evaluation: which seeds to run, and mean ± standard error of their metrics.

The best node of each stage is re-run as ``seed_eval`` children, one per seed.
Metrics are aggregated only within one (name, direction, dataset): mixing
them is an error, never a silent average.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .journal import JournalView
from .node import IncomparableMetrics, Metric, Node


@dataclass(frozen=True)
class SeedAggregate:
    """Mean ± standard error (sample std / sqrt(n)); ``stderr`` is None for a single run."""

    name: str
    mean: float
    stderr: float | None
    n: int
    direction: str
    dataset: str | None = None
    values: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mean": self.mean,
            "stderr": self.stderr,
            "n": self.n,
            "direction": self.direction,
            "dataset": self.dataset,
            "values": list(self.values),
        }


def aggregate_seeds(metrics: Sequence[Metric]) -> SeedAggregate:
    """Aggregate one metric over seeds; raises if keys differ, a value is not finite, or empty."""
    if not metrics:
        raise ValueError("aggregate_seeds needs at least one metric")
    first = metrics[0]
    for m in metrics[1:]:
        if m.key != first.key:
            raise IncomparableMetrics(
                f"cannot aggregate metric {m.key} with {first.key}: name, direction and dataset must agree"
            )
    bad = [m.value for m in metrics if not m.is_valid]
    if bad:
        raise ValueError(f"metric {first.name!r}: non-finite seed value(s) {bad}; record those runs as buggy")
    values = [m.value for m in metrics]
    n = len(values)
    mean = math.fsum(values) / n
    stderr = None
    if n > 1:
        var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
        stderr = math.sqrt(var) / math.sqrt(n)
    return SeedAggregate(first.name, mean, stderr, n, first.direction, first.dataset, tuple(values))


def aggregate_by_key(metrics: Iterable[Metric]) -> list[SeedAggregate]:
    """One aggregate per (name, direction, dataset), in first-seen order; non-finite values
    raise as in :func:`aggregate_seeds` (skipping them would hide failed runs)."""
    groups: dict[tuple, list[Metric]] = {}
    for m in metrics:
        groups.setdefault(m.key, []).append(m)
    return [aggregate_seeds(ms) for ms in groups.values()]


def seed_plan(base_seed: int, num_seeds: int) -> list[int]:
    """The seeds of the re-runs: ``base_seed + 1 ... base_seed + num_seeds`` (the search used base)."""
    if num_seeds < 1:
        raise ValueError(f"agent.multi_seed_eval.num_seeds must be >= 1, got {num_seeds}")
    return [base_seed + i for i in range(1, num_seeds + 1)]


def missing_seeds(view: JournalView, node_id: str, seeds: Sequence[int]) -> list[int]:
    """Seeds of ``seeds`` with no seed re-run of ``node_id`` yet (finished or in flight): what
    a resumed run still has to start."""
    have = {c.seed for c in view.seed_runs(node_id)}
    return [s for s in seeds if s not in have]


def seed_metrics(view: JournalView, node_id: str) -> list[Metric]:
    """Primary metrics of the node's good seed re-runs, in creation order."""
    return [c.metric for c in view.seed_runs(node_id) if c.is_good and c.metric is not None]


def new_metrics(node: Node, parent: Node | None) -> list[Metric]:
    """``node``'s valid metrics whose (name, direction, dataset) ``parent`` did not report, in the
    node's order: the conditions it added. [] without a parent or one with no metric (nothing is
    new against nothing), as the stage facts' seed tables order them."""
    if parent is None:
        return []
    had = {m.key for m in parent.metrics}
    if parent.metric is not None:
        had.add(parent.metric.key)
    if not had:
        return []
    primary = node.metric.key if node.metric is not None else None
    return [m for m in node.metrics if m.key not in had and m.key != primary and m.is_valid]


def finding_nodes(
    view: JournalView, stage: int, plan: Sequence[int], limit: int, exclude: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """The stage's nodes re-run over seeds for a finding in metrics their parent did not report
    (``agent.multi_seed_eval.finding_reruns``), and every node that qualified: a good, comparable
    search node of ``stage`` with a parent and at least one valid new metric (:func:`new_metrics`),
    not in ``exclude`` (the stage's best, re-run for the headline) and lacking a seed of ``plan``
    (a node re-run in full already has its spread); the first ``limit`` in the stage's ranking
    (headline best first, ties in creation order). Re-runs follow the headline, which a node
    adding a condition leaves unchanged: a relay run's no-noise control, measured only in extra
    metrics, reached no prompt with a spread (relay s6 ln1: n0010, n0011). Returns (chosen,
    eligible)."""
    from .best import rank_nodes

    skip = set(exclude)
    eligible = [
        n.id
        for n in rank_nodes([n for n in view.good_nodes(stage) if not n.is_seed_eval])
        if n.id not in skip
        and n.parent_id
        and n.parent_id in view
        and new_metrics(n, view.get(n.parent_id))
        and missing_seeds(view, n.id, plan)
    ]
    return eligible[: max(limit, 0)], eligible


# ------------------------------------------------------ noise and re-ranking --


@dataclass(frozen=True)
class SeedNoise:
    """The seed noise of one metric: the pooled within-node sample standard deviation of seed
    re-run values, ``sigma = sqrt(sum_i sum_j (x_ij - mean_i)^2 / sum_i (n_i - 1))`` over every
    node with at least two good re-runs (``groups``: node id -> its values); ``dof`` is
    ``sum_i (n_i - 1)``. ``sigma`` is None when no node has two re-runs (``dof`` 0).

    The search run of a node is left out on purpose: a stage's best was chosen *because* its
    search value was high, so that value is biased upwards and would inflate the estimate."""

    sigma: float | None
    dof: int
    groups: dict[str, tuple[float, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": "pooled within-node sample standard deviation of seed re-run values",
            "sigma": self.sigma,
            "dof": self.dof,
            "groups": {k: list(v) for k, v in self.groups.items()},
        }


# One node drives the pooled sigma when its re-runs hold at least this share of the pooled sum of
# squares *and* their standard deviation is at least DOMINANT_RATIO times the other nodes' pooled
# sigma (nodes of similar spread never qualify, whatever their count). A relay run's sigma 12.5 was 99 % n0001's two re-runs (42.38,
# 77.77) while three other nodes' re-runs varied by about 1 (relay s6 mm 019, 028).
DOMINANT_SHARE = 0.5
DOMINANT_RATIO = 3.0
# a seed-noise sigma with fewer degrees of freedom is rough: pooled from two values (1 degree) it
# was presented as authoritative (relay s6 mm 009, 010, 019), and a band from two re-runs that
# happened to agree (4.17, while the same prompts showed one kernel at 42-70) called ties (relay s8
# mm2 009-019). A 95 % interval for sigma from 1 degree of freedom spans 0.45-32 times the
# estimate, from 2 degrees 0.52-6.3 times: such a band says how many runs it rests on and is
# used to call neither a tie nor a gain between single-seed results.
ROUGH_DOF = 3


def is_rough(dof: Any) -> bool:
    """Whether a sigma with ``dof`` degrees of freedom is too rough to call a tie or a gain by."""
    return isinstance(dof, int) and dof < ROUGH_DOF


def basis_text(groups: Mapping[str, Sequence[float]]) -> str:
    """What a pooled sigma rests on: ``2 re-runs of n0002`` (the nodes with at least two re-runs,
    the only ones pooled; its degrees of freedom are said beside the sigma)."""
    pooled = {k: v for k, v in groups.items() if len(v) >= 2}
    runs = sum(len(v) for v in pooled.values())
    return f"{runs} re-run{'' if runs == 1 else 's'} of {', '.join(sorted(pooled))}"


# A noise band this large against the best's own value ranks nothing: a relay run listed runners-up
# "within the noise: up to 70.77" beside a best whose mean was 60.08 (relay s6 mm 009).
TOO_WIDE = 0.5


@dataclass(frozen=True)
class Dominance:
    """The node whose re-runs drive a pooled sigma: its values, its share of the pooled sum of
    squares, and the pooled sigma of the other nodes (``sigma_without``, ``dof_without``)."""

    node_id: str
    values: tuple[float, ...]
    share: float
    sigma_without: float
    dof_without: int


def _ss(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values)


def dominance(groups: Mapping[str, Sequence[float]]) -> Dominance | None:
    """The node of ``groups`` (node id -> seed re-run values) whose spread drives the pooled sigma
    (:data:`DOMINANT_SHARE`), with the sigma pooled without it; None when no node does, or when no
    other node has two re-runs (nothing to pool without it)."""
    multi = {k: list(v) for k, v in groups.items() if len(v) >= 2}
    if len(multi) < 2:
        return None
    ss = {k: _ss(v) for k, v in multi.items()}
    total = math.fsum(ss.values())
    if total <= 0:
        return None
    nid = max(ss, key=lambda k: ss[k])
    share = ss[nid] / total
    rest = seed_noise({k: v for k, v in multi.items() if k != nid})
    assert rest.sigma is not None  # another node has two re-runs
    own = math.sqrt(ss[nid] / (len(multi[nid]) - 1))
    if share < DOMINANT_SHARE or own < DOMINANT_RATIO * rest.sigma:
        return None
    return Dominance(nid, tuple(multi[nid]), share, rest.sigma, rest.dof)


def dominance_text(groups: Mapping[str, Sequence[float]]) -> str:
    """``driven by n0001's re-runs: 42.38..77.77 (99 % of the pooled sum of squares); the other
    nodes' re-runs vary by ~1.14 (their pooled sigma, 3 degrees of freedom); the pooled sigma above
    ranks`` or "" (:func:`dominance`). Which one ranks: the pooled one, with the noisy node in — the
    machine did measure that spread, and a wider band re-runs more runners-up rather than calling a
    lucky run a win (docs/pipeline.md)."""
    d = dominance(groups)
    if d is None:
        return ""
    return (
        f"driven by {d.node_id}'s re-runs: {num(min(d.values))}..{num(max(d.values))} "
        f"({d.share:.0%} of the pooled sum of squares); the other nodes' re-runs vary by ~{num(d.sigma_without, 3)} "
        f"(their pooled sigma, {d.dof_without} degree{'' if d.dof_without == 1 else 's'} of freedom); "
        "the pooled sigma ranks"
    )


def too_wide(band: float, reference: float) -> bool:
    """Whether a noise ``band`` is too large to rank nodes whose value is about ``reference`` (the
    best's mean): at least :data:`TOO_WIDE` of its magnitude."""
    return band >= TOO_WIDE * abs(reference)


def too_wide_text(band: float, reference: float, whose: str, how: str = "") -> str:
    """``the noise is too large to rank these nodes: the band 70.77 (how) is 118% of n0001's
    mean, 60.08`` when :func:`too_wide`, else ""."""
    if not too_wide(band, reference):
        return ""
    ratio = f"{band / abs(reference):.0%} of" if reference else "larger than"
    how = f" ({how})" if how else ""
    return f"the noise is too large to rank these nodes: the band {num(band)}{how} is {ratio} {whose}, {num(reference)}"


def noise_notes(groups: Mapping[str, Sequence[float]], band: float, ref_id: str) -> dict[str, str]:
    """What the noise line says beside sigma and its band (the evaluation-protocol layer): the node
    driving sigma (``driven``, :func:`dominance_text`) and a band too wide to rank (``too_wide``,
    against ``ref_id``'s re-run mean when it was re-run — the node the stage starts from — else the
    mean of every pooled re-run); empty strings are left out."""
    own = groups.get(ref_id) or []
    values = list(own) or [v for vs in groups.values() for v in vs]
    notes = {"driven": dominance_text(groups)}
    if values:
        whose = f"{ref_id}'s re-run mean" if own else "the pooled re-runs' mean"
        notes["too_wide"] = too_wide_text(band, math.fsum(values) / len(values), whose)
    return {k: v for k, v in notes.items() if v}


# a headline equal to the quotient of two other metrics of the same run, to this relative
# precision in every re-run, is read as that ratio (values are printed to about 6 digits)
RATIO_RTOL = 1e-4


def ratio_parts(runs: Sequence[Sequence[Metric]], key: tuple[str, str, str | None]) -> dict[str, Any] | None:
    """When the headline ``key`` of every run in ``runs`` (each a re-run's metrics, two runs at
    least) equals ``a / b`` of two other metrics the same run reports, to :data:`RATIO_RTOL`:
    ``{"headline", "numerator", "denominator"}``, each part ``{"name", "dataset", "values"}`` (one
    value per run). Read from the values, not guessed from the names; the first pair in the
    metrics' order when several fit; None when no pair fits every run. A speed-up over a baseline
    re-measured in every run varies with the baseline's noise (relay s6 mm2: speedup_n1024 =
    gflops_blocked_best / gflops_naive, the naive rate moving 0.29-0.47)."""
    if len(runs) < 2:
        return None
    per_run = [{m.key: m for m in ms if m.is_valid} for ms in runs]
    if any(key not in r for r in per_run):
        return None
    # a copy of the headline (a "best" metric, divided by a metric that is 1) is not a ratio of it
    keys = [
        k
        for k in per_run[0]
        if k != key
        and all(k in r for r in per_run[1:])
        and not all(math.isclose(r[k].value, r[key].value, rel_tol=RATIO_RTOL) for r in per_run)
    ]
    for a in keys:
        for b in keys:
            if a == b:
                continue
            if all(
                r[b].value != 0 and math.isclose(r[a].value / r[b].value, r[key].value, rel_tol=RATIO_RTOL)
                for r in per_run
            ):
                return {
                    "headline": key[0],
                    "numerator": {"name": a[0], "dataset": a[2], "values": [r[a].value for r in per_run]},
                    "denominator": {"name": b[0], "dataset": b[2], "values": [r[b].value for r in per_run]},
                }
    return None


def ratio_text(node_id: str, parts: Mapping[str, Any]) -> str:
    """``n0001's speedup_n1024 is gflops_blocked_best [n1024] / gflops_naive [n1024] in each re-run:
    gflops_blocked_best 17.12, 22.42 (sd 19% of its mean), gflops_naive 0.404, 0.288 (24%)`` — the
    spread of each part, so a reader sees which one moves the ratio."""

    def part(p: Mapping[str, Any], first: bool) -> str:
        values = [float(v) for v in p["values"]]
        mean = math.fsum(values) / len(values)
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
        rel = f"{sd / abs(mean):.0%}" if mean else "n/a"
        return f"{p['name']} {', '.join(num(v) for v in values)} (sd {rel}{' of its mean' if first else ''})"

    num_p, den_p = parts["numerator"], parts["denominator"]
    name = lambda p: p["name"] + (f" [{p['dataset']}]" if p.get("dataset") else "")  # noqa: E731
    return (
        f"{node_id}'s {parts['headline']} is {name(num_p)} / {name(den_p)} in each re-run: "
        f"{part(num_p, True)}, {part(den_p, False)}"
    )


def concurrency_text(facts: Mapping[str, Any] | None) -> str:
    """Whether the run's nodes and seed re-runs ran at the same time, from the config
    (``agent.num_workers``) and the recorded early seed re-runs (``seeds_started``, ``early``):
    ``facts`` is :func:`..runloop.early_seeds.concurrency`. A relay run's model could not tell
    whether a 2x spread of absolute speeds came from its own nodes sharing the machine."""
    if not facts:
        return ""
    workers = int(facts.get("workers") or 1)
    early = list(facts.get("early_reruns") or [])
    if workers <= 1:
        text = (
            "this run's nodes and seed re-runs ran one at a time; other jobs on the machine are not excluded"
        )
    else:
        text = (
            # no config key names in a prompt: the model never sees the config (relay s10 ln 033)
            f"up to {workers} nodes of this run, seed re-runs included, ran at the same time: "
            "pooled re-runs may have been measured under different load"
        )
    if early:
        beside = list(facts.get("beside") or [])
        text += (
            f"; seed re-run{'s' if len(early) > 1 else ''} {', '.join(early)} started early, while "
            + (", ".join(beside) if beside else "the stage's last nodes")
            + " still ran"
        )
    return text


def seed_noise(groups: Mapping[str, Sequence[float]]) -> SeedNoise:
    """:class:`SeedNoise` of ``groups`` (node id -> seed re-run values of one metric, finite)."""
    ss, dof = 0.0, 0
    for values in groups.values():
        if len(values) >= 2:
            mean = math.fsum(values) / len(values)
            ss += math.fsum((v - mean) ** 2 for v in values)
            dof += len(values) - 1
    sigma = math.sqrt(ss / dof) if dof else None
    return SeedNoise(sigma, dof, {k: tuple(v) for k, v in groups.items()})


def noise_threshold(sigma: float, z: float) -> float:
    """The largest score difference two single-seed results may have and still be within the noise:
    ``z * sigma * sqrt(2)`` (the difference of two independent runs has standard deviation
    ``sigma * sqrt(2)``; ``z`` is ``agent.multi_seed_eval.noise_z``)."""
    return z * sigma * math.sqrt(2.0)


def within_noise(
    best_score: float, ranked: Sequence[tuple[str, float]], threshold: float, limit: int
) -> list[str]:
    """Ids of ``ranked`` (id, score oriented so larger is better; best first, the stage's best left
    out) not clearly worse than ``best_score`` — at most ``threshold`` below it, or above it (the
    best's seed mean can fall below a runner-up's single run): at most ``limit``, in rank order."""
    out = [nid for nid, score in ranked if score >= best_score - threshold]
    return out[:limit]


def rank_by_mean(aggregates: Sequence[tuple[str, SeedAggregate | None]]) -> list[str]:
    """Ids ordered by their seed re-runs' mean, best first (``direction`` decides); ``aggregates``
    are in preference order (the stage's best first), which breaks exact ties. A node without a
    good re-run (None) cannot be ranked and is left out."""
    scored = [
        (-(a.mean if a.direction == "maximize" else -a.mean), i, nid)
        for i, (nid, a) in enumerate(aggregates)
        if a is not None
    ]
    return [nid for _, _, nid in sorted(scored)]


# ------------------------------------------------- seed re-runs as text --
# One wording of a node's re-runs for every reader (stage facts, the writer, the reviewer): the
# run loop and the report both import it from here.


def num(value: float, digits: int = 4) -> str:
    """A number as the stage facts show it: 4 significant digits (``0.8658``, ``1.235e+05``), or
    ``digits`` (:func:`distinct_digits` of the values it is shown with)."""
    return f"{value:.{digits}g}"


def distinct_digits(values: Iterable[float], least: int = 4, most: int = 17) -> int:
    """The fewest significant digits (at least ``least``) at which the distinct ``values`` stay
    distinct: one table's values differing at 1e-6 (a relay run's nodes tied at 4 digits that
    were not) get the digits that tell them apart, and no more; ``most`` (17) shows any two
    distinct floats apart."""
    distinct = {float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)}
    for digits in range(least, most):
        if len({f"{v:.{digits}g}" for v in distinct}) == len(distinct):
            return digits
    return most


def stderr_text(value: float) -> str:
    """A standard error: 2 significant digits (an uncertainty needs no more)."""
    return f"{value:.2g}"


def by_dataset(items: Sequence[tuple[str, str, str | None]]) -> list[str]:
    """``(head, tail, dataset)`` items as ``head tail``, the dataset said once for each run of
    items that share it, after the first one's head (``a=1 [synthetic_d30] (0.9, 0.8)``, ``b=2``):
    a stage-3 node's 49 metrics named theirs 49 times."""
    out = []
    for i, (head, tail, dataset) in enumerate(items):
        new = dataset and (i == 0 or items[i - 1][2] != dataset)
        out.append(f"{head} [{dataset}]{tail}" if new else f"{head}{tail}")
    return out


def rerun_text(
    node: Node,
    reruns: Sequence[Node],
    limit: int | None = None,
    same_as: tuple[str, str] | None = None,
    parent: Node | None = None,
) -> str | None:
    """A node's seed re-runs, every metric the node reports that all its good re-runs report too,
    as the run's one seed statistic (:data:`ai_scientist.reporting.runread.SEED_STATISTIC`: mean ±
    s.e. over the re-runs only, the search run apart) with the values: ``2 seed re-runs (n0012
    seed 1, n0013 seed 2), mean ± s.e. (the first with its values): val_accuracy=0.9085 ± 0.003
    [synthetic] (0.9115, 0.9055); ...``. The primary metric first; with ``limit``, the metrics that do not fit are
    counted (``+3 more``), never cut; the values of each re-run are listed for the primary metric
    and, with ``parent``, for the metrics it did not report (:func:`new_metrics`: the node's
    own finding, listed next) — the rest by mean and s.e. ``same_as``: (another node's id, its re-run text):
    the metrics that text states alike are counted, not repeated (a child that re-ran its parent's
    grid with the same seeds). None when no re-run worked. A capable model saw only the best node's
    re-runs, so a stage-3 condition's gain was reported without whether it replicated."""
    good = [r for r in reruns if r.is_good]
    if not good:
        return None
    order = list(node.metrics) or ([node.metric] if node.metric is not None else [])
    new = {m.key for m in new_metrics(node, parent)}
    if node.metric is not None:
        order = [node.metric, *(m for m in order if m.key != node.metric.key)]
    order = [*order[:1], *(m for m in order[1:] if m.key in new), *(m for m in order[1:] if m.key not in new)]
    per_run = [{m.key: m for m in (list(r.metrics) or ([r.metric] if r.metric else []))} for r in good]
    found: list[tuple[str, str, str | None]] = []
    theirs = set((same_as[1] if same_as else "").split("; "))
    alike = 0
    for m in order:
        got = [run.get(m.key) for run in per_run]
        if any(g is None or not g.is_valid for g in got):
            continue
        values = [g.value for g in got if g is not None]
        mean = sum(values) / len(values)
        item = f"{m.name}={num(mean)}"
        if len(values) > 1:
            se = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 / len(values) ** 0.5
            item += f" ± {stderr_text(se)}"
        if found and m.key not in new and (item in theirs or f"{item} [{m.dataset}]" in theirs):
            alike += 1
            continue
        shown_values = not found or m.key in new
        found.append((item, f" ({', '.join(num(v) for v in values)})" if shown_values else "", m.dataset))
    items = by_dataset(found)
    if alike and same_as:
        items.append(f"{alike} more alike in {same_as[0]}'s re-runs")
    who = ", ".join(f"{r.id} seed {r.seed}" if r.seed is not None else r.id for r in good)
    n = len(good)
    listed = "the first"
    if new and parent is not None:
        listed += f" and the {len(new)} metric{'' if len(new) == 1 else 's'} {parent.id} did not report"
    head = f"{n} seed re-run{'' if n == 1 else 's'} ({who}), " + (
        "value (one re-run: no spread):"
        if n == 1
        else f"mean ± s.e. ({listed} with {'their' if new else 'its'} values):"
    )
    if not items:
        return f"{head} none of its metrics"
    shown: list[str] = []
    used = len(head)
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        more = len(f"; +{rest} more") if rest else 0
        if limit is not None and shown and used + 2 + len(item) + more > limit:
            shown.append(f"+{len(items) - i} more")
            break
        shown.append(item)
        used += 2 + len(item)
    return f"{head} {'; '.join(shown)}"


# ------------------------------------------------- within-run paired differences --
# a metric named as a difference of two conditions measured in the same run ("paired_l2_gain",
# "delta_acc", "speedup_diff"): its spread over the seed re-runs, not the headline's seed sigma,
# judges it — one run measures both conditions on the same data, so what the seed changes in both
# cancels (relay s8 ln3 009, 015, 025: only the headline's sigma was given, so a same-sign paired
# gain over the seeds could not be judged)
DIFFERENCE_WORDS = frozenset(
    "gain gains delta deltas diff diffs difference differences improvement advantage minus paired "
    "lift drop reduction "
    # a within-run ratio too (speedup_packed_over_naive, time_ratio_t128_vs_t64): a relay run's
    # prompts called these ratios the sound comparison and gave no spread for them (s9 mm 002-026)
    "speedup speedups ratio ratios over vs relative".split()
)
DIFFERENCES_SHOWN = 6  # a node's paired differences listed by name; the rest counted


def _named_difference(name: str) -> bool:
    return bool({w for w in re.split(r"[^a-z0-9]+", name.lower()) if w} & DIFFERENCE_WORDS)


@dataclass(frozen=True)
class PairedDifference:
    """One within-run difference over a node's seed re-runs: ``values`` one per re-run (in the
    re-runs' order, ``seeds`` their SEEDs), and the two metrics it is the difference of when every
    run's values say so (``parts``: (a, b) with value = a - b), else None."""

    name: str
    dataset: str | None
    values: tuple[float, ...]
    seeds: tuple[int | None, ...]
    parts: tuple[str, str] | None = None
    # the node's own search run's value (its SEED too): apart from the re-runs' statistics, which
    # leave the search run out, but shown (relay s9 ln2 025: a gain of -0.019 on SEED 0 left out
    # of "+0.0065, +0.0325 ... the same sign in 2 of 2" overstated its consistency)
    search: tuple[int | None, float] | None = None

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / len(self.values)

    @property
    def sd(self) -> float:
        m = self.mean
        return math.sqrt(math.fsum((v - m) ** 2 for v in self.values) / (len(self.values) - 1))

    @property
    def same_sign(self) -> int:
        """How many values share the mean's sign (a zero shares none)."""
        return sum(1 for v in self.values if v * self.mean > 0)

    def text(self) -> str:
        """``paired_l2_gain [synthetic] (= val_accuracy - val_accuracy_no_l2) +0.012, +0.008: mean
        +0.01, sd 0.0028, n=2, the same sign in 2 of 2``."""
        name = self.name + (f" [{self.dataset}]" if self.dataset else "")
        parts = f" (= {self.parts[0]} - {self.parts[1]})" if self.parts else ""
        n = len(self.values)
        out = (
            f"{name}{parts} {', '.join(f'{v:+.4g}' for v in self.values)}: mean {self.mean:+.4g}, "
            f"sd {self.sd:.2g}, n={n}, the same sign in {self.same_sign} of {n}"
        )
        if self.search is not None:
            seed, value = self.search
            at = f", SEED {seed}" if seed is not None else ""
            out += f" (its search run{at}, not in these: {value:+.4g})"
        return out


def paired_differences(
    runs: Sequence[Node],
    primary: tuple[str, str, str | None] | None = None,
    search: Node | None = None,
) -> list[PairedDifference]:
    """The within-run paired differences of a node's good seed re-runs ``runs`` (two at least):
    each metric but ``primary`` whose name says it is a difference (:data:`DIFFERENCE_WORDS`) and
    that every run reports validly, in the first run's order, with the two metrics it equals the
    difference of in every run (to :data:`RATIO_RTOL` of the larger part) when there are such.
    ``search``: the node itself, whose search run's value is given apart."""
    good = [r for r in runs if r.is_good]
    if len(good) < 2:
        return []
    per_run = [
        {m.key: m for m in (list(r.metrics) or ([r.metric] if r.metric else [])) if m.is_valid} for r in good
    ]
    out = []
    for key, m in per_run[0].items():
        if key == primary or not _named_difference(m.name) or any(key not in r for r in per_run[1:]):
            continue
        values = tuple(r[key].value for r in per_run)
        own = next((x for x in (search.metrics if search else ()) if x.key == key and x.is_valid), None)
        # the search run is one more run the formula must fit: fewer cells equal by chance
        with_search = per_run + ([{x.key: x for x in search.metrics if x.is_valid}] if own and search else [])
        out.append(
            PairedDifference(
                m.name,
                m.dataset,
                values,
                tuple(r.seed for r in good),
                _parts(with_search, key),
                (search.seed, own.value) if search and own else None,
            )
        )
    return out


def _parts(per_run: Sequence[Mapping[Any, Metric]], key: Any) -> tuple[str, str] | None:
    """The (a, b) of the first run's metrics with ``key``'s value = a - b in every run, or None.
    Only one pair may fit: where several do (cells equal on these seeds), None — a relay run's
    formula named the 200-epoch no-L2 cell, equal by chance, where the program subtracted the
    50-epoch one (s10 ln 015), and a choice by the names' words picked the headline, equal by chance
    to the no-L2 cell the program subtracted (s10 ln2 016): a wrong formula misleads more than none.
    A difference that is 0 in every run gets none (any two equal cells fit it: s10 ln 026)."""
    if all(r[key].value == 0 for r in per_run):
        return None
    keys = [k for k in per_run[0] if k != key and all(k in r for r in per_run[1:])]
    fits = [
        (a, b)
        for a in keys
        for b in keys
        if a != b
        and all(
            math.isclose(
                r[a].value - r[b].value,
                r[key].value,
                rel_tol=0.0,
                abs_tol=RATIO_RTOL * max(abs(r[a].value), abs(r[b].value), 1e-12),
            )
            for r in per_run
        )
    ]
    return (fits[0][0][0], fits[0][1][0]) if len(fits) == 1 else None


def differences_text(node_id: str, diffs: Sequence[PairedDifference], limit: int = DIFFERENCES_SHOWN) -> str:
    """``n0002's over its 2 seed re-runs: paired_l2_gain ...; +1 more`` (:meth:`PairedDifference.text`),
    "" without one."""
    if not diffs:
        return ""
    n = len(diffs[0].values)
    shown = "; ".join(d.text() for d in diffs[:limit])
    more = f"; +{len(diffs) - limit} more" if len(diffs) > limit else ""
    return f"{node_id}'s over its {n} seed re-runs: {shown}{more}"


def differences_line(items: Sequence[tuple[str, Sequence[PairedDifference]]]) -> str:
    """One sentence for the nodes' within-run paired differences (``items``: node id and its
    :func:`paired_differences`), the rule for judging them first; "" when none has one."""
    said = [t for nid, diffs in items if (t := differences_text(nid, diffs))]
    if not said:
        return ""
    return (
        "Within-run paired differences and ratios (mean, sd and n over the seed re-runs; each run "
        "measures both conditions on the same data, so judge such a difference by its own spread, "
        "not by the headline's seed noise): " + "; ".join(said) + "."
    )


# ------------------------------------------------------ what one SEED draws --
# The headline's seed sigma holds whatever the program draws from SEED: where SEED draws the data
# (a relay run's synthetic dataset and its label flips), it measures the data's variation, not
# only the method's — the judges wanted that said beside the band wherever a tie is called (relay
# s9 ln2 009-041). The run knows it when a metric is the same for two different methods on one
# SEED (their headlines differ there) and differs between SEEDs: a property of the SEED's draw.


@dataclass(frozen=True)
class SeedDraw:
    """A metric that one SEED's draw sets and no method changes: ``values`` SEED -> its value
    (the same in every run of that SEED that reports it), ``nodes`` two nodes whose headlines differ on
    one SEED while this metric agrees (two methods)."""

    name: str
    dataset: str | None
    values: dict[int, float]
    nodes: tuple[str, ...]

    def text(self, what: str = "data") -> str:
        """``one SEED draws new data here (bayes_val_accuracy [synthetic], alike for n0001 and n0002
        on one SEED though their headlines differ: 0.8535, 0.861, 0.8385 on SEED 0, 1, 2): this spread holds the
        data's variation, which a paired difference within one run (both conditions on one SEED's
        data) is free of`` — said once beside the band (relay s9 ln2 009-041); ``what``: "inputs" for a
        benchmark or a simulation."""
        seeds = sorted(self.values)
        label = f" [{self.dataset}]" if self.dataset else ""
        whose = what + ("'" if what.endswith("s") else "'s")
        return (
            f"one SEED draws new {what} here ({self.name}{label}, alike for {' and '.join(self.nodes)} "
            f"on one SEED though their headlines differ: {', '.join(num(self.values[s]) for s in seeds)} "
            f"on SEED {', '.join(str(s) for s in seeds)}): this spread holds the {whose} variation, which "
            f"a paired difference within one run (both conditions on one SEED's {what}) is free of"
        )


def seed_draw(
    nodes: Iterable[Node], primary: tuple[str, str, str | None], search_seed: int | None
) -> SeedDraw | None:
    """The first metric (in the runs' order) that shows what one SEED draws: over every good run
    (search runs at ``search_seed``, seed re-runs at their SEED), every run of one SEED that
    reports it has the same value, two runs of one SEED whose ``primary`` values differ (two
    methods) report it, and its value differs between SEEDs; None when no metric does (the run
    does not know what its SEED varies, and nothing is said)."""
    # SEED -> program (the node a re-run repeats) -> (primary value, metric key -> value)
    runs: dict[int, dict[str, tuple[float | None, dict[tuple[str, str, str | None], float]]]] = {}
    order: list[tuple[str, str, str | None]] = []
    for n in nodes:
        seed = n.seed if n.is_seed_eval else (n.seed if n.seed is not None else search_seed)
        program = n.parent_id if n.is_seed_eval else n.id
        if not n.is_good or seed is None or not program:
            continue
        values = {m.key: m.value for m in n.metrics if m.is_valid}
        order += [k for k in values if k not in order]
        head = (
            n.metric.value if n.metric is not None and n.metric.key == primary and n.metric.is_valid else None
        )
        runs.setdefault(seed, {})[program] = (head, values)
    for key in order:
        if key == primary:
            continue
        per_seed: dict[int, float] = {}
        pair: tuple[str, str] | None = None  # two methods: their headlines differ on one SEED
        alike = True
        for seed, programs in runs.items():
            have = {p: (h, v[key]) for p, (h, v) in programs.items() if key in v}
            if not have:
                continue
            first = next(iter(have.values()))[1]
            if any(not math.isclose(x, first, rel_tol=1e-9, abs_tol=1e-12) for _, x in have.values()):
                alike = False
                break
            per_seed[seed] = first
            heads = [(p, h) for p, (h, _) in have.items() if h is not None]
            pair = pair or next(
                (
                    (p, o)
                    for i, (p, h) in enumerate(heads)
                    for o, g in heads[i + 1 :]
                    if not math.isclose(h, g, rel_tol=1e-9, abs_tol=1e-12)
                ),
                None,
            )
        if not alike or pair is None or len(per_seed) < 2:
            continue
        if len({num(v, 12) for v in per_seed.values()}) < 2:
            continue
        return SeedDraw(key[0], key[2], per_seed, pair)
    return None
