"""Reading files a user names on the command line (config, idea, resources), defensively.

Every such file is read in bounded time and memory: regular files only (a FIFO, a device such
as ``/dev/zero`` or a directory is refused before it is read), at most ``MAX_INPUT_BYTES``,
UTF-8. YAML is parsed with duplicate keys rejected (naming both lines), a bounded number of
aliases (no "billion laughs") and a nesting limit; JSON with the same nesting limit. Every
problem is a :class:`~ai_scientist.base.config.ConfigError` naming the file (CLI exit 2).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

MAX_INPUT_BYTES = 1 << 20  # 1 MiB: far above any real config, idea or resources file
MAX_ALIASES = 200
MAX_DEPTH = 100


def _error(message: str) -> ConfigError:
    return ConfigError(message)


def read_user_text(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES, kind: str = "file") -> str:
    """The text of the regular file ``path`` (``what`` names it in errors, e.g. ``--idea x.md``)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _error(f"{what}: {kind} not found") from None
    except IsADirectoryError:
        raise _error(f"{what}: is a directory, not a file") from None
    except OSError as exc:
        raise _error(f"{what}: cannot open ({exc.strerror})") from None
    try:
        st = os.fstat(fd)  # of what was opened, so a swapped path cannot slip through
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
            )
            raise _error(f"{what}: is {kind}; give a regular file")
        if st.st_size > max_bytes:
            raise _error(f"{what}: {st.st_size:,} bytes, more than the {max_bytes:,} allowed")
        data = b""
        while len(data) <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > max_bytes:
            raise _error(f"{what}: more than the {max_bytes:,} bytes allowed")
    except OSError as exc:
        raise _error(f"{what}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(f"{what}: cannot read {kind} (not UTF-8 text at byte {exc.start})") from None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, many aliases and deep nesting."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases (line {mark.line + 1})")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges; keys given beside it override on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            line = key_node.start_mark.line + 1
            if first is not None:
                raise yaml.YAMLError(f"duplicate key {key!r} at line {line} (first at line {first})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str) -> Any:
    """Parse user YAML strictly; errors name ``source`` and the line."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise _error(f"{source}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise _error(f"{source}: nested too deeply") from None


def load_json(text: str, source: str) -> Any:
    """Parse user JSON with a nesting limit; errors name ``source`` and the line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise _error(f"{source}: nested too deeply") from None
    if _depth(data) > MAX_DEPTH:
        raise _error(f"{source}: nested more than {MAX_DEPTH} levels deep")
    return data


def _depth(obj: Any) -> int:
    """Nesting depth, iteratively (a deep document must not overflow the stack here either)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        cur, d = stack.pop()
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            return d
        if isinstance(cur, dict):
            stack.extend((v, d + 1) for v in cur.values())
        elif isinstance(cur, list):
            stack.extend((v, d + 1) for v in cur)
    return deepest
