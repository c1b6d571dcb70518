"""Where this checkout's private test daemons and non-root venv live (as ``scripts/ci_paths.sh``).

``AI_SCI_TMP`` defaults to ``/tmp/ai-sci-<first 8 hex of sha256 of the checkout's real path>``:
two checkouts on one machine (two CI runs) never share a Docker daemon, a Slurm cluster or the
non-root venv.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ci_tmp() -> Path:
    if os.environ.get("AI_SCI_TMP"):
        return Path(os.environ["AI_SCI_TMP"])
    digest = hashlib.sha256(str(ROOT.resolve()).encode()).hexdigest()[:8]
    return Path("/tmp") / f"ai-sci-{digest}"


def nonroot_dir() -> Path:
    return Path(os.environ.get("AI_SCI_NONROOT_DIR") or ci_tmp() / "nonroot")
