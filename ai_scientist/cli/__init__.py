"""Entry layer: the ``ai-scientist`` command line (``main``) and its command handlers — run / resume /
replay (``commands``), ``logs``, ``doctor``, ``exec`` (``sandbox_exec``), ``ideate`` — and the last lines
of a run (``outcome``). Nothing below this package imports it."""

from ..base.errors import (  # noqa: F401  (exit codes re-exported for scripts that import them from here)
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_WORKING_EXPERIMENT,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_USAGE,
    UsageError,
)
from .main import main  # noqa: F401
