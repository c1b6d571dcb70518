"""A scripted fake LLM for the bundled example: schema-valid answers, correct code.

Used by the end-to-end tests, the replay tests and ``bench/orchestration.py``
through :class:`ai_scientist.llm.scripted_backend.ScriptedBackend`. It reads
the node's operation and idea from the prompt (the lines ``Operation: X`` and
``This node's idea: Y`` that the phase templates render), so its answers
follow the tree the real pipeline grows.

Behaviour knobs: ``buggy_nodes`` get a program that crashes (drafts) so the
search must debug them; ``hostile`` maps a node id to a kind of bad answer
(``malformed``, ``missing_fields``, ``traversal``, ``enormous_output``,
``empty``) to check the run survives it.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .experiment_template import BUGGY_PROGRAM, render

if TYPE_CHECKING:
    from ai_scientist.llm.call import CallContext

TUNE_IDEAS = ["lr=0.05 l2=0.1", "lr=0.2 l2=0.0", "lr=0.1 l2=0.1 epochs=12", "lr=0.02 l2=0.01 epochs=16"]
ABLATE_IDEAS = ["ablation no_l2", "ablation no_bias", "ablation no_standardize"]
# stage 3's research experiments (the research idea's label-noise study), each a template setting
RESEARCH_IDEAS = [
    "stronger L2 against label noise: l2=0.3 epochs=10, measures whether it limits memorising flipped labels",
    "longer training: epochs=20 lr=0.05, measures whether noisy labels are memorised late",
    "early stop: epochs=4 l2=0.05, measures the clean accuracy before the noise is fitted",
]

PLOT_SCRIPT = """
import glob, json, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(5, 3.5))
for path in sorted(glob.glob("data/*/results.json")):
    losses = json.load(open(path))["train_loss"]
    ax.plot(range(1, len(losses) + 1), losses, label=path.split(os.sep)[1])
ax.set_xlabel("epoch"); ax.set_ylabel("training loss"); ax.legend(fontsize=6)
fig.tight_layout(); fig.savefig("train_loss.png", dpi=100)
"""

# a node's own plot: the training loss it saved in results.json, drawn with Pillow (fast to start)
NODE_PLOT = """
import json
from PIL import Image, ImageDraw
losses = json.load(open("results.json"))["train_loss"]
W, H, M = 480, 320, 40
img = Image.new("RGB", (W, H), "white")
d = ImageDraw.Draw(img)
d.line([(M, M), (M, H - M), (W - M, H - M)], fill="black", width=2)
lo, hi = min(losses), max(losses)
span = (hi - lo) or 1.0
pts = [
    (M + i * (W - 2 * M) / max(1, len(losses) - 1), H - M - (v - lo) / span * (H - 2 * M))
    for i, v in enumerate(losses)
]
d.line(pts, fill=(31, 119, 180), width=3)
d.text((W // 2 - 20, H - M + 10), "epoch", fill="black")
d.text((4, M - 20), "training loss", fill="black")
img.save("node_plots/train_loss.png")
"""
# the same figure saved before anything is drawn: one flat colour
BLANK_NODE_PLOT = """
from PIL import Image
Image.new("RGB", (480, 320), "white").save("node_plots/train_loss.png")
"""

PAPER_SECTIONS = {
    "title": "L2 regularisation against label noise in logistic regression",
    "abstract": "We measure clean validation accuracy of logistic regression trained on noisy labels.",
    "introduction": "Label noise hurts classifiers; we test whether an L2 penalty helps.",
    "related_work": "Regularisation against label noise has long been studied.",
    "method": "Logistic regression trained by SGD on a synthetic two-class Gaussian problem.",
    "experiments": "Drafts, hyper-parameter tuning, research and ablations, with seed re-runs.",
    "results": "The best configuration reaches the validation accuracy reported in the tables.",
    "conclusion": "A moderate penalty is a cheap guard against noisy labels on this task.",
}

_OP = re.compile(r"Operation:\s*(\w+)")
_IDEA = re.compile(r"This node's idea:\s*(.+)")


def _text(messages: list[dict[str, Any]]) -> str:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "\n".join(out)


def params_from_idea(idea: str) -> dict[str, Any]:
    """Hyper-parameters of the template from an idea string like ``lr=0.05 l2=0.1``."""
    p: dict[str, Any] = {}
    for key, cast in (("lr", float), ("l2", float), ("epochs", int)):
        m = re.search(rf"\b{key}=([0-9.]+)", idea)
        if m:
            p[key] = cast(m.group(1))
    if "no_l2" in idea:
        p["l2"] = 0.0
    if "no_bias" in idea:
        p["use_bias"] = False
    if "no_standardize" in idea:
        p["standardize"] = False
    return p


class ExampleResponder:
    """``responder(messages, schema, ctx) -> str`` for ``ScriptedBackend``."""

    def __init__(
        self,
        buggy_nodes: Iterable[str] = ("n0001",),
        hostile: dict[str, str] | None = None,
        always_buggy: bool = False,
        hang_at: tuple[str, str, str] | None = None,
        slow_nodes: dict[str, float] | None = None,
        blank_plot_nodes: Iterable[str] = (),
        invalid_plot_nodes: Iterable[str] = (),
        new_tools: dict[str, str] | None = None,
        no_metrics_file: Iterable[str] = (),
    ):
        self.buggy_nodes = set(buggy_nodes)
        self.always_buggy = always_buggy
        # crash tests: (node_id, phase, marker file) -> touch the marker and hang inside the call
        self.hang_at = hang_at
        # crash tests: node_id -> seconds its experiment sleeps after touching STARTED
        self.slow_nodes = dict(slow_nodes or {})
        self.hostile = dict(hostile or {})
        # node plots: these nodes' first plotting script saves a blank figure (the retry, told
        # that it is blank, draws the data); the vision model finds these nodes' results invalid
        self.blank_plot_nodes = set(blank_plot_nodes)
        self.invalid_plot_nodes = set(invalid_plot_nodes)
        # node_id -> a tool (apt dependency) this node's code answer newly declares; its installer
        # puts a stub of it in the node's install prefix (phase 1 runs for it)
        self.new_tools = dict(new_tools or {})
        # these nodes' experiments print their metrics but write no metrics.json
        self.no_metrics_file = set(no_metrics_file)
        self.calls: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: CallContext) -> str:
        with self._lock:
            self.calls.append((ctx.node_id, ctx.phase, ctx.label))
        text = _text(messages)
        if self.hang_at and (ctx.node_id, ctx.phase) == self.hang_at[:2]:
            Path(self.hang_at[2]).touch()
            time.sleep(3600)
        kind = self.hostile.get(ctx.node_id)
        if kind and ctx.phase == "phase2":
            hostile = self._hostile(kind)
            if (
                kind in ("traversal", "enormous_output")
                and schema
                and "goal_summary" in (schema.get("properties") or {})
            ):
                return self._with_plan(hostile, text, ctx)  # a plan merged in: the hostility is the code's
            return hostile
        name = "exec_review" if ctx.label.startswith("exec_review") else ctx.phase
        if name == "phase2" and schema and "goal_summary" in (schema.get("properties") or {}):
            return self._with_plan(self._phase2(text, ctx), text, ctx)  # plan merged into the answer
        handler = getattr(self, f"_{name}", None)
        if handler is None:
            return json.dumps(self._generic(schema))
        answer = handler(text, ctx)
        if name == "ideas" and schema:  # as many ideas as the schema allows (the text asks for them)
            most = ((schema.get("properties") or {}).get("ideas") or {}).get("maxItems")
            data = json.loads(answer)
            if most and isinstance(data.get("ideas"), list) and len(data["ideas"]) > most:
                answer = json.dumps({**data, "ideas": data["ideas"][:most]})
        return answer

    # ----------------------------------------------------------- phases --
    def _phase0(self, text: str, ctx: CallContext) -> str:
        return json.dumps(
            {
                "goal_summary": "Measure clean validation accuracy of logistic regression under label noise.",
                "implementation_strategy": "One pure-Python script: synthetic data, SGD, metrics.json.",
                "dependencies": {"apt": [], "pip": [], "source": []},
                "phase_guidance": {"phase2": "write experiment.py", "phase4": "python3 experiment.py"},
                "risks_and_mitigations": ["noise too low: keep 20 % flips"],
                "time_budget_estimate": "under a second per run",
            }
        )

    def _phase1(self, text: str, ctx: CallContext) -> str:
        tool = self.new_tools.get(ctx.node_id)
        if tool and ctx.label == "step1":
            stub = f"$PREFIX/bin/{tool}"
            cmd = f'mkdir -p "$PREFIX/bin" && printf \'#!/bin/sh\\n\' > "{stub}" && chmod +x "{stub}"'
            return json.dumps({"command": cmd, "done": False, "notes": f"install {tool}"})
        return json.dumps({"command": "true", "done": True, "notes": "nothing to install"})

    def _phase2(self, text: str, ctx: CallContext) -> str:
        op_m = _OP.search(text)
        op = op_m.group(1) if op_m else "draft"
        idea_m = _IDEA.search(text)
        idea = idea_m.group(1).strip() if idea_m else ""
        if self.always_buggy or (op == "draft" and ctx.node_id in self.buggy_nodes):
            program = BUGGY_PROGRAM
        else:
            program = render(**params_from_idea(idea))
        if ctx.node_id in self.slow_nodes:
            program = (
                f"import pathlib, time\npathlib.Path('STARTED').touch()\n"
                f"time.sleep({self.slow_nodes[ctx.node_id]})\n"
            ) + program
        expected = ["metrics.json"]
        if ctx.node_id in self.no_metrics_file:
            program += "\nimport os\nos.remove('metrics.json')\n"
            expected = []
        return json.dumps(
            {
                "summary": f"{op}: logistic regression {idea or 'baseline'}",
                "files": [{"path": "experiment.py", "content": program, "encoding": "utf-8"}],
                "build": {"language": "python", "commands": []},
                "run": {"commands": ["/usr/bin/python3 experiment.py"], "expected_outputs": expected},
            }
        )

    def _with_plan(self, code_answer: str, text: str, ctx: CallContext) -> str:
        """A merged answer (agent.merge_calls): the code answer plus this child's plan fields."""
        op_m = _OP.search(text)
        idea_m = _IDEA.search(text)
        plan = json.loads(self._phase0(text, ctx))
        plan["goal_summary"] = (
            f"{op_m.group(1) if op_m else 'change'} the parent's experiment: "
            f"{idea_m.group(1).strip() if idea_m else 'same settings'}"
        )
        tool = self.new_tools.get(ctx.node_id)
        if tool:
            plan["dependencies"]["apt"] = [tool]
        try:
            answer = json.loads(code_answer)
        except json.JSONDecodeError:
            return code_answer  # a hostile answer stays as it is
        return json.dumps({**plan, **answer} if isinstance(answer, dict) else answer)

    def _exec_review(self, text: str, ctx: CallContext) -> str:
        # the node's own value: from its program and output, not from the tables of the stage's
        # other nodes (before them in the prompt) or its parent's result (in the brief)
        own = text[text.find("## Current code") :] if "## Current code" in text else text
        m = re.search(r"val_accuracy=([0-9.]+)", own)
        acc = m.group(1) if m else "unknown"
        review: dict[str, Any] = {
            "findings": f"ran cleanly; val_accuracy={acc}",
            "remarks": "",
            "measurement": "",
            "is_bug": False,
        }
        if ctx.label == "exec_review+metrics":  # no metrics.json: the review reads them from stdout
            review["metrics"] = (
                [{"name": "val_accuracy", "value": float(m.group(1)), "direction": "maximize"}] if m else []
            )
        return json.dumps(review)

    def _ideas(self, text: str, ctx: CallContext) -> str:
        pool = {"tune": TUNE_IDEAS, "ablate": ABLATE_IDEAS}.get(ctx.label, RESEARCH_IDEAS)
        return json.dumps({"ideas": pool})

    def _select(self, text: str, ctx: CallContext) -> str:
        ids = re.findall(r"\bn\d{4}\b", text)
        return json.dumps({"node_id": ids[0] if ids else "", "reasoning": "first listed candidate"})

    def _phase5_plot(self, text: str, ctx: CallContext) -> str:
        blank = ctx.node_id in self.blank_plot_nodes and "image is blank" not in text
        return json.dumps(
            {
                "script": BLANK_NODE_PLOT if blank else NODE_PLOT,
                "figures": [{"file": "train_loss.png", "caption": "Training loss per epoch of this node."}],
            }
        )

    def _phase5_vlm(self, text: str, ctx: CallContext) -> str:
        n_images = text.count("- train_loss.png")
        if ctx.node_id in self.invalid_plot_nodes:
            return json.dumps(
                {
                    "shows": f"Node {ctx.node_id}: the training loss curve stays flat at its first value.",
                    "problems": [f"Node {ctx.node_id}: the loss never decreases, so nothing was learned."],
                    "valid": False,
                    "reason": f"Node {ctx.node_id}: a flat loss contradicts the reported accuracy.",
                }
            )
        return json.dumps(
            {
                "shows": f"Node {ctx.node_id}: training loss falls over the epochs ({n_images} figure).",
                "problems": [f"Node {ctx.node_id}: the y axis starts at the minimum, exaggerating the drop."],
                "valid": True,
                "reason": f"Node {ctx.node_id}: the curve decreases and levels off as SGD should.",
            }
        )

    # -------------------------------------------------------- reporting --
    def _plots(self, text: str, ctx: CallContext) -> str:
        return json.dumps(
            {
                "script": PLOT_SCRIPT,
                "figures": [
                    {"file": "train_loss.png", "caption": "Training loss per epoch of the best nodes."}
                ],
            }
        )

    def _writeup(self, text: str, ctx: CallContext) -> str:
        if "citation" in ctx.label:
            return json.dumps({"queries": ["logistic regression label noise"]})
        return json.dumps(PAPER_SECTIONS)

    def _generic(self, schema: dict | None) -> Any:
        """A minimal instance of ``schema`` (for calls this fake has no script for)."""
        if not schema:
            return "ok"
        t = schema.get("type")
        if "enum" in schema:
            return schema["enum"][0]
        if t == "object":
            props = schema.get("properties", {})
            return {k: self._generic(props.get(k, {})) for k in schema.get("required", props.keys())}
        if t == "array":
            n = schema.get("minItems", 1)
            return [self._generic(schema.get("items", {})) for _ in range(n)]
        if t in ("number", "integer"):
            low = schema.get("minimum", 1)
            return int(low) if t == "integer" else float(low)
        return False if t == "boolean" else "text"

    # ---------------------------------------------------------- hostile --
    @staticmethod
    def _hostile(kind: str) -> str:
        if kind == "malformed":
            return '{"files": [ {"path": "x.py", "content": "print(1)" '  # truncated JSON
        if kind == "missing_fields":
            return json.dumps({"summary": "no files, no run"})
        if kind == "empty":
            return ""
        if kind == "traversal":
            return json.dumps(
                {
                    "files": [{"path": "../../outside.py", "content": "print('escaped')"}],
                    "build": {"language": "python"},
                    "run": {"commands": ["/usr/bin/python3 ../../outside.py"]},
                }
            )
        if kind == "enormous_output":
            flood = "import sys\nfor _ in range(400000):\n    sys.stdout.write('x' * 200 + '\\n')\n"
            return json.dumps(
                {
                    "files": [{"path": "flood.py", "content": flood}],
                    "build": {"language": "python"},
                    "run": {"commands": ["/usr/bin/python3 flood.py"]},
                }
            )
        raise ValueError(f"unknown hostile kind {kind!r}")


class EditingResponder(ExampleResponder):
    """The example's answers, but a child offered ``edits`` (``agent.code_edits``) answers with
    the edit list turning its parent's recorded files (``RUN/nodes/<parent>/code_answer.json``)
    into the files it would have written, and no whole files. ``bad_anchor_first``: the first
    child's first answer carries a near-miss anchor (the repair round must fix it). ``whole``
    keeps, per node, the files it meant to write."""

    def __init__(self, run_dir: Path | str, *, bad_anchor_first: bool = False, **kw: Any):
        super().__init__(**kw)
        self.run_dir = Path(run_dir)
        self.whole: dict[str, dict[str, str]] = {}
        self.bad_node: str | None = None
        self.bad_anchor_first = bad_anchor_first

    def _parent(self, node_id: str) -> str | None:
        from ai_scientist.base.fileio import read_jsonl
        from ai_scientist.base.paths import RunPaths

        parent = None
        for rec in read_jsonl(RunPaths(self.run_dir).journal):
            node = rec.get("node") or {}
            if node.get("id") == node_id:
                parent = node.get("parent_id")
        return parent

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: CallContext) -> str:
        from ai_scientist.phases.edits import make_edits, text_files

        text = super().__call__(messages, schema, ctx)
        if ctx.phase != "phase2" or "edits" not in ((schema or {}).get("properties") or {}):
            return text
        answer = json.loads(text)
        parent = self._parent(ctx.node_id)
        from ai_scientist.base.paths import CODE_FILE, RunPaths

        parent_answer = json.loads(RunPaths(self.run_dir).node(str(parent)).file(CODE_FILE).read_text())
        before, after = text_files(parent_answer), text_files(answer)
        with self._lock:
            self.whole[ctx.node_id] = after
        edits = [e.to_dict() for e in make_edits(before, after)]
        if self.bad_anchor_first and self.bad_node in (None, ctx.node_id) and edits:
            if self.bad_node is None:  # first call of the first child: a near-miss anchor
                self.bad_node = ctx.node_id
                edits[0] = {**edits[0], "anchor": edits[0]["anchor"].replace("=", "= ", 1) + "  # x"}
            else:
                self.bad_anchor_first = False
        new = [f for f in answer.get("files") or [] if f.get("path") not in before]
        return json.dumps({**answer, "edits": edits, "files": new})
