"""Choosing and building the LLM backend and client from the config (``doctor``'s checks: probe.py).

``llm.backend``: ``auto`` is ``openai`` when the environment variable named by
``llm.api_key_env`` is set, else ``local``; ``replay`` answers from ``llm.replay_dir``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..base.config import Config, ConfigError
from ..base.paths import RunPaths
from ..base.redact import Redactor
from .backend import Backend
from .call import LLMError
from .client import LLMClient
from .cost import CostLedger


def resolve_backend_name(cfg: Config, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(backend name, why) for ``llm.backend``; never reveals the key."""
    env = os.environ if environ is None else environ
    name = cfg.llm.backend
    if name != "auto":
        return name, f"llm.backend is {name}"
    if env.get(cfg.llm.api_key_env):
        return "openai", f"auto: {cfg.llm.api_key_env} is set"
    return "local", f"auto: {cfg.llm.api_key_env} is not set, using the embedded llama.cpp model"


def base_url_of(cfg: Config, environ: Mapping[str, str] | None = None) -> str | None:
    """``llm.base_url``, else ``OPENAI_BASE_URL``, else None (the SDK's default endpoint)."""
    env = os.environ if environ is None else environ
    return cfg.llm.base_url or env.get("OPENAI_BASE_URL") or None


def make_backend(cfg: Config, environ: Mapping[str, str] | None = None) -> Backend:
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
        from .local_models import local_model_file

        path = local_model_file(llm.local_model, llm.local_model_path)  # ConfigError names the key
        try:
            return LocalBackend(str(path), n_ctx=llm.local_n_ctx, n_threads=llm.local_threads)
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
    cfg: Config, run_dir: str | Path | None, redactor: Redactor | None, *, backend: Backend | None = None
) -> LLMClient:
    """The run's client: prompt logs under ``run_dir/nodes`` (always: resume, replay and ``logs``
    need them; ``exec.log_prompts`` adds the ``.md`` rendering) and ``run_dir/cost.json``
    (continuing an existing one)."""
    from ..promptlog.record import PromptLogger

    redactor = redactor or Redactor([cfg.llm.api_key_env])
    backend = backend if backend is not None else make_backend(cfg)
    if run_dir is not None and hasattr(backend, "use_run_dir"):
        backend.use_run_dir(run_dir)  # the openai backend keeps its structured-output negotiation there
    logger = (
        PromptLogger(run_dir, redactor, write_markdown=cfg.exec.log_prompts) if run_dir is not None else None
    )
    cost_path = RunPaths(run_dir).cost if run_dir is not None else None
    cost = CostLedger(cost_path, cfg.llm.prices, cfg.llm.max_cost_usd)
    return LLMClient(cfg, backend, logger=logger, cost=cost, redactor=redactor)
