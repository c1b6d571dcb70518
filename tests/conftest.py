"""Shared pytest set-up: Hypothesis profiles.

``HYPOTHESIS_PROFILE=mutation`` (set by scripts/mutation.sh) makes every property test
deterministic — derandomized, no example database, no deadline — so a mutant is killed
or survives the same way on every run.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("mutation", derandomize=True, database=None, deadline=None, print_blob=False)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
