"""A node's metrics as the pipeline keeps them: a list of ``{name, value, direction, dataset}``.

One parser for every source of metrics (the program's ``metrics.json``, the review's fallback,
a grader's answer), so each is checked the same way."""

from __future__ import annotations

from typing import Any


def normalise_metrics(data: Any) -> list[dict]:
    """Accept ``{"metrics": [...]}``, a list, or ``{name: {value, direction}}``; validate each."""
    if isinstance(data, dict) and "metrics" in data:
        data = data["metrics"]
    if isinstance(data, dict):
        data = [{"name": k, **(v if isinstance(v, dict) else {"value": v})} for k, v in data.items()]
    if not isinstance(data, list):
        raise ValueError("metrics must be a list of {name, value, direction}")
    out = []
    for i, m in enumerate(data):
        if not isinstance(m, dict) or "name" not in m or "value" not in m:
            raise ValueError(f"metric entry {m!r} needs name and value")
        direction = m.get("direction", "maximize")
        # "none" marks a diagnostic (no better side: relay s7 ln2 018 had to call one maximize);
        # the first entry is the headline nodes are ranked by, so it needs a side
        if direction not in ("maximize", "minimize", "none"):
            raise ValueError(
                f"metric {m['name']}: direction must be maximize, minimize or none (a diagnostic)"
            )
        if direction == "none" and i == 0:
            raise ValueError(
                f"metric {m['name']}: the first metrics.json entry is the headline nodes are ranked by; "
                'its direction must be maximize or minimize, not "none" (list a diagnostic after it)'
            )
        value = float(m["value"])
        if value != value:  # NaN
            raise ValueError(f"metric {m['name']}: value is NaN")
        out.append(
            {
                "name": str(m["name"]),
                "value": value,
                "direction": direction,
                "dataset": (str(m["dataset"]) if m.get("dataset") else None),
            }
        )
    return out
