"""The run's standard figures, drawn by the pipeline when no LLM-written figure survived.

This file is not imported: :func:`ai_scientist.reporting.aggregate.standard_figures` copies it
into the figures folder and runs it **in the sandbox**, like the model's plotting script (the
data files it reads were written by generated code). It reads ``manifest.json`` and writes:

- ``std_metric_by_stage.png``: each stage's best node's metric, with its seed re-runs as points;
- ``std_curves.png``: the numeric series (lists of at least 3 numbers, e.g. a loss per epoch) in
  the JSON data files of the last stage's best node, at most 6 of them.

It prints one JSON line ``{"figures": [{"file", "caption"}, ...]}``: what it drew, captions
included. Standard library, numpy-free, matplotlib only.
"""

import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MAX_SERIES = 6
MAX_POINTS = 10_000


def _metric(entry):
    """The entry's headline: the first finite metric (manifest.py: ``metrics`` is name -> value)."""
    for name, value in (entry.get("metrics") or {}).items():
        if isinstance(value, (int, float)) and math.isfinite(value):
            return {"name": name, "value": value}
    return None


def metric_by_stage(nodes):
    best = [e for e in nodes if e.get("role") == "best" and _metric(e)]
    if not best:
        return None
    name = _metric(best[0])["name"]
    best = [e for e in best if _metric(e)["name"] == name]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    labels = []
    for i, e in enumerate(best):
        ax.bar(i, _metric(e)["value"], color="#4c72b0", alpha=0.8)
        seeds = [
            _metric(s)["value"]
            for s in nodes
            if s.get("role") == "seed_run" and s.get("seed_of") == e.get("node_id") and _metric(s)
        ]
        if seeds:
            ax.scatter([i] * len(seeds), seeds, color="black", s=12, zorder=3)
        labels.append(f"stage {e.get('stage')}\n{e.get('node_id')}")
    values = [_metric(e)["value"] for e in best]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.5 or abs(hi) * 0.05 or 1.0
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xticks(range(len(best)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel(name)
    ax.set_title(f"best {name} per stage")
    fig.tight_layout()
    fig.savefig("std_metric_by_stage.png", dpi=120)
    plt.close(fig)
    direction = _metric(best[0]).get("direction", "maximize")
    return {
        "file": "std_metric_by_stage.png",
        "caption": f"Best {name} ({direction}) of each stage's best node (bar: its own search run); "
        "dots are its re-runs with other seeds, over which alone the seed mean and standard error "
        "are reported. Drawn by the pipeline from the run's metrics.",
    }


def _series(value, path, out):
    if len(out) >= MAX_SERIES:
        return
    if isinstance(value, dict):
        for k, v in list(value.items())[:50]:
            _series(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and len(value) >= 3 and len(value) <= MAX_POINTS:
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            if all(math.isfinite(x) for x in value):
                out.append((path, value))


def curves(nodes):
    best = [e for e in nodes if e.get("role") == "best"]
    if not best:
        return None
    last = best[-1]
    found: list = []
    for f in last.get("files") or []:
        if f.get("kind") != "json" or f.get("error"):
            continue
        try:
            with open(f["path"], encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        _series(data, "", found)
    if not found:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for label, values in found:
        ax.plot(range(1, len(values) + 1), values, label=label[-40:])
    ax.set_xlabel("index (e.g. epoch)")
    ax.legend(fontsize=6)
    ax.set_title(f"series saved by {last.get('node_id')}")
    fig.tight_layout()
    fig.savefig("std_curves.png", dpi=120)
    plt.close(fig)
    names = ", ".join(label for label, _ in found)
    return {
        "file": "std_curves.png",
        "caption": f"Numeric series saved by node {last.get('node_id')} (stage {last.get('stage')}): "
        f"{names}. Drawn by the pipeline from the node's data files.",
    }


def main():
    with open("manifest.json", encoding="utf-8") as fh:
        nodes = json.load(fh).get("nodes") or []
    figures = [f for f in (metric_by_stage(nodes), curves(nodes)) if f]
    print(json.dumps({"figures": figures}))
    return 0 if figures else 1


if __name__ == "__main__":
    sys.exit(main())
