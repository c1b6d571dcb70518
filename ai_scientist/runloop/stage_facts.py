"""A stage's facts as its summary call is shown them (:func:`stage_facts`): counts, the best node
and how it was chosen (its search run, its seed re-runs, the re-ranking over seeds), then every
search node of the stage ranked, each metric and cell cut at a word or a sentence, never mid-word.
The summary itself (the call, the stored file, the layer of later prompts) is :mod:`.stage_summary`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..treesearch.best import ABLATION_STAGE, comparable_metric, count_nodes, primary_metric_key
from ..treesearch.parameters import settings_text
from ..treesearch.seeds import (
    basis_text,
    concurrency_text,
    differences_line,
    dominance_text,
    is_rough,
    new_metrics,
    num,
    paired_differences,
    ratio_text,
    seed_draw,
    too_wide_text,
)
from ..treesearch.seeds import stderr_text as _stderr
from ..treesearch.stages import STAGES
from ..treesearch.tried import failure_text, ranked

if TYPE_CHECKING:
    from ..treesearch.journal import JournalView
    from ..treesearch.node import Metric, Node

IDEA_CHARS = 200  # the table's idea cell: cut at a word, never mid-word
RESULT_CHARS = 320  # the result cell: the primary metric, then whole metrics while they fit, "+N more"
SUMMARY_CHARS = 900  # the summary cell: the findings whole (the review's 500, a measurement caveat's 300)
ERROR_CHARS = 200


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def idea_text(node: Node) -> str:
    """A node's idea for a table cell: a tuning's settings one per "; " (:func:`settings_text`: a
    dict or a quoted value with spaces stays one value), any other idea as it is, "-" for none."""
    if not node.idea:
        return "-"
    return settings_text(node.idea) if node.operation == "tune" else node.idea


def cut_words(text: str, limit: int) -> str:
    """``text`` on one line, at most about ``limit`` characters, cut at a word (``…`` marks a cut)."""
    one = _one_line(text)
    if len(one) <= limit:
        return one
    head = one[:limit].rsplit(" ", 1)[0] if " " in one[:limit] else one[:limit]
    return head.rstrip(",;:") + " …"


_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(\"'])")


def cut_sentences(text: str, limit: int) -> str:
    """``text`` on one line: whole, or its first sentences up to ``limit`` characters followed by
    ``[…]``; a first sentence longer than ``limit`` is cut at a word (:func:`cut_words`)."""
    one = _one_line(text)
    if len(one) <= limit:
        return one
    ends = [m.end() for m in _SENTENCE_END.finditer(one, 0, limit)]
    if not ends:
        return cut_words(one, limit)
    return one[: ends[-1]] + " […]"


def metric_item(m: Metric, dataset: str | None = None) -> str:
    """``name=value`` with the dataset in parentheses unless it is ``dataset`` (already said)."""
    shown = f" ({m.dataset})" if m.dataset and m.dataset != dataset else ""
    return f"{m.name}={num(m.value)}{shown}"


def best_metric_text(node: Node) -> str:
    """``name=value (direction, dataset)`` of the node's primary metric, or ``no metric``."""
    m = node.metric
    if m is None:
        return "no metric"
    return f"{m.name}={num(m.value)} ({m.direction}{', ' + m.dataset if m.dataset else ''})"


def ordered_metrics(node: Node, parent: Node | None = None) -> tuple[list[Metric], int]:
    """``node``'s metrics in the order a reader needs them: the primary one, then those whose
    (name, dataset) ``parent`` did not report (the conditions this node added), then the rest;
    and how many are new. Without a parent, or one that reported no metric, the node's own order
    (nothing is "new" against nothing). A relay run's stage-3 node added 46 metrics after its
    parent's 13: listed in the node's order, the new ones never reached the summary."""
    metrics = list(node.metrics) or ([node.metric] if node.metric is not None else [])
    head: list[Metric] = []
    if node.metric is not None:
        head = [node.metric]
        metrics = [m for m in metrics if m.key != node.metric.key]
    had = {m.key for m in (parent.metrics if parent is not None else ())}
    if parent is not None and parent.metric is not None:
        had.add(parent.metric.key)
    if not had:
        return [*head, *metrics], 0
    new = [m for m in metrics if m.key not in had]
    return [*head, *new, *(m for m in metrics if m.key in had)], len(new)


def result_cell(node: Node, limit: int = RESULT_CHARS, parent: Node | None = None) -> str:
    """A good node's metrics, primary first, then those new relative to ``parent``
    (:func:`ordered_metrics`), each whole; those that do not fit in ``limit`` characters are
    counted (``+3 more``), never cut. A failed node: why; a node that changed the evaluation
    protocol: its metric and how it changed it; else still running."""
    if node.is_buggy:
        return "failed: " + cut_words(failure_text(node.error), ERROR_CHARS)
    if node.is_incomparable:  # its metric is not the stage's measurement: why, not a rank
        return f"{best_metric_text(node)}, not comparable: {cut_words(node.incomparable or '', ERROR_CHARS)}"
    if not node.is_good:
        return "running (no result yet)"
    metrics, _ = ordered_metrics(node, parent)
    if not metrics:
        return "no metric"
    dataset = metrics[0].dataset
    parts = [metric_item(metrics[0])]
    used = len(parts[0])
    for i, m in enumerate(metrics[1:], 1):
        item = metric_item(m, dataset)
        rest = len(metrics) - i - 1
        reserve = len(f"; +{rest} more") if rest else 0
        if used + 2 + len(item) + reserve > limit:
            parts.append(f"+{len(metrics) - i} more")
            break
        parts.append(item)
        used += 2 + len(item)
    return "; ".join(parts)


# why a seed statistic leaves the search run out, said where a prompt gives its first mean (a relay
# run's summariser recomputed the means with seed 0 in and found another leader)
SEARCH_RUN_APART = "the search run left out: the stage picked its best for a high search run, so counting it would bias the mean upwards"


def seed_basis(search_seed: int | None, rerun_seeds: Sequence[int], why: bool = True) -> str:
    """The sentence on what a seed statistic is over and what one SEED means across nodes: the
    means are over the re-runs only (:data:`SEARCH_RUN_APART`), and every node is run with the same
    SEED values, so two nodes' results on one SEED are on the same data where both keep the
    protocol's data code — a paired comparison (relay run s6: no prompt said so, 009, 015)."""
    reruns = ", ".join(str(s) for s in rerun_seeds) or "none"
    search = f"SEED {search_seed}" if search_seed is not None else "its search seed"
    apart = SEARCH_RUN_APART if why else 'the search run left out (why: under "Previous stages")'
    return (
        f"Seed statistics are over the seed re-runs only (SEED {reruns}), {apart} "
        f"(every search run has {search}). Every node is run with the same SEED values: where two "
        "nodes keep the protocol's data code, their results on one SEED are on the same data, a "
        "paired comparison (compare them seed by seed)."
    )


def seed_pairs(view: JournalView, node_ids: Sequence[str], key: Sequence[Any]) -> dict[str, dict[int, float]]:
    """Node id -> SEED -> the value of metric ``key`` on its good seed re-run of that SEED."""
    want = tuple(key)
    return {
        nid: {
            r.seed: r.metric.value
            for r in view.seed_runs(nid)
            if r.is_good
            and r.seed is not None
            and r.metric is not None
            and r.metric.is_valid
            and tuple(r.metric.key) == want
        }
        for nid in node_ids
    }


def search_values(view: JournalView, node_ids: Sequence[str], key: Sequence[Any]) -> dict[str, float]:
    """Node id -> the value of metric ``key`` on its search run (the run the search chose on)."""
    want, out = tuple(key), {}
    for nid in node_ids:
        m = view.get(nid).metric
        if m is not None and m.is_valid and tuple(m.key) == want:
            out[nid] = m.value
    return out


def _search_pair(search: tuple[int | None, Mapping[str, float]] | None, chosen: str | None) -> str:
    """The compared nodes on their search runs' SEED, the same data too, and each one's difference
    from ``chosen``: a paired comparison the per-SEED rows of the re-runs left out (relay s9 ln2
    015), said to lean towards the node the search chose on it."""
    seed, values = search if search else (None, {})
    if len(values) < 2 or chosen is None or chosen not in values:
        return ""
    at = f"SEED {seed}" if seed is not None else "their search SEED"
    diffs = ", ".join(f"{nid} {v - values[chosen]:+.4g}" for nid, v in values.items() if nid != chosen)
    return (
        f"; on the search runs ({at}, the same data; the search chose on these values, so a "
        f"difference there leans towards the node it chose): "
        + ", ".join(f"{nid} {num(v)}" for nid, v in values.items())
        + f", from {chosen}: {diffs}"
    )


def paired_text(
    pairs: Mapping[str, Mapping[int, float]],
    chosen: str | None,
    search: tuple[int | None, Mapping[str, float]] | None = None,
) -> str:
    """The re-ranking's means seed by seed — ``Per SEED (paired: ...): seed 1: n0001 0.742,
    n0002 0.729; seed 2: ...; paired differences from n0001: n0002 -0.013, +0.0045 (mean
    -0.00425).`` — over the SEEDs at least two of the nodes share; "" when none do. ``search``:
    the search runs' SEED and the nodes' values on it (:func:`search_values`), added apart."""
    seeds = sorted({s for p in pairs.values() for s in p})
    shared = [s for s in seeds if sum(s in p for p in pairs.values()) >= 2]
    if not shared:
        return ""
    rows = [
        f"seed {s}: " + ", ".join(f"{nid} {num(p[s])}" for nid, p in pairs.items() if s in p) for s in shared
    ]
    out = "Per SEED (the same data for every node that keeps the protocol's data code): " + "; ".join(rows)
    base = pairs.get(chosen or "") or {}
    diffs = []
    for nid, p in pairs.items():
        common = [s for s in shared if s in p and s in base]
        if nid == chosen or not common:
            continue
        d = [p[s] - base[s] for s in common]
        mean = sum(d) / len(d)
        diffs.append(f"{nid} {', '.join(f'{x:+.4g}' for x in d)} (mean {mean:+.4g})")
    if diffs:
        out += f"; paired differences from {chosen}, seed by seed: " + "; ".join(diffs)
    return out + _search_pair(search, chosen) + "."


SEED_TABLE_CHARS = 5000  # a node's metric x seed table: whole rows while they fit, then a count


def _mean_cell(values: list[float], of: int) -> str:
    """The run's one seed statistic (mean ± s.e. over the re-runs), ``n=`` when some lack it."""
    if not values:
        return "-"
    mean = sum(values) / len(values)
    out = num(mean)
    if len(values) > 1:
        se = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 / len(values) ** 0.5
        out += f" ± {_stderr(se)}"
    return out + (f" (n={len(values)})" if len(values) < of else "")


def same_as_parent(
    node: Node, reruns: Sequence[Node], parent: Node | None, parent_reruns: Sequence[Node]
) -> list[Any]:
    """The keys of ``node``'s metrics (its primary apart) that it measured exactly as ``parent``
    did: the same value on its search run and on every one of its good seed re-runs, each against
    the parent's re-run of the same SEED. Empty without a parent re-run of each of those SEEDs."""
    good = [r for r in reruns if r.is_good]
    if parent is None or not good:
        return []
    by_seed = {r.seed: r for r in parent_reruns if r.is_good and r.seed is not None}
    matched = [(r, by_seed[r.seed]) for r in good if r.seed is not None and r.seed in by_seed]
    if len(matched) < len(good):  # a SEED the parent was not re-run with: nothing to compare
        return []

    def values(n: Node) -> dict[Any, float]:
        return {m.key: m.value for m in (list(n.metrics) or ([n.metric] if n.metric else [])) if m.is_valid}

    mine, theirs = values(node), values(parent)
    pairs = [(values(r), values(p)) for r, p in matched]
    primary = node.metric.key if node.metric is not None else None
    return [
        k
        for k, v in mine.items()
        if k != primary and theirs.get(k) == v and all(k in a and b.get(k) == a[k] for a, b in pairs)
    ]


def seed_table(
    node: Node,
    reruns: Sequence[Node],
    parent: Node | None = None,
    limit: int = SEED_TABLE_CHARS,
    same: Sequence[Any] = (),
    same_shown_in: str | None = None,
) -> str | None:
    """``node``'s metrics by seed: one row per metric (each name once), a column for its search
    run, one per good seed re-run and the mean ± s.e. over the re-runs; rows in
    :func:`ordered_metrics` order (the primary, the metrics new relative to ``parent``, the rest),
    whole rows while they fit in ``limit`` characters, the rest counted. None without a good
    re-run. A capable model's stage summary saw the first 13 of a node's 59 re-run metrics, each
    named twice (result and re-run cells), and never the re-runs of the conditions it added.

    ``same``: the metrics the node measured exactly as ``parent`` on every seed
    (:func:`same_as_parent`): their rows come last and are said to be the parent's; when
    ``same_shown_in`` names the node whose table already showed them, one line replaces them (a
    relay run's stage summary read a parent's 14 unchanged metrics once per child: 024)."""
    return _seed_table(node, reruns, parent, limit, same, same_shown_in)[0]


def _seed_table(
    node: Node,
    reruns: Sequence[Node],
    parent: Node | None,
    limit: int,
    same: Sequence[Any],
    same_shown_in: str | None,
) -> tuple[str | None, bool]:
    """:func:`seed_table`, and whether it showed every row."""
    good = [r for r in reruns if r.is_good]
    if not good:
        return None, False
    order, new = ordered_metrics(node, parent)
    if not order:
        return None, False
    alike = set(same) if parent is not None else set()
    kept = [m for m in order if m.key not in alike]
    tail = [m for m in order if m.key in alike]
    per_run = [{m.key: m for m in (list(r.metrics) or ([r.metric] if r.metric else []))} for r in good]
    dataset = order[0].dataset
    who = ", ".join(f"{r.id} seed {r.seed}" if r.seed is not None else r.id for r in good)
    cols = [f"seed {r.seed}" if r.seed is not None else r.id for r in good]
    rows_said = "the primary metric"
    if parent is not None and new:
        rows_said += f", then the {new} metric{'' if new == 1 else 's'} {parent.id} did not report (what {node.id} added)"
    rows_said += ", then the rest" if len(kept) > 1 + new else ""
    if parent is not None and tail and same_shown_in is None:
        rows_said += f", then the {len(tail)} measured as {parent.id} on every seed"
    lines = [
        f"Seed re-runs of {node.id} ({who}): each metric on its search run, on each re-run, and the "
        f"mean ± s.e. over the re-runs only (the search run apart). Rows: {rows_said}.",
        f"| metric | search | {' | '.join(cols)} | mean ± s.e. |",
        "|---|---|" + "---|" * len(cols) + "---|",
    ]
    shown = kept if same_shown_in is not None else kept + tail
    after = ""
    if parent is not None and tail and same_shown_in is not None:
        names = ", ".join(_one_line(_metric_name(m, dataset)) for m in tail)
        after = (
            f"+{len(tail)} metric{'' if len(tail) == 1 else 's'} as {parent.id} on every seed (search run "
            f"and each re-run; their rows are in {same_shown_in}'s seed table): {names}"
        )
    used = sum(len(x) + 1 for x in lines) + len(after)
    for i, m in enumerate(shown):
        got = [run.get(m.key) for run in per_run]
        values = [g.value for g in got if g is not None and g.is_valid]
        cells = [num(g.value) if g is not None and g.is_valid else "-" for g in got]
        name = m.name + (f" [{m.dataset}]" if m.dataset and (i == 0 or m.dataset != dataset) else "")
        row = f"| {_one_line(name)} | {num(m.value)} | {' | '.join(cells)} | {_mean_cell(values, len(got))} |"
        if i and used + len(row) > limit:
            left = shown[i:]
            also = ", each one its parent also reported" if parent is not None and i >= 1 + new else ""
            lines.append(f"(+{len(left)} more metric{'' if len(left) == 1 else 's'} not shown{also})")
            return "\n".join([*lines, after] if after else lines), False
        lines.append(row)
        used += len(row) + 1
    if after:
        lines.append(after)
    return "\n".join(lines), True


def _metric_name(m: Metric, dataset: Any) -> str:
    """A metric's name as a seed table's row names it (its dataset when not the primary's)."""
    return m.name + (f" [{m.dataset}]" if m.dataset and m.dataset != dataset else "")


def rerun_cell(node: Node, reruns: Sequence[Node]) -> str | None:
    """The stage table's re-run cell of a node with a :func:`seed_table`: its re-runs and the
    primary metric's seed statistic, worded as the writer and the reviewer get them
    (:func:`ai_scientist.treesearch.seeds.rerun_text`); the rest is in the table below."""
    good = [r for r in reruns if r.is_good]
    if not good or node.metric is None:
        return None
    who = ", ".join(f"{r.id} seed {r.seed}" if r.seed is not None else r.id for r in good)
    values = [
        r.metric.value
        for r in good
        if r.metric is not None and r.metric.key == node.metric.key and r.metric.is_valid
    ]
    n = len(good)
    stat = "value (one re-run: no spread)" if n == 1 else "mean ± s.e."
    shown = f"{node.metric.name}={_mean_cell(values, n)}" if values else f"no {node.metric.name}"
    return f"{n} seed re-run{'' if n == 1 else 's'} ({who}), {stat}: {shown}; every metric by seed in its table below"


def seeds_text(agg: dict[str, Any] | None, node_id: str | None, seeds: Sequence[int] = ()) -> str | None:
    """The seed re-runs of the best node as a sentence: ``val_accuracy over 2 seed re-runs of
    n0001 (seeds 1, 2): mean 0.8658 ± 0.0088 s.e. (values 0.8745, 0.857).``; None without
    re-runs. ``seeds``: the re-runs' SEED values (two equal values then read as what they are)."""
    if not agg:
        return None
    try:
        n, mean = int(agg.get("n") or 0), float(agg["mean"])
    except (KeyError, TypeError, ValueError):
        return None
    of = f" of {node_id}" if node_id else ""
    if seeds:
        of += f" (seed{'' if len(seeds) == 1 else 's'} {', '.join(str(x) for x in seeds)})"
    if n == 1:  # one value has no spread: say so rather than print a mean with no error
        return f"{agg.get('name', 'metric')} over 1 seed re-run{of}: {num(mean)} (one re-run: no spread)."
    out = f"{agg.get('name', 'metric')} over {n} seed re-runs{of}: mean {num(mean)}"
    if agg.get("stderr") is not None:
        out += f" ± {_stderr(float(agg['stderr']))} s.e."
    values = [num(float(v)) for v in agg.get("values") or []]
    if values:
        out += f" (values {', '.join(values)})"
    return out + "."


def _groups_text(groups: dict[str, Any]) -> str:
    """The nodes a seed-noise estimate pooled, each with its re-run values ("n0002 0.902, 0.916")."""
    return (
        "; ".join(f"{nid} {', '.join(num(float(v)) for v in vals)}" for nid, vals in groups.items()) or "none"
    )


def rerank_tie(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Whether the re-ranking's winner won inside the seed noise: the other nodes whose seed mean
    is within the band for two means of the winner's (``noise_z x sigma x sqrt(1/n + 1/m)``, n and
    m their re-runs), each with that band; None when it won clearly, or there were no means or no
    noise estimate. A relay run's stage kept n0007 on a mean 6.25 above n0008's with a band of
    25.25 and called it the best (its judge: 'no statement that it is a tie')."""
    if not record:
        return None
    means = record.get("means") or {}
    chosen = record.get("chosen") or record.get("node_id")
    sigma = (record.get("noise") or {}).get("sigma")
    z = record.get("noise_z")
    won = means.get(chosen) if isinstance(means, Mapping) else None
    if not won or sigma is None or z is None:
        return None
    if int(won.get("n") or 0) < 1:
        return None
    level = []
    for nid, other in means.items():
        if nid == chosen or not other or int(other.get("n") or 0) < 1:
            continue
        band = float(z) * float(sigma) * math.sqrt(1 / int(won["n"]) + 1 / int(other["n"]))
        gap = abs(float(won["mean"]) - float(other["mean"]))
        if gap <= band:
            level.append({"node_id": nid, "mean": float(other["mean"]), "gap": gap, "band": band})
    if not level:
        return None
    return {"chosen": chosen, "mean": float(won["mean"]), "z": float(z), "level": level}


def rough_note(record: Mapping[str, Any] | None) -> str:
    """``" by a rough band, not settled"`` beside "a tie" when the band's sigma is rough
    (:func:`~ai_scientist.treesearch.seeds.is_rough`), else "": a stage's facts called a choice "a
    tie" three times and then "not a settled tie either" (relay s10 ln 009, 015)."""
    dof = ((record or {}).get("noise") or {}).get("dof")
    return " by a rough band, not settled" if is_rough(dof) else ""


def band_text(tie: Mapping[str, Any]) -> str:
    """The noise band(s) of a tie, once: ``band 0.0495`` or ``bands 0.0444-0.0495``."""
    bands = sorted({num(o["band"]) for o in tie["level"]}, key=float)
    return f"band {bands[0]}" if len(bands) == 1 else f"bands {bands[0]}-{bands[-1]}"


def tie_text(record: Mapping[str, Any] | None) -> str:
    """``n0002's mean 0.7975 ties n0005's 0.795, n0006's 0.7913 within the seed noise (band
    0.0495 for two means: 2 x sigma x sqrt(1/n + 1/m), n and m their re-runs): not a gain`` when
    :func:`rerank_tie` finds one, else ""."""
    tie = rerank_tie(record)
    if tie is None:
        return ""
    others = ", ".join(f"{o['node_id']}'s {num(o['mean'])}" for o in tie["level"])
    dof = ((record or {}).get("noise") or {}).get("dof")
    rough = f"; a rough sigma, {dof} degree{'' if dof == 1 else 's'} of freedom" if is_rough(dof) else ""
    return (
        f"{tie['chosen']}'s mean {num(tie['mean'])} ties {others} within the seed noise ({band_text(tie)} "
        f"for two means: {num(tie['z'])} x sigma x sqrt(1/n + 1/m), n and m their re-runs{rough}): not a gain"
        + (", and with so rough a sigma not a settled tie either" if rough else "")
    )


def rerank_lines(
    record: dict[str, Any] | None,
    pairs: Mapping[str, Mapping[int, float]] | None = None,
    search: tuple[int | None, Mapping[str, float]] | None = None,
    draw: str = "",
) -> list[str]:
    """The re-ranking over seeds at a stage's end as sentences (stage facts, ``logs``): the noise
    estimate with its numbers, the threshold, the candidates, their means and the decision;
    ``pairs`` (:func:`seed_pairs`): the compared nodes' values SEED by SEED, shown after the
    means with the paired differences (:func:`paired_text`)."""
    if not record:
        return []
    noise = record.get("noise") or {}
    name = (record.get("metric") or ["metric"])[0]
    sigma = noise.get("sigma")
    if sigma is None:
        return [f"Re-ranking over seeds: {record.get('decision')}."]
    groups = noise.get("groups") or {}
    dof = noise.get("dof")
    rough = is_rough(dof)
    # one node's spread driving the pooled sigma is said, with the sigma of the others (computed
    # from the recorded values, so a record written before this rule reads the same)
    driven = dominance_text({k: [float(x) for x in v] for k, v in groups.items()})
    how = f"{num(record['noise_z'])} x sigma x sqrt 2"
    ref = record.get("reference") or {}
    whose = f"{record['node_id']}'s {ref.get('from')}"
    wide = (
        too_wide_text(float(record["threshold"]), float(ref["value"]), whose, how)
        if isinstance(ref.get("value"), (int, float))
        else ""
    )
    out = [
        f"Re-ranking over seeds: {record['node_id']} led on its search run ({name} "
        f"{num(record['search_value'])}); seed noise sigma {num(sigma)} ("
        + (f"rough: {dof} degree{'s' if dof != 1 else ''} of freedom, " if rough else "")
        + f"{noise.get('estimator')}, over the re-runs done before this decision: {_groups_text(groups)}"
        + ("" if rough else f"; {dof} degrees of freedom")
        + (f"; {driven}" if driven else "")
        # a band as wide as the values themselves ranks nothing: said instead of "within the noise"
        + (
            f"); {wide}: no single-seed difference between them is a gain or a loss."
            if wide
            else f"); within the noise: a difference up to {num(record['threshold'])} ({how})"
            # a rough sigma calls neither a tie nor a gain (seeds.ROUGH_DOF): it says what it rests on
            + (
                f", but this band rests on {basis_text({k: list(v) for k, v in groups.items()})}: too few "
                "to call a tie or a gain between single-seed results by it (a 95 % interval for sigma "
                "spans several times the estimate)."
                if rough
                else "."
            )
        )
    ]
    if draw:  # what one SEED draws, beside the band (:func:`..treesearch.seeds.seed_draw`)
        out[0] += f" {draw[:1].upper()}{draw[1:]}."
    conc = concurrency_text(record.get("concurrency"))
    if conc:
        out.append(f"Measured: {conc}.")
    ratios = record.get("ratios") or {}
    if ratios:
        out.append("Ratio headline: " + "; ".join(ratio_text(nid, p) for nid, p in ratios.items()) + ".")
    ups = record.get("runners_up") or []
    if ups:
        # whose runners-up: the search-run leader's (a relay run read "Runners-up: n0001" right
        # after n0001 was named kept, the re-ranking having then put it first)
        out.append(
            f"Runners-up on their search runs, behind {record['node_id']}: "
            + ", ".join(f"{u['node_id']} {num(u['value'])}" for u in ups)
            + "."
        )
    means = record.get("means") or {}
    if means:
        parts = [
            f"{nid} {num(a['mean'])}"
            + (f" ± {_stderr(a['stderr'])}" if a.get("stderr") is not None else "")
            + f" (n={a['n']}: {', '.join(num(float(v)) for v in a.get('values') or [])})"
            if a
            else f"{nid} no good re-run"
            for nid, a in means.items()
        ]
        out.append("Means over the seed re-runs: " + ", ".join(parts) + ".")
        paired = paired_text(pairs or {}, record.get("chosen") or record.get("node_id"), search)
        if paired:
            out.append(paired)
    out.append(f"Decision: {_decision_text(record)}.")
    tie = tie_text(record)
    if tie:
        out.append(f"Within noise: {tie}.")
    return out


def _decision_text(record: Mapping[str, Any]) -> str:
    """The re-ranking's decision. When no runner-up was re-run, what they were judged against is
    said with its value, and runners-up level with the best's own search run are named as such: a
    relay run read "no runner-up within the seed noise of n0001" beside "Runners-up: n0010 0.707,
    n0011 0.707", n0001's own search value (the reference was its re-runs' mean, 0.7423)."""
    ref = record.get("reference") or {}
    if record.get("means") or record.get("candidates") or "threshold" not in record or not ref:
        return str(record.get("decision"))
    best = record.get("node_id")
    text = (
        f"no runner-up within the seed noise of {best}'s {ref.get('from')}, {num(float(ref['value']))} (the "
        f"reference runners-up are judged against; within {num(float(record['threshold']))}): {best} stays"
    )
    level = [
        u["node_id"] for u in record.get("runners_up") or [] if u.get("value") == record.get("search_value")
    ]
    if level and ref.get("from") != "search run":
        text += (
            f"; {', '.join(level)} {'equals' if len(level) == 1 else 'equal'} {best}'s search run "
            f"({num(float(record['search_value']))}, the same SEED): level on that seed, but not re-run"
        )
    return text


FINDING_ITEMS = 6  # new metrics a finding line states with their re-run values; the rest counted


def finding_lines(view: JournalView, findings: Mapping[str, Any] | None) -> list[str]:
    """One line per node re-run over seeds for its finding in metrics its parent did not report
    (``seeds.findings`` of the stage end, ``agent.multi_seed_eval.finding_reruns``): each new
    metric's search value, its value on every good re-run, mean ± s.e. and standard deviation
    (the spread), the first :data:`FINDING_ITEMS` of them; [] without such a node. A relay run's
    no-noise control, measured only in extra metrics, reached no later prompt with a spread."""
    out = []
    cap = (findings or {}).get("cap")
    for nid in (findings or {}).get("node_ids") or []:
        if nid not in view:
            continue
        node = view.get(nid)
        parent = view.get(node.parent_id) if node.parent_id and node.parent_id in view else None
        good = [r for r in view.seed_runs(nid) if r.is_good]
        who = ", ".join(f"{r.id} seed {r.seed}" if r.seed is not None else r.id for r in good)
        head = (
            f"Re-run over seeds for its finding in metrics {parent.id if parent else 'its parent'} did not "
            f"report (agent.multi_seed_eval.finding_reruns: up to {cap} node{'' if cap == 1 else 's'} a stage, "
            f"best-ranked first): {nid}"
        )
        if not good:
            out.append(f"{head}: no seed re-run of it worked, so its finding has no spread.")
            continue
        items = []
        new = new_metrics(node, parent)
        for m in new:
            got = [next((x for x in r.metrics if x.key == m.key and x.is_valid), None) for r in good]
            values = [g.value for g in got if g is not None]
            if len(values) < len(good):
                continue  # not every re-run reported it: no statistic (its table shows the gaps)
            mean = math.fsum(values) / len(values)
            name = m.name + (f" [{m.dataset}]" if m.dataset else "")
            text = f"{name}: search {num(m.value)}, re-runs {', '.join(num(v) for v in values)}"
            if len(values) > 1:
                sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
                text += f", mean {num(mean)} ± {_stderr(sd / math.sqrt(len(values)))} s.e. (sd {_stderr(sd)})"
            else:
                text += " (one re-run: no spread)"
            items.append(text)
        shown = items[:FINDING_ITEMS]
        more = f"; +{len(items) - len(shown)} more in its table below" if len(items) > len(shown) else ""
        missing = len(new) - len(items)
        gap = f"; {missing} not reported by every re-run (its table below)" if missing else ""
        out.append(
            f"{head}, over {len(good)} seed re-run{'' if len(good) == 1 else 's'} ({who}): {'; '.join(shown) or 'none of its new metrics'}{more}{gap}."
        )
    return out


def _beyond_cap(view: JournalView, findings: Mapping[str, Any] | None, bare: Sequence[Node]) -> str:
    """Why a node with a finding in new metrics got no re-run: the cap (``left_out``); "" if none."""
    left = set((findings or {}).get("left_out") or [])
    ids = [n.id for n in bare if n.id in left]
    if not ids:
        return ""
    cap = (findings or {}).get("cap")
    return (
        f" {', '.join(ids)} also report{'s' if len(ids) == 1 else ''} metrics {'its' if len(ids) == 1 else 'their'} "
        f"parent did not, but only {cap} such node{'' if cap == 1 else 's'} a stage {'is' if cap == 1 else 'are'} "
        "re-run over seeds (agent.multi_seed_eval.finding_reruns): a difference in those is not confirmed over seeds."
    )


def no_rerun_text(
    view: JournalView,
    stage: int,
    nodes: Sequence[Node],
    rerank: Mapping[str, Any] | None,
    findings: Mapping[str, Any] | None = None,
) -> str:
    """:func:`_no_rerun_text`, and the nodes left out by the cap of finding re-runs
    (``findings``: the stage end's record) with that reason."""
    text = _no_rerun_text(view, stage, nodes, rerank)
    if not text:
        return ""
    if (findings or {}).get("node_ids"):  # the finding re-runs above are re-runs beside the best's
        text = text.replace(
            "only the stage's best", "only the stage's best (besides the finding re-runs above)", 1
        )
    bare = [n for n in nodes if n.is_good and not any(r.is_good for r in view.seed_runs(n.id))]
    return text + _beyond_cap(view, findings, bare)


def _no_rerun_text(
    view: JournalView, stage: int, nodes: Sequence[Node], rerank: Mapping[str, Any] | None
) -> str:
    """The stage's good search nodes that got no seed re-run, and why — only the stage's best and
    the runners-up within the seed noise of it are re-run — so a summary does not call a one-seed
    difference of theirs confirmed (relay run s6: 'seed re-runs: -' with no reason, 024, 030);
    "" when every good node was re-run."""
    bare = [
        n
        for n in nodes
        if n.is_good and not n.is_incomparable and not any(r.is_good for r in view.seed_runs(n.id))
    ]
    if not bare:
        return ""
    ids = ", ".join(n.id for n in bare)
    head = f"No seed re-run: {ids} (one seed each: a difference they show is not confirmed over seeds)"
    record = rerank or {}
    best = record.get("node_id")
    if stage == ABLATION_STAGE:
        return f"{head}; the ablation stage re-runs no node over seeds."
    if not record:
        return f"{head}; only the stage's best is re-run over seeds (no re-ranking over seeds ran)."
    if "threshold" not in record:
        return f"{head}; only the stage's best is re-run: {record.get('decision')}."
    ref = record.get("reference") or {}
    search = record.get("search_value")
    reasons = []
    equal = [
        n.id
        for n in bare
        if search is not None and n.metric is not None and n.metric.value == search and n.id != best
    ]
    said = {u["node_id"] for u in record.get("runners_up") or [] if u.get("value") == search}
    if equal and not record.get("means") and ref.get("from") != "search run" and said >= set(equal):
        reasons.append(f"{', '.join(equal)}: level with {best}'s search run (the decision above)")
    elif equal:
        reasons.append(
            f"{', '.join(equal)}: {'its' if len(equal) == 1 else 'their'} headline equals {best}'s search run "
            f"({num(float(search or 0))}, the same SEED)"
        )
    rest = [n.id for n in bare if n.id not in equal and n.id != best]
    if rest:
        reasons.append(f"{', '.join(rest)}: not candidates")
    why = (
        f"; only the stage's best and its runners-up within {num(float(record['threshold']))} of its "
        f"{ref.get('from', 'value')} ({num(float(ref['value']))}) are re-run"
        if ref
        else ""
    )
    return f"{head}{why}" + (f" — {'; '.join(reasons)}." if reasons else ".")


def _decided_by(best: Node, seeds: dict | None, rerank: dict | None) -> str:
    """Next to the best node's search-run value: its seed re-runs' mean and which of the two the
    stage's choice rested on (a relay run quoted the search value of a node chosen by its mean)."""
    agg = (seeds or {}).get("aggregate") if (seeds or {}).get("node_id") == best.id else None
    if not agg:
        return ""
    mean = f"mean {num(agg['mean'])} over its {agg['n']} seed re-run{'s' if agg['n'] != 1 else ''}"
    if not rerank:  # not chosen in this stage (the ablation stage's carried node)
        return f" on its search run ({mean})"
    if rerank.get("means"):
        # chosen inside the noise band: not "the best" by a margin
        tie = (
            f", within the seed noise of another node's mean: a tie{rough_note(rerank)}, not a better result"
            if rerank_tie(rerank)
            else ""
        )
        return f" on its search run; {mean}, which decided the choice (re-ranking over seeds, below){tie}"
    return f" on its search run, which decided the choice ({mean})"


def stage_facts(
    view: JournalView,
    stage: int,
    best: Node | None,
    seeds: dict | None,
    rerank: dict | None = None,
    figures: Mapping[str, str] | None = None,
    seed_info: tuple[int, Sequence[int], bool] | None = None,
) -> list[str]:
    """What a stage did, for its summary: ``[header, row, ...]`` — counts, the stage's best node
    (worded per stage: handed to the next stage, or the run's best at the last; in the ablation
    stage the node the ablations were run against), its seed re-runs and the re-ranking over
    seeds (``rerank``), then every search node of the stage ranked (the ``head_rows`` layer policy
    cuts the last rows first); a node that changed the evaluation protocol is listed with why.
    ``figures``: node id -> what its figure review found (:func:`figure_finding`), after the
    node's summary. ``seed_info``: the search runs' SEED, the re-runs' SEEDs and whether to say why
    the search run is left out (not when the prompt's earlier stages said it), said before the
    first seed statistic (:func:`seed_basis`)."""
    figures = figures or {}
    nodes = [view.get(i) for i in view.ids("search", stage)]
    # the counts as the status line, the stored summary and the writer's findings count them
    c = count_nodes(view.get(i) for i in view.ids("all", stage))
    changed = f", {c.incomparable} not comparable: changed the evaluation protocol" if c.incomparable else ""
    apart = f"; seed re-runs, counted apart: {c.seed_runs} ({c.seed_good} good)" if c.seed_runs else ""
    head = [f"Nodes: {c.nodes} ({c.good} good, {c.buggy} failed{changed}){apart}."]
    stat = c.seed_runs or (seeds or {}).get("aggregate") or (rerank or {}).get("means")
    if stat and seed_info is not None:  # before the first mean of the facts: what it is over
        head.append(seed_basis(*seed_info))
    last = stage == max(STAGES)
    if best is None:
        head.append("No node is the run's best." if last else "No node is handed to the next stage.")
    else:
        label = "Best node of the run" if last else "Best node handed to the next stage"
        if rerank_tie(rerank):  # kept inside the seed noise of another node: no "best" by a margin
            label = (
                f"Node kept {'for the run' if last else 'for the next stage'} (a tie within the seed noise"
                f"{rough_note(rerank)})"
            )
        where = ""
        if stage == ABLATION_STAGE and best.stage < stage:
            where = (
                f" (from stage {best.stage}: the node this stage's ablations were run against; an ablation"
                " measures what a part contributes and is never the best)"
            )
        elif best.stage < stage:
            where = f" (from stage {best.stage}: no node of this stage beat it)"
        decided = _decided_by(best, seeds, rerank)
        head.append(
            f"{label}: {best.id}{where} {best_metric_text(best)}{decided}: {_one_line(best.summary or '-')}"
        )
    seeded = (seeds or {}).get("node_id") or (best.id if best else None)
    used = (
        sorted(n.seed for n in view.seed_runs(seeded) if n.is_good and n.seed is not None) if seeded else []
    )
    seed_line = seeds_text((seeds or {}).get("aggregate"), seeded, used)
    if seed_line:
        head.append(seed_line)
    reason = (seeds or {}).get("incomparable_reason")
    if reason:
        head.append(f"Seed re-runs not averaged: {reason}.")
    head += finding_lines(view, (seeds or {}).get("findings"))
    # each re-run node's within-run paired differences with their spread over its re-runs
    paired = differences_line(
        [
            (n.id, paired_differences(view.seed_runs(n.id), n.metric.key if n.metric else None, n))
            for n in ranked(nodes)
        ]
    )
    if paired:
        head.append(paired)
    compared = list((rerank or {}).get("means") or {})
    metric = (rerank or {}).get("metric")
    if compared and metric:
        search = (seed_info[0] if seed_info else None, search_values(view, compared, metric))
        mkey = (str(metric[0]), str(metric[1]), None if metric[2] is None else str(metric[2]))
        drawn = seed_draw([n for n in view.nodes if n.stage <= stage], mkey, search[0])
        head += rerank_lines(
            rerank, seed_pairs(view, compared, metric), search, drawn.text() if drawn is not None else ""
        )
    else:
        head += rerank_lines(rerank)
    bare = no_rerun_text(view, stage, nodes, rerank, (seeds or {}).get("findings"))
    if bare:
        head.append(bare)
    if stage == ABLATION_STAGE and best is not None and nodes:
        head.append(ablations_heading(best, nodes))
    key = primary_metric_key([n for n in nodes if n.is_good])
    head += [
        "| node | operation | idea | result | seed re-runs | summary |",
        "|---|---|---|---|---|---|",
    ]
    rows, tables = [], []
    # a parent's metrics its children measured unchanged on every seed: shown in the parent's own
    # table when it has one here, else in its first child's; every other child says so in a line
    with_table = {n.id for n in nodes if n.is_good and any(r.is_good for r in view.seed_runs(n.id))}
    shown_in: dict[str, str] = {}
    for n in ranked(nodes):
        other = " (other metric)" if n.is_good and comparable_metric(n, key) is None else ""
        summary = "(the best node: its findings are above)" if best is not None and n.id == best.id else None
        parent = view.get(n.parent_id) if n.parent_id and n.parent_id in view else None
        table = None
        if n.is_good:
            own = view.seed_runs(n.id)
            same = same_as_parent(n, own, parent, view.seed_runs(parent.id)) if parent is not None else []
            rows_in: str | None = None
            if parent is not None and same:
                rows_in = parent.id if parent.id in with_table else shown_in.get(parent.id)
            table, whole = _seed_table(n, own, parent, SEED_TABLE_CHARS, same, rows_in)
            if parent is not None and same and rows_in is None and whole:
                shown_in[parent.id] = n.id
        result, reruns = result_cell(n, parent=parent), None
        if table is not None:  # a blank line first: the stage's table ends there
            tables.append("\n" + table)
            reruns = rerun_cell(n, view.seed_runs(n.id))
            order = ordered_metrics(n, parent)[0]
            if not n.is_incomparable and len(order) > 1:  # every metric is in the table: named once
                result = f"{metric_item(order[0])}; +{len(order) - 1} more, by seed in its table below"
        said = summary or cut_sentences(n.summary or "-", SUMMARY_CHARS)
        if figures.get(n.id):  # what the node's figures showed a reviewer (a curve's instability, ...)
            said = f"{said} Figure review: {figures[n.id]}"
        rows.append(
            f"| {n.id} | {n.operation} | {cut_words(idea_text(n), IDEA_CHARS)} | {result}{other} "
            f"| {_one_line(reruns or '-')} | {said} |"
        )
    # each node's metric x seed table after the stage's table, in its rank order (the layer's
    # head_rows policy cuts from the end: the lowest-ranked node's table first)
    return ["\n".join(head), *rows, *tables]


def ablations_heading(best: Node, nodes: Sequence[Node]) -> str:
    """The ablation stage's heading over its table: what each row is measured against, and when
    no node of the stage gave a result to compare with ``best``, why (a relay run's stage-4
    summary had an "Ablations" heading with nothing measured under it: s8 mm2 036)."""
    m = f" ({best.metric.name} {num(best.metric.value)})" if best.metric is not None else ""
    if any(n.is_good for n in nodes if n.id != best.id):
        return f"Ablations, each measured against {best.id}{m}:"
    c = count_nodes(n for n in nodes if n.id != best.id)
    why = [
        f"{k} {what}"
        for k, what in (
            (c.buggy, "failed"),
            (c.incomparable, "changed the evaluation protocol"),
            (c.running, "unfinished"),
        )
        if k
    ]
    return f"No ablation of {best.id}{m} gave a result to compare with it ({', '.join(why) or 'none ran'}); the stage's nodes:"


FIGURE_CHARS = 1200  # a node's figure-review cell: the verdict and its whole problems (400 kept one of four: relay s9 ln 015)


def figure_finding(critique: Mapping[str, Any] | None) -> str:
    """What a node's figure review (``vlm.json``'s ``critique``: shows, problems, valid, reason)
    found, for its stage's facts: a figure judged not valid with why, else the problems it named;
    "" when it found none (or the review was skipped). A relay run's stage summaries never saw that
    a reported value was an unstable end-of-training snapshot, which only the curves showed."""
    if not isinstance(critique, Mapping):
        return ""
    problems = [_one_line(str(p)).rstrip(".;") for p in critique.get("problems") or [] if str(p).strip()]
    if critique.get("valid") is False:
        reason = _one_line(str(critique.get("reason") or "")).rstrip(".;")
        problems = [reason] if reason else problems
        lead = "not valid: "
    elif problems:
        lead = ""
    else:
        return ""
    if not problems:
        return f"{lead}no reason given"
    # whole problems, each at most cut at a sentence end: a cell cut mid-word ("one seed and no
    # error …") said less than it seemed (relay s6 mm 009, 019)
    shown = [cut_sentences(problems[0], FIGURE_CHARS - len(lead))]
    for p in problems[1:]:
        if len(lead) + len("; ".join([*shown, p])) + len(" (+99 more problems)") > FIGURE_CHARS:
            break
        shown.append(p)
    more = len(problems) - len(shown)
    return lead + "; ".join(shown) + (f" (+{more} more problem{'s' if more > 1 else ''})" if more else "")
