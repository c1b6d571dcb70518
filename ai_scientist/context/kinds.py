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


# the words of an idea that say its code is compiled, parallel or tuned to the hardware: then the
# environment layer lists build tools, MPI, modules, native libraries, caches and vector units
_MACHINE_WORDS = re.compile(
    r"(\bc\+\+|\b(in|written in|a|plain|ansi|iso) c\b|\bc(89|99|11|17)\b|\bfortran\b|\bcuda\b|\bopencl\b|"
    r"\bopenmp\b|\bmpi\b|\bsimd\b|\bavx\w*|\bsse\d*\b|\bneon\b|\bvectori[sz]\w*|\bcompil\w*|\bgcc\b|"
    r"\bg\+\+|\bclang\b|\bicc\b|\bnvcc\b|\bmakefile\b|\bcmake\b|\bcache[- ]?(block\w*|lines?|sizes?|"
    r"miss\w*|friendly|oblivious|aware)\b|\bl[123] cache|\broofline\b|\bmemory bandwidth\b|\bnuma\b|"
    r"\brust\b|\bjulia\b)",
    re.I,
)
_COMPILED_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".f", ".f90", ".f95", ".cu", ".rs", ".jl")


def needs_machine_details(idea_text: str, code_file: str = "") -> bool:
    """Whether the run's environment layer lists what compiled, parallel or hardware-tuned work
    needs (build tools and their versions, MPI, environment modules, native libraries, the CPU's
    caches and vector units): when the idea's words name such work (a compiled language, a
    compiler, MPI / OpenMP, SIMD, caches, a roofline) or benchmark it (:data:`_IDEA_PATTERNS`),
    or its seed code is in a compiled language. Otherwise — a pure-Python task — the layer is
    the compact form (docs/context.md, "Layers and prompts"). Decided once per run, from the idea:
    the environment is in the system message, the same bytes for every call (the prefix cache)."""
    if code_file and code_file.lower().endswith(_COMPILED_SUFFIXES):
        return True
    text = idea_text or ""
    return bool(_MACHINE_WORDS.search(text) or _IDEA_PATTERNS["benchmark"].search(text))
