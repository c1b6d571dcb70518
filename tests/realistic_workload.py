"""A realistic node workload for prompt tests and benchmarks (issue 28).

The bundled example's experiment is 3 kB and prints one line; a research program a capable model
writes is ~20 kB and prints several kB. :class:`RealisticResponder` answers like
:class:`~ai_scientist_testing.scripted.ExampleResponder`, but each working program is padded to about
20 kB of real, importable code, prints about 5 kB (a per-epoch log, then the results as its last
lines), writes three metrics to ``metrics.json`` and two data files (``results.json`` and
``curves.csv``), and leaves a 58 kB matplotlib font cache under ``.cache/`` (as an experiment that
imports matplotlib does): data that is not the experiment's.

Used by ``tests/test_capable_view.py`` and ``bench/call_tokens.py``.
"""

from __future__ import annotations

import json
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder

METRIC_NAMES = ("val_accuracy", "val_loss", "train_time_s")
DATA_FILES = ("results.json", "curves.csv")
CACHE_FILE = ".cache/matplotlib/fontlist-v330.json"


def _helpers(n: int = 40) -> str:
    """About 15 kB of helper code: small documented functions a real program would carry."""
    parts = []
    for i in range(n):
        parts.append(
            f'''
def summarise_block_{i}(values, window={i % 7 + 2}):
    """Moving statistics of block {i}: mean, min and max over a window of {i % 7 + 2} values.

    Returns a list of (mean, lo, hi) tuples; an empty input gives an empty list.
    """
    out = []
    for start in range(0, max(0, len(values) - window + 1)):
        chunk = values[start : start + window]
        out.append((sum(chunk) / len(chunk), min(chunk), max(chunk)))
    return out
'''
        )
    return "".join(parts)


TRAILER = """

# ---- the realistic part: a per-epoch log, three metrics, two data files, a cache ----
import csv as _csv
import os as _os
import time as _time

_t0 = _time.perf_counter()
with open("results.json") as _fh:
    _res = json.load(_fh)
_losses = _res["train_loss"]
for _rep in range(10):
    for _epoch, _loss in enumerate(_losses, 1):
        _stats = summarise_block_3(_losses[: _epoch + 2])
        print(f"rep {_rep} epoch {_epoch:3d} train_loss={_loss:.6f} window_stats={len(_stats)} lr={LR} l2={L2}")
with open("curves.csv", "w", newline="") as _fh:
    _w = _csv.writer(_fh)
    _w.writerow(["epoch", "train_loss"])
    for _epoch, _loss in enumerate(_losses, 1):
        _w.writerow([_epoch, _loss])
# what importing matplotlib leaves (the names built at run time: the program text does not hold them)
_cache = _os.path.join("." + "cache", "matplotlib")
_os.makedirs(_cache, exist_ok=True)
with open(_os.path.join(_cache, "font" + "list-v%d.json" % 330), "w") as _fh:
    json.dump({"_version": 330, "ttflist": [{"fname": f"/usr/share/fonts/f{_i}.ttf", "name": "DejaVu Sans"} for _i in range(900)]}, _fh)
_acc = _res["val_accuracy"]
_val_loss = round(_losses[-1] * 1.07, 6)
_elapsed = round(_time.perf_counter() - _t0 + 0.0123, 6)
with open("metrics.json", "w") as _fh:
    json.dump({"metrics": [
        {"name": "val_accuracy", "value": _acc, "direction": "maximize", "dataset": "synthetic"},
        {"name": "val_loss", "value": _val_loss, "direction": "minimize", "dataset": "synthetic"},
        {"name": "train_time_s", "value": _elapsed, "direction": "minimize"},
    ]}, _fh)
print("== results ==")
print(f"FINAL val_accuracy={_acc:.4f}")
print(f"FINAL val_loss={_val_loss}")
print(f"FINAL train_time_s={_elapsed}")
"""


def realistic_program(program: str) -> str:
    """``program`` (the example's experiment) grown into the realistic workload above."""
    return f"{program}\n{_helpers()}{TRAILER}"


class RealisticResponder(ExampleResponder):
    """The example's answers, with every working program made realistic (see the module doc)."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer.get("files") or []:
            if f.get("path") == "experiment.py" and "compute_accuracy()" not in f.get("content", ""):
                f["content"] = realistic_program(f["content"])
        return json.dumps(answer)
