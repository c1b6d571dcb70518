"""What kind of experiment a run is (training, benchmark, simulation), from its metrics' names or
its idea's words: the kind decides which criteria a review or critique applies and whether the
call gets the machine's facts (a benchmark is judged against its cores, caches and peak rate).
Used by the node calls (phases/evidence.py) and the report's figure calls (reporting/vlm.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable

KINDS = ("training", "benchmark", "simulation")
# the words of a metric's name (split at anything but a letter or digit) that say what kind of
# experiment measured it; a name may say two kinds (``train_time_s``: benchmark)
_METRIC_WORDS: dict[str, frozenset[str]] = {
    "training": frozenset(
        "loss acc accuracy f1 auc roc precision recall perplexity ppl bleu rouge top1 top5 iou dice "
        "nll mse rmse mae r2 map".split()
    ),
    "benchmark": frozenset(
        "time times seconds sec secs s ms us ns runtime walltime elapsed latency throughput flops "
        "gflops tflops mflops gflop speedup speed bandwidth cycles ops".split()
    ),
    "simulation": frozenset(
        "residual residuals drift conservation energy convergence cfl mass momentum linf l2error "
        "relerror".split()
    ),
}
# when no metric says it: words of the research idea
_IDEA_PATTERNS: dict[str, re.Pattern[str]] = {
    "training": re.compile(r"\b(train(ing|ed)?|neural|classifier|fine-?tun\w*|epochs?)\b", re.I),
    "benchmark": re.compile(
        r"\b(benchmark\w*|speed-?ups?|throughput|latency|g?flop/?s|kernels?|wall-?clock|timings?)\b", re.I
    ),
    "simulation": re.compile(
        r"\b(simulat\w*|solvers?|pdes?|finite[- ](difference|element|volume)s?|monte carlo|n-body|integrators?)\b",
        re.I,
    ),
}


def experiment_kinds(metric_names: Iterable[str], idea_text: str = "") -> list[str]:
    """The kinds of experiment (of :data:`KINDS`, in that order) whose criteria apply: those the
    metrics' names say; when none does, those the idea's words say; empty when neither says any
    (the templates then list every kind's criteria under "check what applies")."""
    words: set[str] = set()
    for name in metric_names:
        words.update(w for w in re.split(r"[^a-z0-9]+", str(name).lower()) if w)
    kinds = [k for k in KINDS if words & _METRIC_WORDS[k]]
    if kinds:
        return kinds
    return [k for k in KINDS if _IDEA_PATTERNS[k].search(idea_text or "")]


def shows_machine(kinds: list[str]) -> bool:
    """Whether a review or critique of an experiment of these kinds gets the machine's facts (the
    ``environment`` layer: cores, caches, peak rate): a benchmark is judged against them; a
    training run that also times itself (``train_time_s``) is not, and neither is a simulation;
    an experiment of unknown kind gets them (it may be a benchmark)."""
    return not kinds or ("benchmark" in kinds and "training" not in kinds)
