"""Every number in the paper traced to a measurement of the run (``paper/claims.json``).

After the writeup, each number of the paper's text, tables and captions (``paper.tex`` between
``\\begin{document}`` and ``\\end{document}``) is matched against what the run measured or was
told: every node's metrics (seed re-runs included; the grader's when the run has one, ``graded
metric``), each stage's seed statistic (mean, standard error, number of re-runs, each value), the
node counts of :mod:`ai_scientist.treesearch.best`, the stage numbers and seeds, the saved result
files (JSON) of each stage's best node and its seed re-runs, then of every other good search node
(the writer is given them all), the numbers each good node's run commands printed (``run
output``), the machine record's numbers (``machine``: cache sizes in bytes, KiB, MiB or GiB,
cores), the numbers of the parameters each good node's code sets
(``code parameter``: an epoch count stated as the setup), the resolved config, every number of
the findings the model writer was given (``writer input``: ``paper/writer_inputs.md``, e.g. a stage
summary's seed-noise band or a difference it states), the idea's own numbers and the references'
years. With a grader,
what each program reported about itself (``grade.json`` ``self_reported``) is matched last: a
number only such a value matches is ``self-reported metric``, a claim the grader did not make
(the program's own ``metrics.json`` is then not read as a result file).

Matching rules (a number matches a source when one of them holds):

- a decimal printed with ``d`` digits after the point matches a value that rounds to it at ``d``
  digits (``0.795`` matches 0.79499999); a percentage ``85.1 %`` matches 0.851 (the value x 100)
  or 85.1 (a metric already in percent); ``1,234`` is 1234; ``1.2e-3`` is rounded at its mantissa's
  digits; the sign is ignored (``-0.5`` and a loss of 0.5 lower are one value);
- an integer matches an integer source exactly (counts, stages, seeds, config values, years), or a
  measured value of at least 10 that rounds to it.

A sentence comparing two numbers that both trace to one metric with a word their values
contradict ("0.84, higher than 0.87") is listed under ``contradictions`` (:func:`comparisons`)
and goes back to the writer with the untraced numbers.

A number nothing matches is ``unmatched``, with the measured values nearest to it
(:func:`nearest`): the model writer gets those back in its reflection rounds
(:func:`writeup._reflect`) and the reviewers see them (:func:`review.measured_facts`).

Not numbers of the paper's: anything inside ``\\ref``/``\\label``/``\\cite``/``\\includegraphics``
arguments (keys, figure file names, sizes), a digit that is part of a word (``n0007``, ``L2``,
``GPT-4``, ``135M``), the preamble and comments, and the pipeline's quoted records: ``\\texttt{}``
spans (node ids, file names, error messages) and ``quote`` environments (a node's plan quoted
verbatim). A model's text cannot hold those: :func:`latex.latex_text` escapes every backslash it
does not whitelist.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base.artifacts import CodeAnswer, read_artifact
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import CODE_FILE, GRADE_FILE, NodePaths, RunPaths
from ..treesearch.parameters import parameters
from .runread import RunView, load_run, read_text, seed_statistics

MAX_FILE_NUMBERS = 5_000  # numbers taken from saved result files (a long curve is not a claim's source)
MAX_OUTPUT_NUMBERS = 2_000  # numbers taken from one node's printed output
CONTEXT_CHARS = 100
NEAREST = 3  # measured values named beside an unmatched number (what the writer may have meant)
NEAR = 0.5  # ... each within this relative distance of the printed value
SELF_REPORTED = "self-reported metric"  # what a graded node's program said of itself (grade.json)

# \cmd[opt]{arg}: the argument is a key, a file name or a length, never a claim
_KEY_COMMANDS = (
    "ref|eqref|autoref|label|cite|citep|citet|includegraphics|input|include|bibliography|"
    "bibliographystyle|usepackage|documentclass|setlength|vspace|hspace|begin|end|url|"
    "DeclareMathOperator\\*?|newcommand|renewcommand|hline|cline|typeout"
)
_KEY_CMD = re.compile(r"\\(?:" + _KEY_COMMANDS + r")\*?(?:\[[^\]]*\])?(?:\{[^{}]*\})?")
# a TeX register number (\box0, \ht0: the template's figure measuring), never a claim
_REGISTER = re.compile(r"\\(?:box|setbox|ht|dp|wd|count|dimen|skip)\d+")
# an exponent set from a superscript (x², n³): no claim; a power of ten's (10⁻⁹) is read by _POWER
_EXPONENT = re.compile(r"(?<!10)\\textsuperscript\{[^{}]*\}")
_OPTIONS = re.compile(r"\\[A-Za-z]+\*?\[[^\]]*\]")  # \begin{figure}[!htbp], \\[2pt]
_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
_QUOTE = re.compile(r"\\begin\{quote\}.*?\\end\{quote\}", re.S)
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.\\])(?<![A-Za-z]-)"  # not part of a word: n0007, L2, GPT-4
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?(?:[eE](?P<exp>[+-]?\d+))?"
    r"(?![A-Za-z0-9_]|\.\d)(?P<pct>\s*\\?%)?"
)
_YEAR = re.compile(r"year\s*=\s*[{\"]?(\d{4})")
# a power of ten as a paper (or an idea) prints it: $10^{-9}$, 2.5 \times 10^{-3}, 10^-9 in prose
# (escaped: 10\textasciicircum{}-9): one number, not a 10 and a 9 (relay s8 mm2: the idea's 1e-9,
# printed as $10^{-9}$, was flagged as no record of the run)
_CARET = r"(?:\^|\\textasciicircum\{\}|\\textsuperscript(?=\{))"
_POWER = re.compile(
    r"(?<![A-Za-z0-9_.\\])(?:(?P<mant>\d+)(?:\.(?P<frac>\d+))?\s*"
    r"(?:\\ensuremath\{\\times\}|\\times|\\cdot|x|\u00d7)\s*)?"
    rf"10\s*{_CARET}\s*(?:\{{|\\\{{)?\s*(?P<exp>[-+]?\d+)(?:\s*(?:\}}|\\\}}))?(?![\d.])"
)


@dataclass(frozen=True)
class Measurement:
    """One value the run recorded, and where (``source``: e.g. ``n0005 val_accuracy``)."""

    value: float
    source: str
    kind: str  # metric, seed statistic, count, stage, seed, result file, config, idea, reference
    integer: bool = False
    one_seed: bool = False  # one seed re-run's value (a node's search run and the seed mean are not)
    metric: str | None = None  # the metric it is a value of (a node's metric, a seed statistic)
    direction: str | None = None  # that metric's direction: maximize / minimize


@dataclass(frozen=True)
class Claim:
    """One number printed in the paper: its text, value, printed precision and where it stands."""

    text: str
    value: float
    decimals: int
    percent: bool
    line: int
    context: str
    start: int = -1  # where it stands in the text it was read from (the comparison check's pairs)
    end: int = -1

    @property
    def is_integer(self) -> bool:
        return self.decimals == 0 and not self.percent and "e" not in self.text.lower()


# ------------------------------------------------------------------ extraction --


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with [start, end) replaced by spaces (newlines kept, so offsets and lines stay)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _blank_all(text: str, pattern: re.Pattern[str]) -> str:
    for m in reversed(list(pattern.finditer(text))):
        text = _blank(text, m.start(), m.end())
    return text


def _blank_texttt(text: str) -> str:
    """Blank every ``\\texttt{...}`` (braces matched; ``\\{`` and ``\\}`` are text)."""
    out = text
    for m in reversed(list(re.finditer(r"\\texttt\{", text))):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "\\":
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out = _blank(out, m.start(), i)
    return out


def paper_body(tex: str) -> tuple[str, int]:
    """The document body with everything that is not a claim blanked, and the line it starts on."""
    begin = tex.find("\\begin{document}")
    end = tex.rfind("\\end{document}")
    start = begin + len("\\begin{document}") if begin >= 0 else 0
    body = tex[start : end if end > start else len(tex)]
    for pattern in (_COMMENT, _QUOTE):
        body = _blank_all(body, pattern)
    body = _blank_texttt(body)
    for pattern in (_KEY_CMD, _REGISTER, _OPTIONS, _EXPONENT):
        body = _blank_all(body, pattern)
    return body, tex.count("\n", 0, start) + 1


def _context(text: str, start: int, end: int) -> str:
    """The sentence around ``text[start:end]`` (a table row: its line), at most
    :data:`CONTEXT_CHARS` on either side: what the writer and the reviewers are shown of where a
    number stands."""
    lo = max(text.rfind("\n", 0, start) + 1, text.rfind(". ", 0, start) + 2, start - CONTEXT_CHARS)
    ends = [i for i in (text.find("\n", end), text.find(". ", end)) if i >= 0]
    hi = min([*ends, len(text), end + CONTEXT_CHARS])
    if hi < len(text) and text[hi] == ".":
        hi += 1  # the sentence's own full stop
    return " ".join(text[lo:hi].split())


def _power_claims(text: str, first_line: int) -> list[Claim]:
    """The powers of ten of ``text`` (:data:`_POWER`), each one number: ``2.5 \\times 10^{-3}`` is
    0.0025 printed with 4 decimals (as ``2.5e-3``)."""
    out = []
    for m in _POWER.finditer(text):
        frac, exp = m.group("frac") or "", int(m.group("exp"))
        mantissa = float(f"{m.group('mant')}.{frac or 0}") if m.group("mant") else 1.0
        out.append(
            Claim(
                text=m.group(0).strip(),
                value=mantissa * 10.0**exp,
                decimals=len(frac) - exp,
                percent=False,
                line=first_line + text.count("\n", 0, m.start()),
                context=_context(text, m.start(), m.end()),
                start=m.start(),
                end=m.end(),
            )
        )
    return out


def extract_numbers(text: str, first_line: int = 1) -> list[Claim]:
    """Every number of ``text`` (see the module docstring for what is not one), in order; a power
    of ten (``$10^{-9}$``, ``1.5 \\times 10^{3}``) is one number."""
    powers = _power_claims(text, first_line)
    out = list(powers)
    for m in _NUMBER.finditer(text):
        if any(p.start <= m.start() < p.end for p in powers):
            continue
        whole = m.group("int").replace(",", "")
        frac = m.group("frac") or ""
        exp = int(m.group("exp")) if m.group("exp") else 0
        value = float(f"{whole}.{frac or 0}") * 10.0**exp
        decimals = len(frac) - exp  # negative for 1.2e+04: rounded to the hundreds
        context = _context(text, m.start(), m.end())
        out.append(
            Claim(
                text=m.group(0).strip().replace("\\%", "%"),
                value=value,
                decimals=decimals,
                percent=bool(m.group("pct")),
                line=first_line + text.count("\n", 0, m.start()),
                context=context,
                start=m.start(),
                end=m.end(),
            )
        )
    return sorted(out, key=lambda c: c.start)


# ---------------------------------------------------------------- measurements --


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _m(
    value: float,
    source: str,
    kind: str,
    one_seed: bool = False,
    metric: str | None = None,
    direction: str | None = None,
) -> Measurement:
    return Measurement(float(value), source, kind, float(value).is_integer(), one_seed, metric, direction)


def _leaves(data: Any, path: str, out: list[tuple[str, float]], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(data, dict):
        for k, v in data.items():
            _leaves(v, f"{path}.{k}" if path else str(k), out, limit)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _leaves(v, f"{path}[{i}]", out, limit)
    elif _num(data):
        out.append((path, float(data)))


def grade_record(view: RunView, node_id: str) -> dict[str, Any]:
    """The grader's verdict on a node (``grade.json``; {} when the run has no grader or the node
    was not graded): ``graded`` and ``self_reported`` metrics, ``mismatches``, or ``error``."""
    try:
        data = read_json(NodePaths(view.node_dir(node_id)).file(GRADE_FILE), default=None)
    except (ValueError, OSError):
        data = None
    return data if isinstance(data, dict) else {}


def _where(node: dict[str, Any]) -> str:
    if node.get("operation") != "seed_eval":
        return ""
    return f" (seed {node.get('seed')} re-run of {node.get('parent_id')})"


def _node_measurements(view: RunView) -> list[Measurement]:
    """Every node's recorded metrics: the grader's (``graded metric``) when the node was graded,
    else what its program wrote (``metric``)."""
    out = []
    for nid, node in view.nodes.items():
        kind = "graded metric" if isinstance(grade_record(view, nid).get("graded"), list) else "metric"
        metrics = view.metrics(nid) + ([node["metric"]] if isinstance(node.get("metric"), dict) else [])
        for metric in metrics:
            if isinstance(metric, dict) and _num(metric.get("value")):
                name = str(metric.get("name", "metric"))
                source = f"{nid} {name}{_where(node)}"
                seed_run = node.get("operation") == "seed_eval"
                out.append(_m(metric["value"], source, kind, seed_run, name, metric.get("direction")))
    return out


def _self_reported_measurements(view: RunView) -> list[Measurement]:
    """With a grader: what each graded node's program reported about itself (``grade.json``
    ``self_reported``), last in priority: a number that matches only one of these states a claim
    the grader did not make (``self-reported metric``)."""
    out = []
    for nid, node in view.nodes.items():
        for metric in grade_record(view, nid).get("self_reported") or []:
            if isinstance(metric, dict) and _num(metric.get("value")):
                name = metric.get("name", "metric")
                out.append(_m(metric["value"], f"{nid} {name}{_where(node)}, self-reported", SELF_REPORTED))
    return out


def _seed_measurements(view: RunView) -> list[Measurement]:
    return [_m(n["seed"], f"{nid} seed", "seed") for nid, n in view.nodes.items() if _num(n.get("seed"))]


def _stage_measurements(run_dir: Path, view: RunView) -> list[Measurement]:
    out = [_m(s, "stage number", "stage") for s in (1, 2, 3, 4)]
    counts = view.counts()
    totals: dict[str, int] = {}
    for stage, c in counts.items():
        for field, n in c.to_dict().items():
            out.append(_m(n, f"stage {stage} {field} (node counts)", "count"))
            totals[field] = totals.get(field, 0) + n
    out += [_m(n, f"run {field} (node counts)", "count") for field, n in totals.items()]
    state_stages = (read_json(RunPaths(run_dir).state, default={}) or {}).get("stages") or {}
    for stage, node in view.best_per_stage().items():
        agg = seed_statistics(view, state_stages.get(str(stage)) or {}, node["id"])
        if not agg:
            continue
        where = f"stage {stage} seed re-runs of {node['id']}"
        name, direction = agg.get("name"), agg.get("direction")
        if _num(agg.get("mean")):
            out.append(_m(agg["mean"], f"{where}: mean", "seed statistic", False, name, direction))
        if _num(agg.get("stderr")):
            out.append(_m(agg["stderr"], f"{where}: stderr", "seed statistic"))
        if _num(agg.get("n")):
            out.append(_m(agg["n"], f"{where}: n", "count"))
        out += [
            _m(v, f"{where}: value", "seed statistic", True, name, direction)
            for v in agg.get("values") or []
            if _num(v)
        ]
    return out


def _good_search_nodes(view: RunView) -> list[str]:
    """Every good search node (seed re-runs apart), in id order: the writer is given each one's
    results, not only each stage's best's."""
    return sorted(n.id for n in view.typed() if n.is_good and not n.is_seed_eval)


def _file_measurements(view: RunView) -> list[Measurement]:
    """Numbers in the JSON files saved by each stage's best node and its seed re-runs first, then
    by every other good search node."""
    ids: list[str] = []
    for node in view.best_per_stage().values():
        for nid in [node["id"], *(s["id"] for s in view.seed_runs(node["id"]))]:
            if nid not in ids:
                ids.append(nid)
    ids += [nid for nid in _good_search_nodes(view) if nid not in ids]
    found: list[tuple[str, float]] = []
    for nid in ids:
        ws = NodePaths(view.node_dir(nid)).workspace
        graded = bool(grade_record(view, nid))
        for path in sorted(ws.rglob("*.json")) if ws.is_dir() else []:
            rel = path.relative_to(ws)
            if any(p.startswith(".") or p in ("resources", "__pycache__") for p in rel.parts):
                continue
            if graded and rel.as_posix() == "metrics.json":
                continue  # the program's own claim about itself: a self-reported metric, not a result
            try:
                data = read_json(path, default=None)
            except (ValueError, OSError):
                continue
            _leaves(data, f"{nid}/{rel.as_posix()}:", found, MAX_FILE_NUMBERS)
    return [_m(v, src.rstrip(":"), "result file") for src, v in found]


def _code_measurements(view: RunView) -> list[Measurement]:
    """The numbers in the parameters a good search node's code sets (constants, defaults, grids:
    ``treesearch/parameters.py``), e.g. an epoch count the paper states as the setup (``code
    parameter``)."""
    out = []
    for nid in _good_search_nodes(view):
        try:
            answer = read_artifact(NodePaths(view.node_dir(nid)).file(CODE_FILE), CodeAnswer)
        except (ValueError, OSError):
            continue
        texts = answer.text_files() if answer is not None else {}
        for p in parameters(texts):
            for c in extract_numbers(p.value):
                out.append(_m(c.value, f"{nid} code {p.name}", "code parameter"))
    return out


def _output_measurements(view: RunView) -> list[Measurement]:
    """The numbers each good search node's run commands printed (``exec/*_phase4_*.json``
    stdout, at most :data:`MAX_OUTPUT_NUMBERS` per node): what the program measured and said,
    e.g. a training accuracy it printed but saved in no file (``run output``). A graded node's
    output is left out: there the program's words are its own claim, not the grader's."""
    out = []
    for nid in _good_search_nodes(view):
        if grade_record(view, nid):
            continue  # with a grader, what the program printed is its own claim (self-reported)
        found = 0
        for path in sorted(NodePaths(view.node_dir(nid)).exec.glob("*_phase4_*.json")):
            try:
                rec = read_json(path, default=None)
            except (ValueError, OSError):
                continue
            stdout = rec.get("stdout") if isinstance(rec, dict) else None
            for c in extract_numbers(stdout if isinstance(stdout, str) else "")[: MAX_OUTPUT_NUMBERS - found]:
                out.append(_m(c.value, f"{nid} output of {path.stem.split('_', 2)[-1]}", "run output"))
                found += 1
    return out


def _machine_measurements(run_dir: Path) -> list[Measurement]:
    """The numbers of the run's machine record (``environment.json``: cores, cache sizes, clock,
    vector width, memory), e.g. an L3 size a benchmark's caption states (``machine``)."""
    try:
        data = read_json(RunPaths(run_dir).environment, default=None)
    except (ValueError, OSError):
        return []
    found: list[tuple[str, float]] = []
    _leaves(data if isinstance(data, dict) else {}, "", found, 2_000)
    out = [_m(v, f"machine {k}", "machine") for k, v in found]
    # sizes as a paper prints them: bytes in KiB / MiB / GiB too
    for k, v in found:
        if v >= 1024 and any(w in k.lower() for w in ("cache", "size", "bytes", "memory", "mem")):
            out += [
                _m(v / 1024**e, f"machine {k} / {u}", "machine")
                for e, u in ((1, "KiB"), (2, "MiB"), (3, "GiB"))
            ]
    return out


WRITER_INPUTS = "writer_inputs.md"  # under paper/: the run's findings exactly as the writer got them
WRITER_INPUT = "writer input"


def _writer_input_measurements(run_dir: Path) -> list[Measurement]:
    """Every number of the findings the pipeline gave the model writer (``paper/writer_inputs.md``,
    written by :func:`writeup.write_paper`: the stage records, the stage-end summaries with the
    seed-noise estimate and the differences they state, each node's seed statistics, the notes,
    the machine, the program), each with its context as the source: a capable model's checker
    rejected the pooled sigma, the noise band and a node's seed mean that the writer's prompt gave
    it as facts."""
    text = read_text(RunPaths(run_dir).paper / WRITER_INPUTS, 2_000_000)
    return [
        _m(c.value, f'the writer\'s inputs: "... {c.context} ..."', WRITER_INPUT)
        for c in extract_numbers(text)
    ]


def _config_measurements(run_dir: Path) -> list[Measurement]:
    try:
        data = yaml.safe_load(read_text(RunPaths(run_dir).config, 500_000)) or {}
    except yaml.YAMLError:
        return []
    found: list[tuple[str, float]] = []
    _leaves(data, "", found, 10_000)
    return [_m(v, f"config {k}", "config") for k, v in found]


def run_measurements(run_dir: str | Path) -> list[Measurement]:
    """Everything a number of the paper may come from (see the module docstring), priority order."""
    run_dir = Path(run_dir)
    view = load_run(run_dir)
    paths = RunPaths(run_dir)
    idea = [_m(c.value, "idea.md", "idea") for c in extract_numbers(read_text(paths.idea_md, 50_000))]
    bib = read_text(paths.paper / "references.bib", 500_000)
    years = [_m(int(y), "references.bib year", "reference") for y in _YEAR.findall(bib)]
    return [
        *_node_measurements(view),
        *_stage_measurements(run_dir, view),
        *_seed_measurements(view),
        *_file_measurements(view),
        *_output_measurements(view),
        *_code_measurements(view),
        *_machine_measurements(run_dir),
        *_config_measurements(run_dir),
        *_writer_input_measurements(run_dir),
        *idea,
        *years,
        *_self_reported_measurements(view),
    ]


# -------------------------------------------------------------------- matching --


def _close(printed: float, decimals: int, value: float) -> bool:
    return abs(abs(value) - printed) <= 0.5 * 10.0**-decimals + 1e-9 * max(1.0, abs(value))


def matches(claim: Claim, m: Measurement) -> bool:
    """Does ``claim`` state ``m`` at the claim's printed precision (module docstring rules)?"""
    if claim.is_integer:
        if m.integer:
            return abs(m.value) == claim.value
        return abs(m.value) >= 10 and _close(claim.value, 0, m.value)
    if claim.percent:
        return _close(claim.value / 100, claim.decimals + 2, m.value) or _close(
            claim.value, claim.decimals, m.value
        )
    return _close(claim.value, claim.decimals, m.value)


def match_claim(claim: Claim, measurements: list[Measurement]) -> Measurement | None:
    """The matching measurement closest to the printed value; among equally close ones the first
    in priority order (metrics, seed statistics, counts and stages, seeds, result files, config,
    idea, references)."""
    found = [(abs(abs(m.value) * (100 if claim.percent and abs(m.value) <= 1 else 1) - claim.value), i, m)
             for i, m in enumerate(measurements) if matches(claim, m)]  # fmt: skip
    return min(found, key=lambda t: (t[0], t[1]))[2] if found else None


# what a number is most likely to state: the run's results, then its bookkeeping; the pipeline's
# config, the idea and the references are no result a misprinted number could have meant
_NEAR_RANK = {
    "graded metric": 0,
    "metric": 0,
    "seed statistic": 0,
    "count": 1,
    "seed": 1,
    "stage": 1,
    "result file": 2,
    "run output": 2,
    WRITER_INPUT: 2,
}


def nearest(claim: Claim, measurements: list[Measurement], k: int = NEAREST) -> list[Measurement]:
    """For a number no measurement matches: up to ``k`` measured values within :data:`NEAR` of it
    (relative; a percentage against a fraction x 100), results (metrics, seed statistics) first,
    then counts, seeds and stages, then result files; within results, the search nodes' metrics and
    the seed means before single seed re-runs (an inflated number must not be pointed to the
    luckiest seed); the closest first within each; one per value. What the writer may have meant,
    so it can print the measured value instead."""
    found = []
    for i, m in enumerate(measurements):
        scale = 100.0 if claim.percent and abs(m.value) <= 1 else 1.0
        dist = abs(abs(m.value) * scale - claim.value) / max(claim.value, 1e-12)
        if claim.decimals > 0 and m.integer and _NEAR_RANK.get(m.kind) == 1:
            continue  # a count, seed or stage is no value a decimal stood for
        if dist <= NEAR and m.kind in _NEAR_RANK:
            found.append((_NEAR_RANK[m.kind], m.one_seed, dist, i, m))
    out: list[Measurement] = []
    for *_, m in sorted(found, key=lambda t: t[:4]):
        if f"{m.value:.6g}" not in {f"{x.value:.6g}" for x in out}:
            out.append(m)
        if len(out) == k:
            break
    return out


# ----------------------------------------------------------- comparisons --
# A sentence that compares two numbers with a word: "higher"/"lower" say which value is larger,
# "better"/"worse" which is better (the metric's direction decides). Only two forms are read,
# so that a flag is a contradiction and not a guess: "A (x) WORD than ... B (y)" / "x VERB y"
# (the word between the two numbers: x is the subject), and "VERB ... from x to y" (y against x).
_LARGER = r"higher|larger|greater"
_SMALLER = r"lower|smaller"
_BETTER = r"better"
_WORSE = r"worse"
_THAN = re.compile(rf"\b(?P<word>{_LARGER}|{_SMALLER}|{_BETTER}|{_WORSE})\b(?:[^.;]*?)\bthan\b", re.I)
_VERB = re.compile(
    r"\b(?P<word>outperform(?:s|ed)?|beat(?:s)?|surpass(?:es|ed)?|exceed(?:s|ed)?|"
    r"underperform(?:s|ed)?|trail(?:s|ed)?|above|below)\b",
    re.I,
)
_FROM_TO = re.compile(
    r"\b(?P<word>improv(?:es|ed|ing)?|increas(?:es|ed|ing)?|ris(?:es|ing)|rose|rais(?:es|ed|ing)|"
    r"grows?|grew|boost(?:s|ed)?|decreas(?:es|ed|ing)?|reduc(?:es|ed|ing)?|drops?|dropped|falls?|fell|"
    r"degrad(?:es|ed|ing)?|lower(?:s|ed)?)\b[^.;]*\bfrom\s*\$?\s*$",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|without)\b|n't\b", re.I)
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z\\])|\n\s*\n")
# where a sentence shown to the writer starts and ends: also a line's (a paragraph, a heading and a
# caption are one line each of the .tex)
_SENTENCE_EDGE = re.compile(r"\.\s+(?=[A-Z\\])|\n")
# what each word claims of (first, second): +1 first larger (raw) / better (quality), -1 the reverse
_RAW = {
    "higher": 1,
    "larger": 1,
    "greater": 1,
    "lower": -1,
    "smaller": -1,
    "exceed": 1,
    "above": 1,
    "below": -1,
}
_QUALITY = {
    "better": 1,
    "worse": -1,
    "outperform": 1,
    "beat": 1,
    "surpass": 1,
    "underperform": -1,
    "trail": -1,
}
_UP = ("improv", "increas", "ris", "rose", "rais", "grow", "grew", "boost")
_QUALITY_CHANGE = ("improv", "degrad")


def _claim_of(word: str) -> tuple[str, int]:
    """(``raw`` or ``quality``, +1 / -1) for a comparison word between two numbers."""
    w = word.lower()
    for table, kind in ((_RAW, "raw"), (_QUALITY, "quality")):
        for stem, sign in table.items():
            if w.startswith(stem):
                return kind, sign
    raise ValueError(word)


def _metrics_of(claim: Claim, measured: list[Measurement]) -> dict[str, tuple[str | None, float]]:
    """The metrics ``claim`` traces to (every matching measurement that is a metric's value):
    name -> (direction, the measured value closest to the printed one)."""
    out: dict[str, tuple[str | None, float, float]] = {}
    for m in measured:
        if m.metric and m.kind in ("metric", "graded metric", "seed statistic") and matches(claim, m):
            dist = abs(
                abs(m.value) - (claim.value / 100 if claim.percent and abs(m.value) <= 1 else claim.value)
            )
            if m.metric not in out or dist < out[m.metric][2]:
                out[m.metric] = (m.direction, m.value, dist)
    return {k: (d, v) for k, (d, v, _) in out.items()}


def comparisons(body: str, claims: list[Claim], measured: list[Measurement]) -> list[dict[str, Any]]:
    """Sentences whose comparison word contradicts the two numbers it compares, when both are
    traced to one metric (see the forms above; a sentence with a negation is not read): each
    with the sentence, the two numbers, the word, the metric and what the values say. Tracing
    numbers alone passes "L2 improves accuracy from 0.87 to 0.85" when both are measured."""
    out = []
    for a, b in zip(claims, claims[1:], strict=False):
        if a.start < 0 or b.start < 0 or a.value == b.value:
            continue
        between = body[a.end : b.start]
        if _SENTENCE_END.search(between):
            continue
        starts = [m.end() for m in _SENTENCE_EDGE.finditer(body, 0, a.start)]
        lo = starts[-1] if starts else 0
        ends = [m.start() for m in _SENTENCE_EDGE.finditer(body, b.end)]
        sentence = " ".join(body[lo : ends[0] + 1 if ends else len(body)].split())
        if _NEGATION.search(body[lo : b.end]):
            continue
        before = body[lo : a.start]
        found = [m.group("word") for m in _THAN.finditer(between)] + [
            m.group("word") for m in _VERB.finditer(between)
        ]
        change = _FROM_TO.search(before)
        if len(found) == 1 and not change:
            kind, sign = _claim_of(found[0])
            first, second, word = a, b, found[0]
        elif not found and change and re.fullmatch(r"\s*\\?%?\s*\$?\s*to\s*\$?\s*", between):
            word = change.group("word")
            kind = "quality" if word.lower().startswith(_QUALITY_CHANGE) else "raw"
            sign = 1 if word.lower().startswith(_UP) else -1
            first, second = b, a  # "from a to b": b against a
        else:
            continue
        ma, mb = _metrics_of(first, measured), _metrics_of(second, measured)
        shared = sorted(set(ma) & set(mb))
        if len(shared) != 1:
            continue  # no one metric both trace to (or several): nothing to check against
        metric = shared[0]
        (da, va), (db, vb) = ma[metric], mb[metric]
        if kind == "quality" and (da != db or da not in ("maximize", "minimize")):
            continue
        larger = 1 if va > vb else -1 if va < vb else 0
        holds = larger if kind == "raw" else (larger if da == "maximize" else -larger)
        if holds == 0 or holds == sign:
            continue
        what = ("larger" if sign > 0 else "smaller") if kind == "raw" else ("better" if sign > 0 else "worse")
        said = f"{first.text} {what} than {second.text}"
        out.append(
            {
                "sentence": sentence[:400],
                "line": a.line,
                "first": first.text,
                "second": second.text,
                "word": word,
                "metric": metric,
                "direction": da,
                "says": said,
                "measured": f"{metric} {num6(va)} ({first.text}) vs {num6(vb)} ({second.text})"
                + (f", {da}" if kind == "quality" else ""),
            }
        )
    return out


def num6(x: float) -> str:
    return f"{x:.6g}"


def check_claims(run_dir: str | Path, writer: str | None = None) -> dict[str, Any]:
    """Match every number of ``paper/paper.tex``; writes and returns ``paper/claims.json``:
    ``{"writer", "numbers", "matched", "unmatched", "unmatched_numbers", "self_reported_only",
    "self_reported_numbers", "claims": [{text, value, line, context, source, kind}]}`` (``source``
    null and ``kind`` ``"unmatched"`` when nothing matches). A number that only a graded node's
    self-reported value matches is ``self-reported metric`` (with a grader; any other source
    wins). An unmatched or only self-reported claim also has ``nearest``: [{value, source, kind}]
    (:func:`nearest`)."""
    paths = RunPaths(run_dir)
    tex = read_text(paths.paper_tex, 2_000_000)
    if not tex:
        raise FileNotFoundError(f"{paths.paper_tex}: no paper to check (the writeup step did not write one)")
    body, first = paper_body(tex)
    everything = run_measurements(run_dir)
    measured = [m for m in everything if m.kind != SELF_REPORTED]
    claimed = [m for m in everything if m.kind == SELF_REPORTED]
    # the writer's inputs carry the run's numbers, a program's own claims among them: a number
    # that only a program claimed stays self-reported even though the writer was shown it
    real = [m for m in measured if m.kind != WRITER_INPUT]
    inputs = [m for m in measured if m.kind == WRITER_INPUT]
    claims = []
    for claim in extract_numbers(body, first):
        found = match_claim(claim, real) or match_claim(claim, claimed) or match_claim(claim, inputs)
        row = {k: v for k, v in asdict(claim).items() if k in ("text", "value", "line", "context")}
        row.update(source=found.source if found else None, kind=found.kind if found else "unmatched")
        if not found or found.kind == SELF_REPORTED:
            row["nearest"] = [
                {"value": m.value, "source": m.source, "kind": m.kind} for m in nearest(claim, measured)
            ]
        claims.append(row)
    unmatched = [c for c in claims if c["source"] is None]
    self_reported = [c for c in claims if c["kind"] == SELF_REPORTED]
    contradicted = comparisons(body, extract_numbers(body, first), real)
    result = {
        "writer": writer,
        "numbers": len(claims),
        "matched": len(claims) - len(unmatched),
        "unmatched": len(unmatched),
        "unmatched_numbers": [c["text"] for c in unmatched],
        "self_reported_only": len(self_reported),
        "self_reported_numbers": [c["text"] for c in self_reported],
        # sentences whose comparison word the two numbers it compares contradict (:func:`comparisons`)
        "contradicted": len(contradicted),
        "contradictions": contradicted,
        "rules": "ai_scientist/reporting/claims.py (docs/reporting.md, 'Every number traced')",
        "claims": claims,
    }
    atomic_write_json(paths.paper / "claims.json", result)
    return result
