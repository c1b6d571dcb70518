"""Text embedders for archival vector search: offline ``wordllama``, an OpenAI-compatible endpoint, or none.

Every embedder returns float32 rows of unit length (cosine similarity == inner product), so
the faiss index can use ``IndexFlatIP``. ``name`` identifies the model: vectors made by a
different model are re-embedded by :meth:`MemoryStore.rebuild_vectors`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .db import MemoryStoreError

if TYPE_CHECKING:
    from ..base.config import Config


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 array of shape (len(texts), dim)."""
        ...


def normalise(vecs: np.ndarray) -> np.ndarray:
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim == 1:
        vecs = vecs[None, :]
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # an empty text embeds to zeros; keep it zero instead of NaN
    return np.ascontiguousarray(vecs / norms, dtype=np.float32)


def _wordllama_cache() -> Path:
    """A cache folder holding wordllama's shipped tokenizer where ``WordLlama.load`` looks for it.

    wordllama searches ``<cache_dir>/tokenizers/`` and otherwise tries to download, so the
    tokenizer files shipped inside the package are copied there once.
    """
    import wordllama

    pkg = Path(wordllama.__file__).parent
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    cache = Path(base) / "ai_scientist" / "wordllama"
    try:
        (cache / "tokenizers").mkdir(parents=True, exist_ok=True)
    except OSError:
        cache = Path(tempfile.gettempdir()) / f"ai_scientist_wordllama_{os.getuid()}"
        (cache / "tokenizers").mkdir(parents=True, exist_ok=True)
    for src in (pkg / "tokenizers").glob("*.json"):
        dst = cache / "tokenizers" / src.name
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
    return cache


class WordLlamaEmbedder:
    """Offline 256-d embeddings from the weights shipped in the ``wordllama`` package."""

    def __init__(self, config: str | None = None, dim: int = 256):
        try:
            from wordllama import WordLlama
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise MemoryStoreError(
                "memory.embedding.backend=wordllama but the 'wordllama' package is not installed "
                "(pip install wordllama, or set memory.embedding.backend: none)"
            ) from exc
        cfg_name = config or "l2_supercat"
        try:
            self._wl = WordLlama.load(
                config=cfg_name, cache_dir=_wordllama_cache(), dim=dim, disable_download=True
            )
        except Exception as exc:
            raise MemoryStoreError(
                f"memory.embedding.model={cfg_name!r}: wordllama could not load its shipped weights "
                f"offline ({exc}); use the default model or memory.embedding.backend: none"
            ) from exc
        self.name = f"wordllama:{cfg_name}:{dim}"
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._wl.embed(list(texts)))


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (vLLM, Ollama, OpenAI...)."""

    def __init__(self, model: str, base_url: str | None, api_key_env: str, client: Any = None):
        if client is None:
            from openai import OpenAI

            key = os.environ.get(api_key_env)
            if not key and base_url is None:
                raise MemoryStoreError(
                    f"memory.embedding.backend=openai needs an API key in ${api_key_env} "
                    "(llm.api_key_env) or a local llm.base_url"
                )
            client = OpenAI(api_key=key or "not-needed", base_url=base_url)
        self._client = client
        self.model = model
        self.name = f"openai:{model}"
        self.dim = 0  # known after the first call

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: list[list[float]] = []
        for start in range(0, len(texts), 256):  # endpoints cap the batch size
            batch = [t if t.strip() else " " for t in texts[start : start + 256]]
            try:
                resp = self._client.embeddings.create(model=self.model, input=batch)
            except Exception as exc:
                raise MemoryStoreError(f"embedding endpoint failed for model {self.model!r}: {exc}") from exc
            out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        vecs = normalise(np.array(out, dtype=np.float32))
        self.dim = vecs.shape[1]
        return vecs


def embedder_from_config(cfg: Config) -> Embedder | None:
    """The embedder named by ``cfg.memory.embedding`` (a full Config), or ``None`` for ``none``."""
    emb = cfg.memory.embedding
    if emb.backend == "none":
        return None
    if emb.backend == "wordllama":
        return WordLlamaEmbedder(emb.model)
    return OpenAIEmbedder(emb.model or "text-embedding-3-small", cfg.llm.base_url, cfg.llm.api_key_env)
