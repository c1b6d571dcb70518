"""Secret redaction applied to everything a run writes.

The values of the environment variables named in the config (``llm.api_key_env``,
``report.citations.api_key_env``, ``openalex_key_env``, ``crossref_key_env``) plus any variable whose name looks like a
credential are replaced by ``[REDACTED:<NAME>]``; common token shapes (``sk-...``,
GitHub, Slack, AWS, Hugging Face, bearer headers) are replaced even when no
variable names them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Config

_NAME_HINT = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
# token shapes, in one alternation so a string is scanned once
_TOKENS = re.compile(
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[baprs]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|hf_[A-Za-z0-9]{20,}"
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9\-._~+/]{16,}=*")
MIN_SECRET_LEN = 6


class Redactor:
    """Replaces secret values and token-shaped strings in text and JSON-like data."""

    def __init__(self, names: Iterable[str] = (), environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        wanted = set(names)
        self._values: dict[str, str] = {}
        for name, value in env.items():
            if (name in wanted or _NAME_HINT.search(name)) and value and len(value) >= MIN_SECRET_LEN:
                self._values[value] = name
        # longest first so a secret containing another is replaced whole
        self._ordered = sorted(self._values, key=len, reverse=True)

    @property
    def secret_values(self) -> list[str]:
        return list(self._ordered)

    def redact(self, text: str) -> str:
        if not text:
            return text
        for value in self._ordered:
            if value in text:
                text = text.replace(value, f"[REDACTED:{self._values[value]}]")
        text = _TOKENS.sub("[REDACTED]", text)
        return _BEARER.sub(lambda m: m.group(1) + "[REDACTED]", text)

    def redact_obj(self, obj: Any) -> Any:
        """Redact every string inside nested dicts/lists (keys included)."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact(str(k)): self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.redact_obj(v) for v in obj]
        return obj


def redactor_for(cfg: Config, environ: Mapping[str, str] | None = None) -> Redactor:
    """The redactor for a loaded :class:`~ai_scientist.base.config.Config`."""
    c = cfg.report.citations
    names = [cfg.llm.api_key_env, c.api_key_env, c.openalex_key_env, c.crossref_key_env]
    return Redactor(names, environ)


def safe_environ_names() -> tuple[str, ...]:
    """Environment variable names a sandbox may inherit (everything else is dropped)."""
    return ("PATH", "LANG", "LC_ALL", "TERM", "TZ", "HOME", "USER", "LOGNAME", "SHELL")
