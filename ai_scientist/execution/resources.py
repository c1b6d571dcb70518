"""Resources a run may use: local paths, git repositories, fetched datasets / models, described items.

A resources file (YAML or JSON) is a list under ``resources:`` (or a bare list):

    resources:
      - id: mnist            # [a-z0-9_.-]; default: derived from path / url
        type: local          # local | git | dataset | model | described
        path: data/mnist     # relative to the resources file
        mode: copy           # copy (default) | bind (no copy; mounted from where it is)
        writable: false      # read-only unless true
        summary: 70k handwritten digits as .npz
      - {id: lib, type: git, url: file:///srv/lib.git, ref: v1.2}
      - {id: weights, type: model, fetch: "curl -fsSLo w.bin https://...", summary: ...}
      - {id: cluster, type: described, class: hardware, summary: 4 nodes with 2 A100 each}

``stage_resources`` puts every item under ``<run>/resources/<id>`` with sha256
digests and writes ``<run>/resources/index.json``. Inside every sandbox the
items are at ``resources/<id>`` relative to the working directory and at
``$AI_SCIENTIST_RESOURCES/<id>`` (``/resources/<id>`` in bwrap, docker and
apptainer). Fetch commands run in the sandbox, in the item's directory, only
when the network is allowed; otherwise the item is recorded as skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..base.config import ConfigError
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import RunPaths
from ..base.userfiles import load_json, load_yaml, read_user_text
from .resource_binds import bind_sources  # noqa: F401 - re-exported (the backends import it from there)

if TYPE_CHECKING:
    from .base import Executor, Limits

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ResourceEntry(BaseModel):
    """One declared resource; which fields are required depends on ``type``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    id: str | None = None
    type: Literal["local", "git", "dataset", "model", "described"]
    path: str | None = None
    url: str | None = None
    ref: str | None = None
    fetch: str | None = None
    mode: Literal["copy", "bind"] = "copy"
    writable: bool = False
    summary: str = ""
    class_: str | None = Field(None, alias="class")
    tags: list[str] = Field(default_factory=list)

    def required(self, name: str) -> str:
        """A field the checks made sure of for this entry (``path`` of a local one, ``url`` of a
        git one, ``id`` once the file is read): raises if it is missing after all."""
        value = getattr(self, name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"resource {self.id!r} ({self.type}) has no {name!r}")
        return value

    @model_validator(mode="after")
    def _fields_for_type(self) -> ResourceEntry:
        need = {"local": ("path",), "git": ("url",), "described": ("summary",)}.get(self.type, ())
        for name in need:
            if not getattr(self, name):
                raise ValueError(f"type {self.type!r} needs '{name}'")
        if self.type in ("dataset", "model") and not (self.fetch or self.path):
            raise ValueError(f"type {self.type!r} needs 'fetch' (a command) or 'path'")
        if self.id is not None and not _ID.match(self.id):
            raise ValueError(f"id {self.id!r} must match {_ID.pattern}")
        return self


@dataclass
class ResourceSpec:
    entries: list[ResourceEntry]
    source: Path


@dataclass
class ResourceItem:
    id: str
    type: str
    status: str  # staged | skipped | failed | described
    summary: str = ""
    klass: str | None = None
    tags: list[str] = field(default_factory=list)
    path: str | None = None  # relative to the working directory inside every sandbox
    mode: str = "copy"
    writable: bool = False
    source: str | None = None
    ref: str | None = None
    commit: str | None = None
    sha256: str | None = None
    files: int = 0
    bytes: int = 0
    reason: str = ""


@dataclass
class ResourceIndex:
    items: list[ResourceItem]
    root: Path

    def to_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "items": [asdict(i) for i in self.items]}

    def binds(self) -> list[tuple[Path, str]]:
        """(host source, id) of ``mode: bind`` items; container backends mount them at /resources/<id>."""
        return [
            (Path(i.source), i.id)
            for i in self.items
            if i.status == "staged" and i.mode == "bind" and i.source
        ]


# ------------------------------------------------------------------ loading --


def _default_id(entry: ResourceEntry, n: int) -> str:
    base = entry.path or entry.url or f"item{n}"
    name = re.sub(r"\.git$", "", Path(base.rstrip("/")).name) or f"item{n}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]


def load_resources(path: str | Path) -> ResourceSpec:
    """Parse and validate a resources file; any problem is a ConfigError naming the entry (exit 2)."""
    p = Path(path)
    text = read_user_text(p, f"--resources {p}")
    data = load_json(text, str(p)) if p.suffix == ".json" else load_yaml(text, str(p))
    raw = data.get("resources") if isinstance(data, dict) else data
    if isinstance(data, dict) and set(data) - {"resources"}:
        raise ConfigError(
            f"{p}: unknown top-level keys {sorted(set(data) - {'resources'})}; expected 'resources'"
        )
    if not isinstance(raw, list):
        raise ConfigError(f"{p}: expected a list of resources under 'resources:'")
    entries, seen = [], set()
    for n, item in enumerate(raw):
        where = f"{p}: resources[{n}]" + (
            f" (id {item.get('id')!r})" if isinstance(item, dict) and item.get("id") else ""
        )
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: must be a mapping, got {type(item).__name__}")
        try:
            entry = ResourceEntry.model_validate(item)
        except ValidationError as exc:
            msgs = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{where}: {msgs}") from None
        entry.id = entry.id or _default_id(entry, n)
        if entry.id in seen:
            raise ConfigError(f"{where}: duplicate id {entry.id!r}")
        seen.add(entry.id)
        if entry.path:
            src = Path(entry.path).expanduser()
            src = src if src.is_absolute() else (p.parent / src)
            if not src.exists():
                raise ConfigError(f"{where}: path {str(src)!r} does not exist")
            entry.path = str(src.resolve())
        if entry.type == "git" and entry.url is not None and _is_local(entry.url):
            local = Path(entry.url.removeprefix("file://"))
            local = local if local.is_absolute() else p.parent / local
            if not local.exists():
                raise ConfigError(f"{where}: git url {entry.url!r} points to a missing local path")
        entries.append(entry)
    return ResourceSpec(entries=entries, source=p.resolve())


def _is_local(url: str | None) -> bool:
    if not url:
        return False
    return url.startswith("file://") or "://" not in url and not re.match(r"^[\w.-]+@", url)


# ------------------------------------------------------------------ staging --


def _digest(root: Path) -> tuple[str, int, int]:
    """sha256 over (relative path, file sha256) of every regular file, sorted; (hex, files, bytes)."""
    top = hashlib.sha256()
    files = total = 0
    paths = (
        [root]
        if root.is_file()
        else sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    )
    for f in paths:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                total += len(chunk)
        rel = f.name if f == root else f.relative_to(root).as_posix()
        top.update(f"{rel}\0{h.hexdigest()}\n".encode())
        files += 1
    return top.hexdigest(), files, total


def _read_only(root: Path) -> None:
    for base, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(base, name)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IMODE(os.stat(p).st_mode) & ~0o222)
        os.chmod(base, stat.S_IMODE(os.stat(base).st_mode) & ~0o222)


def _stage_local(e: ResourceEntry, dest: Path, item: ResourceItem) -> None:
    src = Path(e.required("path"))
    item.source = str(src)
    if e.mode == "bind":
        dest.symlink_to(src)
    elif src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    else:
        dest.mkdir()
        shutil.copy2(src, dest / src.name)
    item.status = "staged"


def _stage_git(e: ResourceEntry, dest: Path, item: ResourceItem) -> None:
    item.source, item.ref = e.url, e.ref
    env = {"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(dest.parent)}

    def run(*a: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *a], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)

    proc = run("clone", "--quiet", e.required("url"), str(dest))
    if proc.returncode == 0 and e.ref:
        proc = run("checkout", "--quiet", e.ref, cwd=dest)
    if proc.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        item.status, item.reason = "failed", f"git failed: {proc.stderr.strip()[:300]}"
        return
    item.commit = run("rev-parse", "HEAD", cwd=dest).stdout.strip()
    item.status = "staged"


def _stage_fetch(
    e: ResourceEntry, dest: Path, item: ResourceItem, executor: Executor | None, limits: Limits | None
) -> None:
    if e.path:
        _stage_local(e, dest, item)
        return
    if executor is None or limits is None or not limits.network:
        item.status, item.reason = "skipped", "fetch needs the network, which is off (exec.network=false)"
        return
    dest.mkdir()
    dest.chmod(0o755)
    result = executor.run(["bash", "-c", e.required("fetch")], workspace=dest, limits=limits)
    shutil.rmtree(dest / ".tmp", ignore_errors=True)
    if result.ok:
        item.status = "staged"
    else:
        item.status, item.reason = "failed", f"fetch failed: {result.summary()} {result.stderr[-300:]}"


def stage_resources(
    spec: ResourceSpec, run_dir: Path, executor: Executor | None = None, limits: Limits | None = None
) -> ResourceIndex:
    """Stage every entry into ``<run_dir>/resources/<id>``, digest it, and write ``index.json``.

    ``limits`` (an execution Limits) decides whether fetch commands may use the network.
    Failures are recorded on the item (status ``failed`` with the reason), never raised.
    """
    root = RunPaths(run_dir).resources
    root.mkdir(parents=True, exist_ok=True)
    items = []
    for e in spec.entries:
        item = ResourceItem(
            id=e.required("id"),
            type=e.type,
            status="described",
            summary=e.summary,
            klass=e.class_,
            tags=list(e.tags),
            mode=e.mode,
            writable=e.writable,
        )
        dest = root / item.id
        if dest.exists() or dest.is_symlink():
            if dest.is_symlink() or dest.is_file():
                dest.unlink()
            else:
                _writable_again(dest)
                shutil.rmtree(dest)
        if e.type == "local":
            _stage_local(e, dest, item)
        elif e.type == "git":
            _stage_git(e, dest, item)
        elif e.type in ("dataset", "model"):
            _stage_fetch(e, dest, item, executor, limits)
        if item.status == "staged":
            item.path = f"resources/{e.id}"
            item.sha256, item.files, item.bytes = _digest(dest.resolve())
            if not e.writable and e.mode == "copy":
                _read_only(dest)
        items.append(item)
    index = ResourceIndex(items=items, root=root)
    atomic_write_json(RunPaths(run_dir).resource_index, index.to_dict())
    return index


def _writable_again(root: Path) -> None:
    for base, _dirs, _files in os.walk(root):
        os.chmod(base, stat.S_IMODE(os.stat(base).st_mode) | 0o700)


def load_index(run_dir: Path) -> ResourceIndex | None:
    """The index a previous ``stage_resources`` wrote for this run, or None."""
    data = read_json(RunPaths(run_dir).resource_index)
    if not data:
        return None
    return ResourceIndex(items=[ResourceItem(**i) for i in data["items"]], root=Path(data["root"]))


# ---------------------------------------------------------------- rendering --

_WORD = re.compile(r"[a-z0-9]+")


def _relevance(item: ResourceItem, query: str) -> int:
    words = set(_WORD.findall(query.lower()))
    text = " ".join([item.id, item.summary, item.klass or "", item.type, *item.tags]).lower()
    return sum(1 for w in set(_WORD.findall(text)) if len(w) > 2 and w in words)


def render_resource_index(
    index: ResourceIndex | None, relevant_to: str = "", budget_chars: int = 4000, excerpts: int | None = None
) -> str:
    """The resource-index prompt layer: items most relevant to ``relevant_to`` first, within the budget.

    Items that do not fit are dropped least relevant first and counted in the text. When every
    item fits, the staged ones get a file tree and the ``excerpts`` (default
    :data:`~.resource_excerpts.EXCERPT_FILES`) most relevant text files their contents (see
    :mod:`.resource_excerpts`), dropped last first while the text is over ``budget_chars``; a
    single excerpt that is still too long keeps its head. Never longer than ``budget_chars``.
    """
    from ..base.templates import render
    from .resource_excerpts import EXCERPT_FILES, Excerpt, item_files, select_excerpts, tree_summary

    if index is None or not index.items:
        return ""
    ranked = sorted(index.items, key=lambda i: (-_relevance(i, relevant_to), index.items.index(i)))
    shown = list(ranked)
    while shown:
        text = render("resources/index.md.j2", items=shown, omitted=len(ranked) - len(shown))
        if len(text) <= budget_chars:
            break
        shown.pop()
    else:
        return render("resources/index.md.j2", items=[], omitted=len(ranked))[:budget_chars]
    if len(shown) < len(ranked):
        return text
    staged = [(i, item_files(Path(index.root) / i.id, i.id)) for i in ranked if i.status == "staged"]
    trees = {i.id: tree_summary(files) for i, files in staged}
    chosen = select_excerpts(staged, relevant_to, EXCERPT_FILES if excerpts is None else excerpts)

    def full(ex: list[Excerpt]) -> str:
        return render("resources/index.md.j2", items=shown, omitted=0, trees=trees, excerpts=ex)

    while chosen:
        candidate = full(chosen)
        if len(candidate) <= budget_chars:
            return candidate
        if len(chosen) > 1:
            chosen.pop()
            continue
        room = budget_chars - (len(candidate) - len(chosen[0].text)) - 1
        if room < 200:
            break
        chosen = [Excerpt(chosen[0].file, chosen[0].text[:room], False)]
    with_trees = full([])
    return with_trees if len(with_trees) <= budget_chars else text
