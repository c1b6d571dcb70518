"""A stage's evaluation protocol: what every node of the stage must measure the same way.

The stage's first working node fixes it (stages 2-4: the node the stage starts from, which its
own stage compared): the metric it reports (name, direction, dataset) and the *protocol
parameters* of its code — the parameters (``treesearch/parameters.py``: constants, options,
environment variables, and ``--name value`` flags of its run commands; not a loop's variable) whose
name says they define the data, the split, the sizes, the noise, the seed or the evaluation
(:func:`is_protocol_parameter`). Later nodes are shown it (layer ``evaluation_protocol``) and told
to keep it. A working node that reports another metric, or gives a protocol parameter the
reference also has another value, changed the protocol: it is marked ``incomparable`` with the
reason (``Node.incomparable``) and never ranked against the others.

What this cannot see: a parameter renamed or inlined (the reference's ``N_TRAIN = 300`` becomes a
literal ``60``), or a change with no name at all; the layer asks the model not to do that.
Detection is pure and deterministic (recorded files and metrics only), so ``resume`` and
``replay`` mark the same nodes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import CodeAnswer, Review, RunRecord, read_artifact
from ..base.fileio import read_jsonl
from ..base.paths import CODE_FILE, REVIEW_FILE, RUN_FILE, RunPaths
from ..base.pysource import parse_python
from ..phases.base import AnswerLike, code_answer
from ..phases.edits import text_files
from ..treesearch.parameters import parameters

if TYPE_CHECKING:
    from ..treesearch.node import Node

# name tokens of a parameter that defines the task, the data or the evaluation ...
PROTOCOL_WORDS = frozenset(
    "n size sizes train test val valid validation holdout eval evaluation sample samples points examples "
    "dataset data split splits fold folds noise noisy draws repeats trials seed seeds classes "
    "separation sep difficulty metric subset "
    # how a result is measured or checked (a benchmark's best-of-N, a correctness tolerance) and how
    # hard the data are (a class shift): relay runs were offered REPS, TOL and SHIFT as knobs to tune
    "reps rep repetitions repeat tol tolerance shift margin "
    # where the raw data sit (a feature offset, the class means or centres): a relay run's tuning
    # call offered OFFSET, and later MEAN0 / MEAN1 (the class separation), as knobs (s8 ln3 010)
    "offset offsets mean means center centers centre centres "
    # the raw data's own properties (RAW_SCALE beside RAW_SHIFT: a relay run offered it as a knob,
    # s9 ln2 005-026)
    "raw".split()
)
# ... unless another token says it is the method's own knob (N_EPOCHS, TRAIN_STEPS, BATCH_SIZE)
METHOD_WORDS = frozenset(
    "epoch epochs step steps iter iters iterations lr learning batch hidden layer layers dim width depth "
    "units tile tiles block threads workers lambda reg l1 l2 decay momentum dropout grad clip warmup "
    "patience beta alpha temperature heads restarts restart inits".split()
)
# words that say how much of something (a rate, a level, a share): they belong to whatever the other
# tokens name, so they never decide on their own — NOISE_RATE is the data's noise, DROPOUT_RATE
# the method's dropout, LEARNING_RATE the method's learning. "rate" as a method word once vetoed
# every noise rate (a relay run's NOISE_RATE was missing from the protocol while its sibling
# changed it)
QUANTITY_WORDS = frozenset(
    "rate rates ratio ratios frac fraction fractions share prob probability level levels amount "
    "pct percent scale std sigma strength count num".split()
)
# a quantity word standing alone names how the data are drawn (a feature SCALE, a noise STD or
# SIGMA): a relay run's protocol listed OFFSET but not SCALE = (1.0, 10.0), which equally defines
# the data (s8 ln 005); INIT_SCALE or LR_SCALE keep the other token's meaning
DATA_QUANTITIES = frozenset("scale scales std sigma".split())
_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_FLAG = re.compile(r"(?:^|\s)--?([A-Za-z][\w-]*)(?:=|\s+)([^\s-][^\s]*)")
VALUE_CHARS = 60


def is_protocol_parameter(name: str, data: frozenset[str] = frozenset()) -> bool:
    """Whether a parameter named ``name`` defines the data, split, sizes, noise, seed or metric
    (by its name's tokens: ``N_TRAIN``, ``noise``, ``NOISE_RATE``, ``testSize``, ``SEED`` yes;
    ``N_EPOCHS``, ``BATCH_SIZE``, ``LR``, ``LEARNING_RATE`` no). A quantity word (rate, fraction,
    level, ...) takes the meaning of the other tokens: it neither makes nor vetoes one. ``data``:
    the constants the program's data-making functions read (:func:`data_constants`), protocol
    parameters whatever their names but a method's word (EPOCHS in a data loader stays a knob)."""
    words = {t.lower() for t in _TOKEN.findall(name)}
    if words and words <= DATA_QUANTITIES:
        return True
    tokens = words - QUANTITY_WORDS
    if name in data:
        return not tokens & METHOD_WORDS
    return bool(tokens & PROTOCOL_WORDS) and not tokens & METHOD_WORDS


# a Python function whose name says it makes or draws the data (make_data, generate_dataset,
# sample_points, synth_task, load_inputs)
_DATA_FUNCTION = re.compile(
    r"(?:^|_)(?:data|dataset|datasets|synth|synthetic|points|problem|task|inputs?|blobs|moons)(?:_|$)", re.I
)


def data_constants(files: dict[str, str]) -> frozenset[str]:
    """The upper-case names the program's data-making Python functions read (``make_data`` reading
    ``FEAT_SCALE``): a constant that shapes the data is the protocol's whatever its name — a relay
    run's FEAT_SCALE = [1.0, 4.0], read in make_data, was offered as a knob to tune and left out of
    the protocol while FEAT_OFFSET beside it was in (s10 ln 005, 010, 016)."""
    names: set[str] = set()
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        tree = parse_python(text)
        if tree is None:
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _DATA_FUNCTION.search(fn.name):
                names.update(
                    n.id
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load)
                    and n.id.isupper()
                    and len(n.id) > 1
                )
    return frozenset(names)


@dataclass(frozen=True)
class EvalProtocol:
    """The protocol one node fixed: ``metric`` (name, direction, dataset) or None when it reported
    none, and its protocol parameters ``(name, value)`` in file order."""

    node_id: str
    metric: tuple[str, str, str | None] | None
    parameters: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "metric": list(self.metric) if self.metric else None,
            "parameters": [list(p) for p in self.parameters],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalProtocol:
        m = data.get("metric")
        return cls(
            node_id=str(data["node_id"]),
            metric=(str(m[0]), str(m[1]), None if m[2] is None else str(m[2])) if m else None,
            parameters=tuple((str(n), str(v)) for n, v in data.get("parameters") or ()),
        )


def _norm(value: str) -> str:
    one = " ".join(value.split()).strip("\"'")
    return one if len(one) <= VALUE_CHARS else one[: VALUE_CHARS - 3] + "..."


def protocol_parameters(answer: AnswerLike) -> tuple[tuple[str, str], ...]:
    """The protocol parameters of a code answer: its files' parameters and its run commands'
    ``--name value`` flags whose names :func:`is_protocol_parameter` accepts, each name once."""
    answer = code_answer(answer)
    found: dict[str, str] = {}
    files = text_files(answer)
    data = data_constants(files)
    for p in parameters(files):
        # a loop's variable is no parameter of the protocol: ``for n in (256, 512)`` in an analysis
        # script was listed as "n = (256, 512)" (relay s8 mm2 005-047); the conditions a loop sweeps
        # are reported under metric names of their own, which the protocol's metric covers
        if p.kind not in ("argv", "grid") and is_protocol_parameter(p.name, data) and p.name not in found:
            # an environment variable read with no default (C's getenv("SEED")) has no value in the
            # code: say where it comes from rather than show "SEED = " (a relay run's C program)
            if p.kind == "environment":  # set per run (the seed re-runs change SEED): not a fixed value
                found[p.name] = (
                    f"(from the environment, default {_norm(p.value)})"
                    if p.value
                    else "(from the environment)"
                )
            else:
                found[p.name] = _norm(p.value)
    for cmd in answer.run.commands if answer is not None else ():
        for m in _FLAG.finditer(cmd):
            name = "--" + m.group(1)
            if is_protocol_parameter(m.group(1)) and name not in found:
                found[name] = _norm(m.group(2))
    return tuple(found.items())


def node_answer(run_dir: Path, node_id: str) -> CodeAnswer | None:
    """The node's code answer as saved (``code_answer.json``, edits applied), or None."""
    return read_artifact(RunPaths(run_dir).node(node_id).file(CODE_FILE), CodeAnswer)


def headline_config(run_dir: Path, node_id: str) -> str:
    """Which configuration of a grid the node's primary metric is for, as its execution review
    answered (``review.json`` ``headline``: "L2=0.01, lr=0.1, 50 epochs"); "" when the run measured
    one configuration or the review did not say. The protocol names the metric; a grid's headline
    also needs its configuration, or a later node reports another cell of the grid under the same
    name (a relay run's second draft and improve nodes had to guess it)."""
    try:
        review = read_artifact(RunPaths(run_dir).node(node_id).file(REVIEW_FILE), Review)
    except ValueError:
        return ""
    said = (review.headline or "") if review is not None else ""
    return " ".join(said.split()).rstrip(".")


def protocol_of(node: Node, answer: CodeAnswer | None) -> EvalProtocol:
    """The protocol ``node`` follows: its primary metric's key and its code's protocol parameters."""
    m = node.metric
    return EvalProtocol(node.id, m.key if m is not None else None, protocol_parameters(answer))


def _metric_text(key: tuple[str, str, str | None]) -> str:
    name, direction, dataset = key
    return f"{name} ({direction}{', dataset ' + dataset if dataset else ''})"


def protocol_change(reference: EvalProtocol, node: EvalProtocol) -> str | None:
    """Why ``node`` does not follow ``reference`` (None when it does): another metric, or a
    protocol parameter both name with another value. The reason names each difference."""
    problems = []
    if reference.metric is not None and node.metric is not None and node.metric != reference.metric:
        problems.append(
            f"reports {_metric_text(node.metric)} where the stage measures {_metric_text(reference.metric)}"
        )
    ref = dict(reference.parameters)
    for name, value in node.parameters:
        if name in ref and value != ref[name]:
            problems.append(f"{name} = {value} instead of {ref[name]}")
    if not problems:
        return None
    return f"changed the evaluation protocol fixed by {reference.node_id}: " + "; ".join(problems)


def recorded_protocols(src: str | Path) -> dict[int, str]:
    """Stage -> the node that fixed its protocol in a recorded run (``eval_protocol`` events; the
    last one of a stage counts). A replay fixes the same node: in a free-running run, nodes that
    finished while the first marks were written can join the view of the decision the protocol
    was fixed at, and the earliest good node of that view need not be the one the recording took."""
    path = RunPaths(Path(src)).events
    if not path.exists():
        return {}
    return {
        int(ev["stage"]): str(ev["node_id"])
        for ev in read_jsonl(path)
        if ev.get("type") == "eval_protocol" and ev.get("node_id")
    }


def _run_identity(run_dir: Path, node: Node) -> str:
    """What makes a seed re-run an independent draw: its program (files, build and run commands),
    its SEED and what it produced (each command's output tails, its metrics), as one digest."""
    paths = RunPaths(run_dir).node(node.id)
    answer = read_artifact(paths.file(CODE_FILE), CodeAnswer)
    record = read_artifact(paths.file(RUN_FILE), RunRecord)
    # the program as saved (a node without a code answer: each part null, as before the type)
    saved = answer.to_json() if answer is not None else {}
    program = {k: saved.get(k) for k in ("files", "build", "run")}
    produced = [(o.stdout_tail, o.stderr_tail, o.exit_code) for o in (record.outputs if record else ())]
    metrics = [(m.name, m.value, m.dataset) for m in node.metrics]
    blob = json.dumps([program, node.seed, produced, metrics], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def distinct_seed_groups(
    run_dir: Path, nodes: Iterable[Node], key: tuple[str, str, str | None], before_stage: int | None = None
) -> dict[str, list[float]]:
    """Node id -> the values of metric ``key`` of its good seed re-runs, each independent draw once:
    a re-run byte-identical to an earlier one (same program, same SEED, same output — an improve
    node that changed nothing, re-run with the seeds its parent was) repeats that draw and is left
    out, so it adds no degree of freedom to the noise estimate. ``before_stage``: only the re-runs
    of earlier stages (what is fixed for the whole of that stage: every call of it shows the same
    estimate; a stage's own re-runs are made at its end)."""
    groups: dict[str, list[float]] = {}
    seen: set[str] = set()
    for n in nodes:
        m = n.metric
        if not (
            n.is_seed_eval and n.is_good and n.parent_id and m is not None and m.is_valid and m.key == key
        ):
            continue
        if before_stage is not None and n.stage >= before_stage:
            continue
        identity = _run_identity(run_dir, n)
        if identity in seen:
            continue
        seen.add(identity)
        groups.setdefault(n.parent_id, []).append(m.value)
    return groups
