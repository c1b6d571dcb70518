"""Outcomes of a reporting step other than success, each with a reason a user can act on."""

from __future__ import annotations


class StepSkipped(Exception):
    """The step could not apply (no data, no vision model, tools missing); not a bug."""


class StepFailed(Exception):
    """The step ran and failed after its bounded retries; the message says what and where."""
