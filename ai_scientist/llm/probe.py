"""What ``ai-scientist doctor`` says about the LLM side: the backend ``auto`` picks, the key (set
or not, never its value), and for an OpenAI-compatible endpoint a live probe: the models it
lists, the context window when the server reports one, the structured-output mode a run
will use (negotiated with one tiny request per rung, see :mod:`.negotiation`) and whether it
takes an image.

Every row is ``{name, ok, status, detail}``: ``status`` is the word the table shows and it
agrees with ``detail``, a sentence; ``ok`` is False only for what blocks a run.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..base.paths import RunPaths
from .backend import (
    BackendError,
    RequestRejected,
    ServerError,
    StructuredOutputUnsupported,
    VisionUnsupported,
)
from .call import CallContext
from .negotiation import INSTRUCTED, LADDER
from .structured import AnswerError, parse_answer, validate_answer, with_schema_instruction

if TYPE_CHECKING:
    from ..base.config import Config, LLMConfig
    from .openai_backend import OpenAIBackend

HTTP_TIMEOUT_S = 3.0  # listing models / props: a live server answers at once
PROBE_TIMEOUT_S = 60.0  # one tiny completion (a CPU server may load the model first)
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
PROBE_MESSAGES = [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}]
# A 1x1 PNG: the smallest image a vision endpoint must accept.
_PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/"
    "iZk9HQAAAABJRU5ErkJggg=="
)
IMAGE_MESSAGES = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Name the colour of this image in one word."},
            {"type": "image_url", "image_url": {"url": _PIXEL}},
        ],
    }
]
_MODE_WORDS = {
    "json_schema": "response_format json_schema",
    "json_object_schema": "response_format json_object with a schema",
    "json_object": "response_format json_object, schema in the prompt",
    "prompt": "no response_format, schema in the prompt",
}


def row(name: str, ok: bool, status: str, detail: str) -> dict[str, Any]:
    return {"name": name, "ok": ok, "status": status, "detail": detail}


def check_llm(cfg: Config, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Doctor rows for the LLM side (see the module docstring). The key's value is never shown."""
    from .factory import base_url_of, resolve_backend_name

    env = os.environ if environ is None else environ
    llm = cfg.llm
    name, why = resolve_backend_name(cfg, env)
    rows = [row("llm backend", True, name, f"Runs will use the {name} backend ({why}).")]
    key = env.get(llm.api_key_env)
    if key:
        rows.append(row("api key", True, "set", f"{llm.api_key_env} is set (its value is never shown)."))
    elif name == "openai":
        rows.append(
            row("api key", False, "missing", f"{llm.api_key_env} is not set; the openai backend needs it.")
        )
    else:
        rows.append(
            row(
                "api key",
                True,
                "not set",
                f"{llm.api_key_env} is not set; only the openai backend needs it, and {name} is used.",
            )
        )
    if name == "openai" and key:
        rows += check_endpoint(cfg, base_url_of(cfg, env), key)
    rows += _local_rows(llm, needed=name == "local")
    if name == "replay":
        ok = bool(llm.replay_dir and RunPaths(llm.replay_dir).nodes.is_dir())
        rows.append(
            row(
                "replay dir",
                ok,
                "ok" if ok else "missing",
                f"{llm.replay_dir} {'holds' if ok else 'does not hold'} a recorded run's prompt logs.",
            )
        )
    return rows


def _local_rows(llm: LLMConfig, *, needed: bool) -> list[dict[str, Any]]:
    """The embedded model's rows; missing pieces block a run only when the local backend is used."""
    from .local_models import describe_local_model

    found, sentence = describe_local_model(llm.local_model, llm.local_model_path)
    rows = [row("local model", found or not needed, "found" if found else "missing", sentence)]
    try:
        import llama_cpp

        rows.append(
            row(
                "llama_cpp",
                True,
                "ok",
                f"The llama_cpp module imports (llama-cpp-python {llama_cpp.__version__}).",
            )
        )
    except Exception as exc:  # an ImportError or a broken native build: both mean "not usable"
        rows.append(row("llama_cpp", not needed, "missing", f"The llama_cpp module does not import: {exc}"))
    return rows


# ------------------------------------------------------------- endpoint --


def check_endpoint(cfg: Config, base_url: str | None, key: str) -> list[dict[str, Any]]:
    """Rows for a live OpenAI-compatible endpoint: models, context window, structured output, images."""
    from .openai_backend import OpenAIBackend

    backend = OpenAIBackend(
        base_url=base_url,
        api_key=key,
        structured_output=cfg.llm.structured_output,
        key_env=cfg.llm.api_key_env,
        timeout=min(cfg.llm.timeout_s, PROBE_TIMEOUT_S),
    )
    url = backend.url.rstrip("/")
    model = cfg.model_for("code")
    listing, problem = _get_json(f"{url}/models", key)
    if problem is not None:
        return [row("llm endpoint", False, "unreachable", f"{url}/models {problem}.")]
    models = [m.get("id") for m in (listing or {}).get("data", []) if isinstance(m, dict)]
    shown = ", ".join(str(m) for m in models[:5]) + (" ..." if len(models) > 5 else "")
    rows = [
        row(
            "llm endpoint",
            True,
            "reachable",
            f"{url}/models answered; models listed: {shown or 'none'}; runs ask for {model}.",
        )
    ]
    n_ctx, source = context_window(url, key, model, listing)
    # what prompts are budgeted from (context/budget.py): the config's window, else the known table
    from ..context.budget import Budget

    budget = Budget.from_config(cfg.context, model=model)
    if n_ctx:
        detail = (
            f"The server reports {n_ctx} tokens ({source}); prompts get {budget.max_tokens} ({budget.source})"
        )
        if budget.max_tokens > n_ctx - cfg.context.reserved_output_tokens:
            detail += f": set context.model_context_window: {n_ctx}"
        rows.append(row("context window", True, f"{n_ctx} tokens", detail + "."))
    else:
        rows.append(
            row(
                "context window",
                True,
                "unknown",
                "The server does not report the model's context window; prompts get "
                f"{budget.max_tokens} tokens ({budget.source}).",
            )
        )
    rows.append(structured_row(backend, model))
    rows.append(images_row(backend, model))
    return rows


def run_context_window(cfg: Config, environ: Mapping[str, str] | None = None) -> tuple[int | None, str]:
    """For a run about to start: the context window the endpoint reports for ``llm.model`` when
    prompts would otherwise be budgeted from the default window (an OpenAI-compatible backend,
    ``context.max_prompt_tokens: auto``, no ``context.model_context_window``, a model the known
    table lacks). (tokens, a line saying what was found) — (None, "") when nothing needs asking;
    (None, a warning) when the server does not say. One GET of ``/models`` (and llama.cpp's
    ``/props``), bounded by the probe's timeout."""
    from ..context.budget import known_window
    from .factory import base_url_of, resolve_backend_name

    env = os.environ if environ is None else environ
    model = cfg.llm.model
    if (
        resolve_backend_name(cfg, env)[0] != "openai"
        or cfg.context.max_prompt_tokens != "auto"
        or cfg.context.model_context_window is not None
        or known_window(model) is not None
    ):
        return None, ""
    url = (base_url_of(cfg, env) or "https://api.openai.com/v1").rstrip("/")
    key = env.get(cfg.llm.api_key_env, "")
    listing, problem = _get_json(f"{url}/models", key)
    n_ctx, source = context_window(url, key, model, listing) if problem is None else (None, "")
    if n_ctx:
        return n_ctx, f"context window of {model}: {n_ctx} tokens, as the server reports ({source})"
    return None, (
        f"context window of {model} unknown (not in the known table; the server does not report it): "
        "prompts are budgeted from the default 8192-token window; set context.model_context_window"
    )


def _get_json(url: str, key: str | None) -> tuple[Any, str | None]:
    """(parsed body, None) or (None, why not) for a GET with the bearer key."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
            return json.loads(resp.read() or b"null"), None
    except urllib.error.HTTPError as exc:
        why = "rejected the key" if exc.code in (401, 403) else f"answered HTTP {exc.code}"
        return None, why
    except (urllib.error.URLError, OSError) as exc:
        return None, f"is not reachable: {getattr(exc, 'reason', exc)}"
    except ValueError:
        return None, "answered with a body that is not JSON"


_CTX_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window", "n_ctx")


def context_window(url: str, key: str, model: str, listing: Any) -> tuple[int | None, str]:
    """(tokens, where it came from): the model entry of ``/models`` (vLLM ``max_model_len``, LM Studio
    ``max_context_length``, llama.cpp ``meta.n_ctx_train``), else llama.cpp's ``/props``."""
    entries = [m for m in (listing or {}).get("data", []) if isinstance(m, dict)]
    entry = next((m for m in entries if m.get("id") == model), entries[0] if len(entries) == 1 else None)
    if entry is not None:
        for k in _CTX_KEYS:
            if isinstance(entry.get(k), int) and entry[k] > 0:
                return entry[k], f"/models {k}"
        raw_meta = entry.get("meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        for k in ("n_ctx", "n_ctx_train"):
            if isinstance(meta.get(k), int) and meta[k] > 0:
                return meta[k], f"/models meta.{k}"
    parts = urllib.parse.urlsplit(url)
    root = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    props, _ = _get_json(f"{root}/props", key)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        for where, value in (("n_ctx", props.get("n_ctx")), ("default_generation_settings.n_ctx", None)):
            if value is None and isinstance(settings, dict):
                value = settings.get("n_ctx")
            if isinstance(value, int) and value > 0:
                return value, f"/props {where}"
    return None, ""


def probe_structured(backend: OpenAIBackend, model: str) -> dict[str, Any]:
    """Negotiate with one tiny request per rung: ``{mode, valid, rejected, error}``."""
    ctx = CallContext(node_id="doctor", phase="doctor", label="structured_probe")
    for _ in LADDER:
        mode = backend.structured_mode(model)
        msgs = with_schema_instruction(PROBE_MESSAGES, PROBE_SCHEMA) if mode in INSTRUCTED else PROBE_MESSAGES
        try:
            reply = backend.complete(
                msgs,
                model=model,
                temperature=0.0,
                max_tokens=48,
                schema=PROBE_SCHEMA if mode != "prompt" else None,
                timeout=PROBE_TIMEOUT_S,
                ctx=ctx,
                structured=mode,
            )
        except StructuredOutputUnsupported:
            continue
        except BackendError as exc:
            return {"mode": mode, "error": str(exc), "rejected": _rejected(backend, model)}
        try:
            validate_answer(parse_answer(reply.text), PROBE_SCHEMA)
            valid = True
        except AnswerError:
            valid = False
        return {"mode": mode, "valid": valid, "rejected": _rejected(backend, model), "error": None}
    return {"mode": None, "error": "every rung was refused", "rejected": _rejected(backend, model)}


def _rejected(backend: OpenAIBackend, model: str) -> list[dict[str, Any]]:
    entry = backend.negotiation.entry(backend.url, model)
    return entry["rejected"] if entry else []


def structured_row(backend: OpenAIBackend, model: str) -> dict[str, Any]:
    found = probe_structured(backend, model)
    refused = "; ".join(f"refused {r['mode']} (HTTP {r['status']})" for r in found["rejected"])
    if found.get("error"):
        return row(
            "structured output",
            False,
            "FAIL",
            f"The probe request failed in mode {found['mode']}: {found['error']}"
            + (f" (the server {refused})" if refused else "")
            + ".",
        )
    mode = found["mode"]
    answer = "matched" if found["valid"] else "did not match (the run's repair round handles that)"
    fixed = "" if backend.structured_output == "auto" else f" (llm.structured_output is {mode})"
    return row(
        "structured output",
        True,
        mode,
        f"Runs will use {mode}: {_MODE_WORDS[mode]}{fixed}"
        + (f"; the server {refused}" if refused else "")
        + f"; the probe answer {answer} the schema.",
    )


def images_row(backend: OpenAIBackend, model: str) -> dict[str, Any]:
    """Whether the server takes a request with an image (that the model sees it is not checked)."""
    ctx = CallContext(node_id="doctor", phase="doctor", label="image_probe")
    try:
        backend.complete(
            IMAGE_MESSAGES,
            model=model,
            temperature=0.0,
            max_tokens=4,
            schema=None,
            timeout=PROBE_TIMEOUT_S,
            ctx=ctx,
        )
    except (VisionUnsupported, RequestRejected) as exc:
        return row(
            "images",
            True,
            "refused",
            f"The server refused a request with an image ({exc}); figure analysis will be skipped.",
        )
    except ServerError as exc:  # llama-cpp-python's chat template crashes on a list content: 500
        return row(
            "images",
            True,
            "refused",
            f"The server failed on a request with an image although text requests work ({exc}); "
            "treat this endpoint as text-only.",
        )
    except BackendError as exc:
        return row("images", True, "unknown", f"The image probe could not reach a verdict: {exc}.")
    return row(
        "images",
        True,
        "accepted",
        "The server accepted a request with an image (whether the model really sees it is not checked).",
    )
