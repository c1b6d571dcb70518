"""Vision-model analysis of plots: per-node critique and a final figure/caption review.

Images travel as OpenAI-compatible ``image_url`` parts (pillow-resized, MIME
type from the real format). A model without vision is detected up front (the
local llama.cpp backend, or a client that says so) or from the server's
refusal (``VisionUnsupported`` or an error saying images are unsupported);
the step is then skipped with the reason recorded in ``figures/vlm.json``.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import Critique, RunRecord, read_artifact
from ..base.fileio import atomic_write_json, read_json, read_jsonl
from ..base.paths import RUN_FILE, VLM_FILE, NodePaths, RunPaths
from ..base.pysource import parse_python
from ..context.kinds import experiment_kinds, shows_machine
from ..execution.environment import machine_text
from ..llm.call import CallContext, LLMError
from ..llm.prompting import Prompter, ask
from ..llm.vision import is_vision_refusal, vision_skip_reason
from . import prompts
from .errors import StepSkipped
from .figure_data import figure_series, read_files
from .images import image_part
from .manifest import _compact_metrics
from .runread import NODE_ID, RunView, load_run, read_text

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

MAX_PLOTS_PER_NODE = 4
CRITIQUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "critiques": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "maxLength": 200},
                    "assessment": {"type": "string", "maxLength": 1500},
                    "issues": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": 400},
                        "maxItems": 10,
                    },
                    "useful": {"type": "boolean"},
                },
                "required": ["file", "assessment", "issues", "useful"],
                "additionalProperties": False,
            },
            "maxItems": 30,
        }
    },
    "required": ["critiques"],
    "additionalProperties": False,
}
FIGURE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string", "maxLength": 1500},
        "caption_matches": {"type": "boolean"},
        "issues": {"type": "array", "items": {"type": "string", "maxLength": 400}, "maxItems": 10},
        "suggested_caption": {"type": "string", "maxLength": 600},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["description", "caption_matches", "issues", "suggested_caption", "score"],
    "additionalProperties": False,
}


class NoVision(StepSkipped):
    """The configured model cannot read images."""


def run_kinds(run_dir: Path, view: RunView | None = None) -> list[str]:
    """The kinds of experiment the run is (context/kinds.py), from every node's metric names, else
    its idea's words: what the figure calls' machine facts and the reviewers' venue follow."""
    view = view if view is not None else load_run(run_dir)
    names = [str(m.get("name", "")) for nid in view.nodes for m in view.metrics(nid)]
    return experiment_kinds(names, read_text(RunPaths(run_dir).idea_md, 8000))


def machine_facts(run_dir: Path, view: RunView) -> str:
    """The machine a benchmark ran on (CPU, caches, vector width and peak, memory: the
    ``environment`` layer of the figure calls), from the run's ``environment.json``; "" when the
    run's metrics or idea say it is no benchmark (training, simulation), or nothing was recorded.
    A figure of timings or GFLOP/s is judged against it (a rate above the machine's peak, a
    working set that crosses a cache size): with the idea's matrix sizes set against the caches,
    as the node critique has them (``machine_text``'s ``idea``; relay s10 mm)."""
    if not shows_machine(run_kinds(run_dir, view)):
        return ""
    try:
        env = read_json(RunPaths(run_dir).environment, default=None)
    except ValueError:  # torn: the figures are reviewed without the machine
        return ""
    return machine_text(env if isinstance(env, dict) else None, read_text(RunPaths(run_dir).idea_md))


def critique_node_plots(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    """Every node's own critique (made in the loop, ``nodes/<id>/vlm.json``), and for each stage's
    best node without one, a critique made now; {node_id: critique | {critiques | error}}.

    A critique made now goes through the run's one prompt path (prompt ``plot_critique``): the
    reviewer's system message, the idea and the instructions are the same for every node, the
    node, its metrics and its plot files come last (``node_brief``) and the plots follow the text."""
    view = load_run(run_dir)
    out: dict[str, Any] = {}
    for nid in view.nodes:
        try:
            own = read_artifact(NodePaths(view.node_dir(nid)).file(VLM_FILE), Critique)
        except ValueError:  # torn: the best node's plots are critiqued again below
            own = None
        if own is not None and own.verdict is not None:
            out[nid] = own.verdict.to_json()
    prompter = Prompter(cfg, client)
    shared = {
        "task": read_text(RunPaths(run_dir).idea_md, 8000) or "(no idea text)",
        "instructions": prompts.render("vlm_node_instructions.j2"),
        "environment": machine_facts(run_dir, view),
    }
    for stage, node in view.best_per_stage().items():
        nid = str(node["id"])
        if nid in out:
            continue
        plots = sorted(NodePaths(view.node_dir(nid)).plots.glob("*.png"))[:MAX_PLOTS_PER_NODE]
        if not plots:
            continue
        brief = prompts.render(
            "vlm_node_user.j2",
            node=node,
            stage=stage,
            files=[p.name for p in plots],
            metrics=view.metrics(nid),
            # what its results were compared under and, for a benchmark, the load it ran under
            protocols=figure_protocols(run_dir, nid),
            load=node_load(view, nid) if timed_figure(run_dir, "", view) else "",
        )
        ctx = CallContext(node_id=nid, stage=str(stage), phase="vlm", label="plot_critique")
        try:
            out[nid] = ask(
                client,
                prompter,
                "plot_critique",
                {**shared, "node_brief": brief},
                role="vlm_feedback",
                ctx=ctx,
                schema=CRITIQUE_SCHEMA,
                images=[image_part(p) for p in plots],
            ).parsed
        except LLMError as exc:
            if is_vision_refusal(exc):
                raise NoVision(f"the model refused image input: {exc}") from exc
            out[nid] = {"error": f"critique of {nid} failed: {exc}"}
    return out


REVIEWS_CACHE = "figure_reviews.json"  # under figures/: {file hash + caption: review}


def figure_key(path: Path, caption: str) -> str:
    """What a figure review depends on: the image's bytes and the caption it is checked against."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    return f"{digest}|{caption}"


MAX_FIGURE_METRICS = 60  # a node's metrics shown to a figure reviewer, headline first


def _metric_text(view: RunView, node_id: str, names: list[str] | None = None) -> str:
    """name=value of a node's metrics in the aggregation manifest's key form (``name [dataset]``
    for a name measured on several datasets); ``names``: only those, in that order."""
    values = _compact_metrics(view.metrics(node_id))["metrics"]
    keys = [k for k in (names or list(values)) if k in values][:MAX_FIGURE_METRICS]
    more = len(values) - len(keys) if names is None else 0
    return ", ".join(f"{k}={values[k]}" for k in keys) + (f" (+{more} more)" if more > 0 else "")


CAPTION_NUMBER = re.compile(r"(?<![\w.])-?\d+\.(\d+)(?!\w|\.\d)")  # a decimal a caption states
PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgeEr]|\{[^{}]*\}")  # %s, {} of a name template
MIN_PREFIX = 6  # a script's string literal ending in a separator (``"val_acc_l2_"``) names by prefix


class FigureUse:
    """Which metrics a figure uses, so its reviewer is shown those and not every metric of every
    node the caption names with all its re-runs (relay s8 ln2 034-039: 5-9k characters of metrics
    beside a figure of a handful): a metric the caption names, one the figure's part of the
    aggregation script names (a string literal, an f-string's pattern, a name prefix it builds on),
    and one whose value a number of the caption states (so that number stays checkable)."""

    def __init__(self, caption: str, script: str | None, file: str, others: list[str]) -> None:
        self.caption = caption or ""
        # a result, not a setting: "0.9085", "0.91", not "lr 0.01" (one significant digit)
        self.numbers = [
            (float(m.group(0)), len(m.group(1)))
            for m in CAPTION_NUMBER.finditer(self.caption)
            if self._significant(m.group(0)) >= 2
        ]
        self.literals: list[str] = []
        self.patterns: list[re.Pattern[str]] = []
        self.text = ""  # the script's text when it does not parse: names are found in it as words
        if script:
            self._read(script, file, others)

    def _read(self, script: str, file: str, others: list[str]) -> None:
        tree = parse_python(script)
        if tree is None:
            self.text = script
            return
        others = [o for o in others if o and o != file]

        def names_file(node: ast.AST, name: str) -> bool:
            return any(
                isinstance(c, ast.Constant) and isinstance(c.value, str) and name in c.value
                for c in ast.walk(node)
            )

        # the figure's part: the outermost statements that name its file and no other figure's
        parts: list[ast.AST] = []

        def visit(node: ast.AST) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt) and names_file(child, file):
                    if not any(names_file(child, o) for o in others):
                        parts.append(child)
                        continue
                visit(child)

        visit(tree)
        if not parts:  # the file is named nowhere of its own (built from a list): the whole script
            parts = [tree]
        # one level of what those statements use: the helpers and constants they call by name
        used = {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
        for node in ast.walk(tree):
            defined = (
                {node.name}
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else {t.id for t in node.targets if isinstance(t, ast.Name)}
                if isinstance(node, ast.Assign)
                else set()
            )
            if defined & used and not any(names_file(node, o) for o in others) and node not in parts:
                parts.append(node)
        for part in parts:
            for node in ast.walk(part):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    self.literals.append(node.value)
                    self._pattern([*PLACEHOLDER.split(node.value)], placeholder=True)
                elif isinstance(node, ast.JoinedStr):
                    self._pattern(
                        [str(v.value) if isinstance(v, ast.Constant) else None for v in node.values]
                    )

    def _pattern(self, pieces: list[str | None], placeholder: bool = False) -> None:
        """A name pattern from a string's fixed pieces and its holes (None: an f-string's value;
        ``placeholder``: the holes are between the pieces, a ``%s``/``{}`` of ``%``/``format``)."""
        if placeholder:
            if len(pieces) < 2:
                return
            pieces = [x for p in pieces for x in (p, None)][:-1]
        fixed = "".join(p for p in pieces if p is not None)
        # a pattern of a name (``f"val_acc_l2_{l2}"``), not ``f"{a}_{b}"`` (it would match all)
        if sum(c.isalpha() for c in fixed) >= 2:
            self.patterns.append(re.compile("".join(".+?" if p is None else re.escape(p) for p in pieces)))

    def uses(self, key: str) -> bool:
        """Whether the figure uses the metric ``key`` (``name`` or ``name [dataset]``) by name."""
        name = key.split(" [", 1)[0]
        word = re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w])")
        if word.search(self.caption) or (self.text and word.search(self.text)):
            return True
        for lit in self.literals:
            if lit == name or lit == key:
                return True
            if len(lit) >= MIN_PREFIX and not lit[-1].isalnum() and name.startswith(lit):
                return True
        return any(p.fullmatch(name) or p.fullmatch(key) for p in self.patterns)

    def stated(self, value: Any) -> bool:
        """Whether a number of the caption states ``value`` (at the caption's precision)."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return any(abs(round(float(value), d) - n) < 10 ** -(d + 3) for n, d in self.numbers)

    @staticmethod
    def _significant(text: str) -> int:
        return len(text.lstrip("-").replace(".", "").lstrip("0"))


def figure_script(run_dir: Path) -> tuple[str | None, list[str]]:
    """The aggregation script the report's figures were drawn by (``figures/figures.json``'s
    ``script``) and every figure file it declared; (None, []) when there is none."""
    fig_dir = RunPaths(run_dir).figures
    data = read_json(RunPaths(run_dir).figures_json, default={}) or {}
    data = data if isinstance(data, dict) else {}
    files = [
        str(f.get("file")) for k in ("figures", "rejected") for f in data.get(k) or [] if isinstance(f, dict)
    ]
    name = str(data.get("script") or "")
    path = fig_dir / name if name else None
    if path is None or not path.is_file():
        return None, files
    return read_text(path, 200_000), files


def figure_use(run_dir: Path, caption: str, file: str = "") -> tuple[FigureUse, list[str]]:
    """What the figure ``file`` uses (:class:`FigureUse`, from its caption and its part of the
    aggregation script) and the copied data files that part reads (:func:`figure_data.read_files`),
    else those the whole script reads."""
    script, others = figure_script(run_dir) if file else (None, [])
    use = FigureUse(caption, script, file, others)
    fig_dir = RunPaths(run_dir).figures
    reads = read_files(fig_dir, use.literals, use.patterns) if script else []
    if script and not reads:  # read by code the figures share (a loop before the figure's part)
        whole = FigureUse("", script, "", [])
        reads = read_files(fig_dir, whole.literals, whole.patterns)
    return use, reads


def _file_nodes(view: RunView, files: list[str]) -> list[str]:
    """The nodes whose copied files (``data/<node>/...``) these are; a seed re-run stands for the
    node it re-ran (that node's line shows its re-runs)."""
    out: list[str] = []
    for rel in files:
        nid = rel.split("/")[1] if rel.count("/") >= 2 else ""
        node = view.nodes.get(nid) or {}
        if node.get("operation") == "seed_eval" and node.get("parent_id") in view.nodes:
            nid = str(node["parent_id"])
        if nid in view.nodes and nid not in out:
            out.append(nid)
    return out


def figure_nodes(run_dir: Path, caption: str, load: bool = False, file: str = "") -> list[str]:
    """One line per node the caption names or whose result files the figure's part of the
    aggregation script reads (relay s8 ln3 034, 038: a review listed only the caption's): what the
    node is (stage, operation, parent, idea) and the values it measured that the figure uses
    (:class:`FigureUse`; the headline always), and those of its seed re-runs labelled by seed, the
    rest counted, so a figure reviewer can check what is drawn against what was measured (relay
    s7 ln1 032-037: "n0007"/"n0001" in captions, no value)."""
    use, reads = figure_use(run_dir, caption, file)
    view = load_run(run_dir)
    ids = list(dict.fromkeys([*NODE_ID.findall(caption or ""), *_file_nodes(view, reads)]))
    if not ids:
        return []
    out = []
    for nid in ids:
        node = view.nodes.get(nid)
        if node is None:
            out.append(f"- {nid}: no node of this run has this id")
            continue
        what = f"stage {node.get('stage')} {node.get('operation')}"
        if node.get("parent_id"):
            what += f" of {node['parent_id']}"
        if node.get("idea"):
            what += f" (idea: {node['idea']})"
        if node.get("seed") is not None:
            what += f", seed {node['seed']}"
        reruns = [r for r in view.seed_runs(nid) if r.get("status") == "good"]
        runs = [nid] + [str(r["id"]) for r in reruns]
        values = {i: _compact_metrics(view.metrics(i))["metrics"] for i in runs}
        every = list(values[nid])
        named = [k for k in every if use.uses(k)]
        # no metric of the node traced to the caption or the script (a script plotting every
        # record of a file, or none): what the figure shows is unknown, so every metric is shown
        names = [
            k
            for i, k in enumerate(every)
            if not named or i == 0 or k in named or any(use.stated(values[r].get(k)) for r in runs)
        ][:MAX_FIGURE_METRICS]
        more = len(every) - len(names)
        line = (
            f"- {nid}: {what}; status {node.get('status')}; measured "
            f"{_metric_text(view, nid, names) or 'nothing'}"
            + (
                f" (+{more} more metric{'s' if more != 1 else ''}"
                + (" not plotted: named by neither the caption nor the figure's script)" if named else ")")
                if more > 0
                else ""
            )
        )
        if reruns:
            line += "; seed re-runs: " + "; ".join(
                f"seed {r.get('seed')} ({r['id']}) {_metric_text(view, str(r['id']), names)}" for r in reruns
            )
        measured = node_load(view, nid) if load else ""
        if measured:
            line += f"; machine load during its measured commands: {measured}"
        out.append(line)
    return out


MAX_LOAD_COMMANDS = 4  # a node's run commands whose machine load a figure reviewer is shown


def figure_protocols(run_dir: Path, caption: str, read: list[str] | None = None) -> list[dict[str, Any]]:
    """The evaluation protocols the figure's results were measured under (the ``eval_protocol``
    events: each stage's headline metric with its direction and dataset label, and the parameters
    that define its inputs), for the stages of the nodes the caption names, else every stage;
    stages that kept one protocol are merged. A figure reviewer without it read a metric under
    its own dataset label (an extra condition) as a break of the protocol (relay s7 ln2 008).
    ``read``: the nodes whose files the figure's script reads, counted with the caption's."""
    path = RunPaths(run_dir).events
    try:
        events = read_jsonl(path) if path.exists() else []
    except (OSError, ValueError):  # torn: the figure is reviewed without it
        return []
    fixed = {
        int(e["stage"]): e for e in events if e.get("type") == "eval_protocol" and e.get("stage") is not None
    }
    ids = set(NODE_ID.findall(caption or "")) | set(read or ())
    stages = set()
    if ids:
        view = load_run(run_dir)
        stages = {int(n["stage"]) for i, n in view.nodes.items() if i in ids and n.get("stage") is not None}
    out: list[dict[str, Any]] = []
    for stage, ev in sorted(fixed.items()):
        if stages and stage not in stages:
            continue
        same = next(
            (p for p in out if p["metric"] == ev.get("metric") and p["parameters"] == ev.get("parameters")),
            None,
        )
        if same is not None:
            same["stages"].append(stage)
            continue
        out.append(
            {
                "stages": [stage],
                "node_id": ev.get("node_id"),
                "metric": ev.get("metric"),
                "parameters": ev.get("parameters") or [],
            }
        )
    return out


def timed_figure(run_dir: Path, caption: str, view: RunView | None = None) -> bool:
    """Whether a figure's claim rests on timings, so the machine's load during the measured
    commands bears on it: the run is a benchmark (its machine facts are shown, :func:`machine_facts`)
    or the caption's words speak of timings (``context/kinds.py``)."""
    return shows_machine(run_kinds(run_dir, view)) or "benchmark" in experiment_kinds([], caption or "")


def node_load(view: RunView, node_id: str) -> str:
    """The machine load during a node's run commands as each command's record has it
    (``execution/usage.py``: CPU vs wall time, the load at start and end on the core count, the
    other commands of the run running), and its seed re-runs'; "" when none was recorded (relay
    s7 mm2 004-024: figure reviews could not tell noise from contention)."""

    def usages(nid: str) -> list[str]:
        try:
            record = read_artifact(NodePaths(view.node_dir(nid)).file(RUN_FILE), RunRecord)
        except ValueError:  # torn: nothing said of its load
            return []
        outputs = [o for o in (record.outputs if record is not None else ()) if o.usage]
        named = len(outputs) > 1  # which command, when there are several
        shown = [
            (f"`{' '.join(o.command.split()[:3])}`: " if named else "") + o.usage
            for o in outputs[:MAX_LOAD_COMMANDS]
        ]
        more = len(outputs) - len(shown)
        return shown + ([f"{more} more command{'s' if more != 1 else ''}"] if more > 0 else [])

    parts = usages(node_id)
    for r in view.seed_runs(node_id):
        theirs = usages(str(r["id"]))
        if theirs:
            parts.append(f"seed {r.get('seed')} ({r['id']}): " + " | ".join(theirs))
    return "; ".join(parts)


def _series(run_dir: Path, caption: str, file: str) -> list[str]:
    """The lists of numbers the figure's part of the script reads (:func:`figure_data.figure_series`)."""
    use, reads = figure_use(run_dir, caption, file)
    return figure_series(RunPaths(run_dir).figures, reads, use.uses) if reads else []


def review_figures(
    run_dir: Path, cfg: Config, client: LLMClient, figures: list[dict[str, Any]], phase: str = "vlm"
) -> dict[str, Any]:
    """Check each figure against its caption; {file: review | {error}}.

    Each call goes through the run's one prompt path (prompt ``figure_review``): the reviewer's
    system message and the instructions are the same for every figure, the file and caption come
    last (``node_brief``) and the image follows the text. A figure is reviewed once per content:
    a review is kept in ``figures/figure_reviews.json`` under the image's hash and the caption,
    and the same image with the same caption (the paper's review step after the VLM step, a
    re-run with ``--from-phase``) reuses it instead of asking again."""
    fig_dir = RunPaths(run_dir).figures
    cache_path = fig_dir / REVIEWS_CACHE
    try:
        cache = read_json(cache_path, default={}) or {}
    except ValueError:  # torn: the figures are reviewed again
        cache = {}
    prompter = Prompter(cfg, client)
    instructions = prompts.render("vlm_figure_instructions.j2")
    # what the figures are evidence for: the idea's title and hypothesis, in each figure's brief
    idea = read_json(RunPaths(run_dir).idea_json, default={}) or {}
    question = " — ".join(str(idea[k]).strip() for k in ("title", "hypothesis") if idea.get(k))
    view = load_run(run_dir)
    machine = machine_facts(run_dir, view)
    out: dict[str, Any] = {}
    for fig in figures:
        path = fig_dir / fig["file"]
        caption = fig.get("caption", "")
        try:
            key = figure_key(path, caption)
        except OSError as exc:
            out[fig["file"]] = {"error": f"review of {fig['file']} failed: {exc}"}
            continue
        if isinstance(cache.get(key), dict):
            out[fig["file"]] = cache[key]
            continue
        # reviewed before with another caption or image: this call says what changed since
        earlier = cache.get(f"last|{fig['file']}")
        earlier = earlier if isinstance(earlier, dict) and isinstance(earlier.get("review"), dict) else None
        brief = prompts.render(
            "vlm_figure_user.j2",
            file=fig["file"],
            caption=caption,
            question=question,
            nodes=figure_nodes(run_dir, caption, load=timed_figure(run_dir, caption, view), file=fig["file"]),
            series=_series(run_dir, caption, fig["file"]),
            protocols=figure_protocols(
                run_dir, caption, _file_nodes(view, figure_use(run_dir, caption, fig["file"])[1])
            ),
            earlier=earlier,
            redrawn=bool(earlier) and str((earlier or {}).get("key", "")).split("|")[0] != key.split("|")[0],
        )
        values = {"instructions": instructions, "environment": machine, "node_brief": brief}
        ctx = CallContext(node_id="run", phase=phase, label=f"figure_{path.stem}"[:40])
        try:
            out[fig["file"]] = cache[key] = ask(
                client,
                prompter,
                "figure_review",
                values,
                role="vlm_feedback",
                ctx=ctx,
                schema=FIGURE_SCHEMA,
                images=[image_part(path)],
            ).parsed
            cache[f"last|{fig['file']}"] = {"key": key, "caption": caption, "review": out[fig["file"]]}
            atomic_write_json(cache_path, cache)
        except LLMError as exc:
            if is_vision_refusal(exc):
                raise NoVision(f"the model refused image input: {exc}") from exc
            out[fig["file"]] = {"error": f"review of {fig['file']} failed: {exc}"}
        except OSError as exc:
            out[fig["file"]] = {"error": f"review of {fig['file']} failed: {exc}"}
    return out


def run_vlm(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    """Both VLM passes; writes ``figures/vlm.json``. Raises NoVision (a StepSkipped) when blind."""
    path = RunPaths(run_dir).vlm_json
    reason = vision_skip_reason(cfg, client)
    result: dict[str, Any] = {"model": cfg.model_for("vlm_feedback")}
    try:
        if reason:
            raise NoVision(reason)
        figures = (read_json(RunPaths(run_dir).figures_json, default={}) or {}).get("figures", [])
        result["nodes"] = critique_node_plots(run_dir, cfg, client)
        result["figures"] = review_figures(run_dir, cfg, client, figures)
    except NoVision as exc:
        result["skipped"] = str(exc)
        atomic_write_json(path, result)
        raise
    atomic_write_json(path, result)
    return result
