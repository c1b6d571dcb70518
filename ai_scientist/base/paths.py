"""The layout of a run directory: the one module that knows where each file of a run lives.

Everything else asks :class:`RunPaths` (``RunPaths(run_dir).journal``,
``RunPaths(run_dir).node("n0003").prompt_logs``) instead of joining names by hand, so the
layout of ARCHITECTURE.md ("Run directory") is written down once::

    <run>/  config.resolved.yaml  idea.md  idea.json  environment.json  state.json
            journal.jsonl  events.jsonl  memory.sqlite (+ memory.faiss)  cost.json
            llm_negotiation.json  run.lock  run.log  review.json  tree.html
            seed_code/<file> (when the idea has seed code)
            resources/ (index.json + staged items)   figures/ (figures.json, vlm.json, exec/)
            paper/ (paper.tex, paper.pdf, writeup.json, s2_cache/)   slurm/ (job folders)
            nodes/<node_id>/  node.json  state.md  plan.json  phase1.json  code_answer.json
                              compile.json  run.json  grade.json  review.json  metrics.json
                              plots.json  vlm.json  (the node's figures and their critique)
                              prompt_logs/NNN_<phase>_<label>.json (+ .md)
                              exec/NNN_<phase>_<label>.json  workspace/  env/  plots/

The same node layout serves ``ai-scientist ideate`` (its log folder holds
``nodes/ideaNNN/prompt_logs/``).

Numbered files
--------------
Prompt logs (``nodes/<id>/prompt_logs/``), command records (``nodes/<id>/exec/``) and the
plot-script records (``figures/exec/``) are numbered files, made by one function,
:func:`claim_numbered`:

* **name**: ``NNN_<slug(part)>_<slug(part)>.json``, the number zero-padded to three digits
  (``1000`` and above simply get more digits);
* **slug rule** (one rule for all of them): every run of characters outside
  ``[A-Za-z0-9_.-]`` becomes one ``-``, leading and trailing ``-`` are stripped, at most 40
  characters are kept, and an empty result becomes ``call``. This is the rule prompt logs
  always had; command records used to keep edge ``-`` and cut labels at 30 characters. Every
  label the pipeline uses (``run1``, ``build2``, ``install3``, ``check``) is named the same
  under both, so file names on disk do not change;
* **next number**: one past the highest number present (a gap left by a removed file is never
  filled, so number order is write order), taken under an exclusive ``flock`` of the folder, so
  two threads or processes never get the same number (before, each writer had only ``O_EXCL`` on
  the full name: two labels could share a number);
* **reading** (:func:`numbered_files`): every ``<digits>_<anything>.json``, in number order.
  That accepts the names of both older rules, so ``replay`` and ``logs`` of runs recorded
  before this module still work, and orders ``1000_`` after ``999_`` (a glob sorted as text
  did not).
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path

NODES_DIR = "nodes"
WORKSPACE_DIR = "workspace"
ENV_DIR = "env"  # a node's install prefix
LOCK_FILE = "run.lock"
RUN_LOG = "run.log"
NEGOTIATION_FILE = "llm_negotiation.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_NUMBERED = re.compile(r"^(\d{3,})_.*\.json$")
SLUG_MAX_CHARS = 40
SLUG_EMPTY = "call"


# ------------------------------------------------------------------ numbering ----


def slug(text: str) -> str:
    """``text`` as one file-name part: only ``[A-Za-z0-9_.-]``, no edge ``-``, 1..40 characters."""
    return _UNSAFE.sub("-", str(text)).strip("-")[:SLUG_MAX_CHARS] or SLUG_EMPTY


def file_number(path: Path | str) -> int | None:
    """The number of a numbered file (``012_phase0_plan.json`` -> 12), None for any other name."""
    m = _NUMBERED.match(Path(path).name)
    return int(m.group(1)) if m else None


def _numbered_names(folder: Path) -> list[tuple[int, str]]:
    """``(number, name)`` of the numbered JSON files of ``folder`` (names only: no Path per entry)."""
    try:
        with os.scandir(folder) as entries:
            found = [(m, e.name) for e in entries if (m := _NUMBERED.match(e.name))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [(int(m.group(1)), name) for m, name in found]


def numbered_files(folder: Path | str) -> list[Path]:
    """The numbered JSON files of ``folder`` in number order (empty when it does not exist)."""
    folder = Path(folder)
    return [folder / name for _, name in sorted(_numbered_names(folder))]


def numbered_name(n: int, *parts: str) -> str:
    """``NNN_<slug(part)>_..._<slug(part)>.json``."""
    return "_".join([f"{n:03d}", *(slug(p) for p in parts)]) + ".json"


def claim_numbered(folder: Path | str, *parts: str) -> tuple[int, Path]:
    """Create the next numbered file of ``folder`` (empty) and return ``(number, path)``.

    Safe across threads and processes: the scan and the creation happen under an exclusive
    ``flock`` of the folder itself (names differ by label, so ``O_EXCL`` on the name alone would
    let two writers take one number), and the file is still created with ``O_EXCL``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)  # released when dir_fd is closed
        n = max((k for k, _ in _numbered_names(folder)), default=0) + 1
        while True:
            path = folder / numbered_name(n, *parts)
            try:
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return n, path
            except FileExistsError:
                n += 1
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------- node layout ----


@dataclass(frozen=True)
class NodePaths:
    """``<run>/nodes/<node_id>/``: one tree node's (or the ``run`` pseudo-node's) files."""

    root: Path

    @property
    def id(self) -> str:
        return self.root.name

    # folders
    @property
    def prompt_logs(self) -> Path:
        """One numbered JSON record (+ ``.md``) per LLM attempt."""
        return self.root / "prompt_logs"

    @property
    def exec(self) -> Path:
        """One numbered JSON record per sandbox command (command, exit code, output)."""
        return self.root / "exec"

    @property
    def workspace(self) -> Path:
        """The files the generated code reads and writes (its sandbox working directory)."""
        return self.root / WORKSPACE_DIR

    @property
    def env(self) -> Path:
        """The node's install prefix (phase 1), inherited by its children."""
        return self.root / ENV_DIR

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    # files
    @property
    def node_json(self) -> Path:
        """The node record as it ended (for readers that do not replay the journal)."""
        return self.root / "node.json"

    @property
    def state_md(self) -> Path:
        """The state its children's ``history`` layer starts from."""
        return self.root / "state.md"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    def file(self, name: str) -> Path:
        """A phase artifact (``plan.json``, ``code_answer.json``, ... see :data:`NODE_FILES`)."""
        if name not in NODE_FILES:
            raise ValueError(
                f"{name!r} is not a node file of the run layout (known: {', '.join(NODE_FILES)})"
            )
        return self.root / name

    def prompt_log_files(self) -> list[Path]:
        """The prompt-log JSON records, in call order."""
        return numbered_files(self.prompt_logs)

    def exec_files(self) -> list[Path]:
        """The command records, in execution order."""
        return numbered_files(self.exec)


# The phase artifacts of a node (``NodePaths.file``): what each phase saves to resume from.
PLAN_FILE = "plan.json"  # phase 0
INSTALL_FILE = "phase1.json"  # phase 1: installer steps and their state
CODE_FILE = "code_answer.json"  # phase 2
COMPILE_FILE = "compile.json"  # phase 3
RUN_FILE = "run.json"  # phase 4
# a grader's verdict on the node (grader.dir): the graded metrics, the program's self-reported
# ones, the mismatches beyond grader.tolerance, or why the grading failed
GRADE_FILE = "grade.json"
REVIEW_FILE = "review.json"  # execution review (is_bug, summary)
PLOTS_FILE = "plots.json"  # the node's plotting step: kept figures, rejected ones with the reason
VLM_FILE = "vlm.json"  # the vision model's critique of the node's figures (or why it was skipped)
# what the stage showed the node (tried settings, ablation plan, earlier stage summaries), frozen
# when the node is first scheduled so a resumed node gets the same prompts as before its crash
STAGE_INPUTS_FILE = "stage_inputs.json"
NODE_FILES = (
    PLAN_FILE,
    INSTALL_FILE,
    CODE_FILE,
    COMPILE_FILE,
    RUN_FILE,
    GRADE_FILE,
    REVIEW_FILE,
    PLOTS_FILE,
    VLM_FILE,
    STAGE_INPUTS_FILE,
    "node.json",
    "metrics.json",
)


# ----------------------------------------------------------------- run layout ----


@dataclass(frozen=True)
class RunPaths:
    """``<run>/``: where every file of one run directory lives (nothing is created here)."""

    root: Path

    def __init__(self, root: Path | str):
        object.__setattr__(self, "root", Path(root))

    # written when the run is created
    @property
    def config(self) -> Path:
        return self.root / "config.resolved.yaml"

    @property
    def idea_md(self) -> Path:
        return self.root / "idea.md"

    @property
    def idea_json(self) -> Path:
        return self.root / "idea.json"

    @property
    def environment(self) -> Path:
        return self.root / "environment.json"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def seed_code(self) -> Path:
        """``seed_code/<file>``: a readable copy of the idea's seed code (``idea.json`` holds the
        copy that resume and replay read); ``<file>`` is :func:`slug` of its file name."""
        return self.root / "seed_code"

    # append-only logs and ledgers
    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def memory(self) -> Path:
        """The memory database; its faiss index sits beside it (``memory.faiss``)."""
        return self.root / "memory.sqlite"

    @property
    def cost(self) -> Path:
        return self.root / "cost.json"

    @property
    def llm_negotiation(self) -> Path:
        return self.root / NEGOTIATION_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def log(self) -> Path:
        return self.root / RUN_LOG

    # folders
    @property
    def nodes(self) -> Path:
        return self.root / NODES_DIR

    @property
    def resources(self) -> Path:
        return self.root / "resources"

    @property
    def resource_index(self) -> Path:
        return self.resources / "index.json"

    @property
    def figures(self) -> Path:
        """The plot step's sandbox workspace and its output (``figures.json``, ``vlm.json``)."""
        return self.root / "figures"

    @property
    def figures_json(self) -> Path:
        return self.figures / "figures.json"

    @property
    def vlm_json(self) -> Path:
        return self.figures / "vlm.json"

    @property
    def figures_exec(self) -> Path:
        """Numbered records of the plot script's runs (like a node's ``exec/``)."""
        return self.figures / "exec"

    @property
    def paper(self) -> Path:
        return self.root / "paper"

    @property
    def steer(self) -> Path:
        """Steering requests (``ai-scientist steer``, the serve page): ``pending/`` until the run
        applies them, then ``done/`` (runloop/steering.py)."""
        return self.root / "steer"

    @property
    def paper_figures(self) -> Path:
        """The figures the paper includes (copied there by the writeup)."""
        return self.paper / "figures"

    @property
    def paper_tex(self) -> Path:
        return self.paper / "paper.tex"

    @property
    def paper_pdf(self) -> Path:
        return self.paper / "paper.pdf"

    @property
    def writeup_json(self) -> Path:
        return self.paper / "writeup.json"

    @property
    def s2_cache(self) -> Path:
        """Cached Semantic Scholar answers of the writeup."""
        return self.paper / "s2_cache"

    @property
    def stage_summaries(self) -> Path:
        """``stage_summaries/stage<N>.json``: the summary role's account of each finished stage."""
        return self.root / "stage_summaries"

    def stage_summary(self, stage: int) -> Path:
        return self.stage_summaries / f"stage{int(stage)}.json"

    @property
    def slurm(self) -> Path:
        """Slurm job folders when ``exec.slurm.shared_dir`` is not set."""
        return self.root / "slurm"

    # reporting results
    @property
    def review(self) -> Path:
        return self.root / "review.json"

    @property
    def tree_html(self) -> Path:
        return self.root / "tree.html"

    # nodes
    def node(self, node_id: str) -> NodePaths:
        """The folder of one node (``run`` holds the run-level calls: ideas, plots, writeup, review)."""
        if not node_id or node_id in (".", "..") or "/" in node_id or "\\" in node_id:
            raise ValueError(f"{node_id!r} is not a node id")
        return NodePaths(self.nodes / node_id)

    def node_ids(self) -> list[str]:
        """The ids of the node folders present, sorted."""
        return sorted(p.name for p in self.nodes.iterdir() if p.is_dir()) if self.nodes.is_dir() else []

    def prompt_log_files(self) -> list[Path]:
        """Every prompt-log record of the run: node folders in name order, calls in number order."""
        return [p for nid in self.node_ids() for p in self.node(nid).prompt_log_files()]

    # the run directories created at once by ``Run.create``
    def skeleton(self) -> tuple[Path, ...]:
        return (self.nodes, self.figures, self.paper, self.resources)


def node_of_workspace(workspace: Path | str) -> tuple[RunPaths, str] | None:
    """``(run paths, node id)`` when ``workspace`` is a node's ``nodes/<id>/workspace``, else None."""
    ws = Path(workspace)
    if ws.name == WORKSPACE_DIR and ws.parent.parent.name == NODES_DIR:
        return RunPaths(ws.parent.parent.parent), ws.parent.name
    return None
