"""The host paths of a run's ``mode: bind`` resources (:meth:`.resources.ResourceIndex.binds`),
read from the run's resource index with the standard library only: every sandbox backend asks for
them at each command, and a Slurm job's runner (one fresh interpreter per command) would otherwise
import pydantic with :mod:`.resources`, a tenth of a second or more of every job (issue 37)."""

from __future__ import annotations

from pathlib import Path

from ..base.fileio import read_json
from ..base.paths import RunPaths


def bind_sources(resources_dir: Path | None) -> list[Path]:
    """Host paths of ``mode: bind`` items; sandboxes mount each read-only at the same path so the
    ``resources/<id>`` symlink resolves inside them too."""
    if resources_dir is None:
        return []
    data = read_json(RunPaths(Path(resources_dir).parent).resource_index)
    items = data.get("items") if isinstance(data, dict) else None
    # the rule of ResourceIndex.binds: staged, mode bind, with a source
    return [
        Path(i["source"])
        for i in items or []
        if i.get("status") == "staged" and i.get("mode") == "bind" and i.get("source")
    ]
