"""The environment a sandboxed command sees: an allow-list, never the host's environment.

Host variables are not inherited (API keys live there). A command gets a
fixed PATH, locale, a private HOME and TMPDIR inside its workspace, the
resources directory, the lineage install prefix (see :mod:`.lineage`) and the
variables the caller passes, minus any whose name looks like a credential.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from .base import RESOURCES_ENV, SYSTEM_PATH
from .lineage import install_environ

if TYPE_CHECKING:
    from pathlib import Path

_PASS_THROUGH = ("LANG", "LC_ALL", "TZ", "TERM")
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
TMP_DIRNAME = ".tmp"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def sandbox_environ(
    *,
    workspace: str,
    extra: dict[str, str] | None = None,
    resources: str | None = None,
    install_prefix: str | None = None,
    python: str = "/usr/bin/python3",
    marker: str | None = None,
) -> tuple[dict[str, str], list[str]]:
    """(environment, names dropped because they look like secrets). Paths are as seen inside."""
    env = {k: os.environ[k] for k in _PASS_THROUGH if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        PATH=SYSTEM_PATH,
        HOME=workspace,
        TMPDIR=f"{workspace}/{TMP_DIRNAME}",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
        AI_SCIENTIST_WORKSPACE=workspace,
        AI_SCIENTIST_PYTHON=python,
    )
    if resources:
        env[RESOURCES_ENV] = resources
    if install_prefix:
        env.update(install_environ(install_prefix, python))
    if marker:
        env["AI_SCIENTIST_SANDBOX_ID"] = marker
    dropped: list[str] = []
    for key, value in (extra or {}).items():
        if is_secret_name(key):
            dropped.append(key)
            continue
        env[str(key)] = str(value)
    return env, dropped


def ensure_dir(path: str | os.PathLike | None) -> Path | None:
    """The resolved directory (created if missing), or None."""
    if not path:
        return None
    from pathlib import Path

    p = Path(path).resolve()
    p.mkdir(parents=True, exist_ok=True)
    return p
