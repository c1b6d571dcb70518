"""The CPU facts a performance experiment needs: caches, vector ISA, clock; parsed, never guessed.

An HPC idea asks for cache blocking, vector widths and a roofline; the model can only use what
the prompt states. Both probes read the same raw inputs and parse them here:

- caches from ``/sys/devices/system/cpu/cpu0/cache/index*/`` (level, type, size, the CPUs that
  share it) or, where ``/sys`` is hidden (bwrap, containers), from ``getconf -a``
  (``LEVEL1_DCACHE_SIZE``...; glibc answers from ``cpuid`` on x86, without ``/sys``);
- the ISA extensions that decide vector code (``SIMD_FLAGS``, not every ``/proc/cpuinfo`` flag)
  and the vector width they give;
- a clock: the base frequency (cpufreq ``base_frequency``, or ``@ 2.20GHz`` in the model
  name), else the maximum (``cpuinfo_max_freq``), else the current one (``cpu MHz``).

The functions take text and return JSON-able values, so a test feeds them a fake ``/sys`` tree
or probe output; :func:`read_sys_cpu` is the only one that touches files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# ISA extensions that change what vector code can do, in the order they are shown
SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",  # AArch64 NEON
    "asimddp",
    "i8mm",
    "bf16",
    "sve",
    "sve2",
    "sme",
)
CACHE_ROOT = "sys/devices/system/cpu/cpu0/cache"
CPUFREQ_ROOT = "sys/devices/system/cpu/cpu0/cpufreq"
_GETCONF = re.compile(r"^LEVEL([1-4])_(I|D)?CACHE_(SIZE|LINESIZE)\s+(\d+)\s*$")
_SIZE = re.compile(r"^(\d+)\s*([KMG]?)$")
_GHZ_IN_MODEL = re.compile(r"@\s*([0-9.]+)\s*GHz", re.I)


def _bytes(size: str) -> int | None:
    m = _SIZE.match(size.strip())
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def _cpu_count(cpu_list: str) -> int | None:
    """How many CPUs a kernel CPU list names (``0-3,8``), or None when it is not one."""
    total = 0
    for part in cpu_list.strip().split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        total += int(hi) - int(lo) + 1 if hi else 1
    return total or None


def _name(level: str, kind: str) -> str:
    return f"L{level}" + {"Data": "d", "Instruction": "i", "D": "d", "I": "i"}.get(kind, "")


def caches_from_sys(entries: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """``{"L1d": {"bytes", "shared_by"}, ...}`` from the files of each ``index*`` directory
    (``level``, ``type``, ``size``, ``shared_cpu_list``, ``coherency_line_size``)."""
    caches: dict[str, dict[str, Any]] = {}
    for e in entries:
        size = _bytes(e.get("size", ""))
        level = e.get("level", "").strip()
        if not size or not level.isdigit():
            continue
        caches[_name(level, e.get("type", "").strip())] = {
            "bytes": size,
            "shared_by": _cpu_count(e.get("shared_cpu_list", "")),
            "line": int(e["coherency_line_size"])
            if e.get("coherency_line_size", "").strip().isdigit()
            else None,
        }
    return dict(sorted(caches.items()))


def last_level_cache(caches: dict[str, dict[str, Any]] | None) -> dict[str, Any] | None:
    """The last-level cache of ``caches`` (:func:`caches_from_sys` form): the highest level's data
    or unified cache, ``{"name", "bytes", "shared_by"}``; None without one. A working set above its
    size is served from memory: a relay run's blocked matrix multiplication measured a 24 MiB
    matrix under a 260 MiB L3 and no prompt said the protocol never left the cache (relay s6)."""
    best: tuple[int, str] | None = None
    for name, c in (caches or {}).items():
        level = name[1:].rstrip("diu")
        if name.endswith("i") or not level.isdigit() or not c.get("bytes"):
            continue
        if best is None or int(level) > best[0]:
            best = (int(level), name)
    if best is None:
        return None
    c = (caches or {})[best[1]]
    return {"name": best[1], "bytes": int(c["bytes"]), "shared_by": c.get("shared_by")}


def caches_from_getconf(text: str) -> dict[str, dict[str, Any]]:
    """The same from ``getconf -a`` output (no sharing information there)."""
    sizes: dict[str, int] = {}
    lines: dict[str, int] = {}
    for row in text.splitlines():
        m = _GETCONF.match(row.strip())
        if m and int(m.group(4)) > 0:
            name = _name(m.group(1), m.group(2) or "")
            (sizes if m.group(3) == "SIZE" else lines)[name] = int(m.group(4))
    return {n: {"bytes": b, "shared_by": None, "line": lines.get(n)} for n, b in sorted(sizes.items())}


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's ``model name``, ``flags`` / ``Features`` and ``cpu MHz``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break  # the first processor's block ends here
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in ("model name", "flags", "Features", "cpu MHz") and key not in fields:
            fields[key] = value.strip()
    return fields


def simd(flags: str) -> list[str]:
    """The ``SIMD_FLAGS`` among a ``flags`` / ``Features`` line, in ``SIMD_FLAGS`` order."""
    present = set(flags.split())
    return [f for f in SIMD_FLAGS if f in present]


def vector_bits(extensions: list[str]) -> int | None:
    """The widest fixed vector register the extensions give (SVE's length is the hardware's)."""
    if "avx512f" in extensions:
        return 512
    if "avx" in extensions:
        return 256
    if "sse4_2" in extensions or "asimd" in extensions:
        return 128
    return None


def clock(model: str, cpu_mhz: str, base_khz: str = "", max_khz: str = "") -> dict[str, Any] | None:
    """``{"mhz", "kind"}``: base (cpufreq or the model name), else max, else the current clock."""
    if base_khz.strip().isdigit():
        return {"mhz": int(base_khz) // 1000, "kind": "base"}
    m = _GHZ_IN_MODEL.search(model)
    if m:
        return {"mhz": round(float(m.group(1)) * 1000), "kind": "base"}
    if max_khz.strip().isdigit():
        return {"mhz": int(max_khz) // 1000, "kind": "max"}
    try:
        mhz = round(float(cpu_mhz))
    except ValueError:
        return None
    return {"mhz": mhz, "kind": "current"} if mhz > 0 else None


def cpu_facts(
    cpuinfo: str,
    sys_caches: list[dict[str, str]] | None = None,
    getconf: str = "",
    base_khz: str = "",
    max_khz: str = "",
) -> dict[str, Any]:
    """Caches, vector extensions, vector width and clock from the raw inputs (any may be empty)."""
    info = cpuinfo_fields(cpuinfo)
    caches = caches_from_sys(sys_caches or [])
    source = "sys"
    if not caches:
        caches, source = caches_from_getconf(getconf), "getconf"
    extensions = simd(info.get("flags") or info.get("Features") or "")
    facts: dict[str, Any] = {
        "caches": caches,
        "caches_source": source if caches else None,
        "simd": extensions,
        "vector_bits": vector_bits(extensions),
        "clock": clock(info.get("model name", ""), info.get("cpu MHz", ""), base_khz, max_khz),
    }
    if info.get("model name"):
        facts["model"] = info["model name"][:100]  # a sandbox's /proc is the sandbox's text
    return facts


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def read_sys_cpu(root: Path = Path("/")) -> dict[str, Any]:
    """The raw inputs under ``root`` (``/`` on a real machine, a fake tree in a test):
    ``cpuinfo`` text, one dict per cache ``index*`` directory, cpufreq base and max (kHz)."""
    entries = []
    for d in sorted((root / CACHE_ROOT).glob("index[0-9]*")):
        names = ("level", "type", "size", "shared_cpu_list", "coherency_line_size")
        entries.append({n: _read(d / n) for n in names})
    return {
        "cpuinfo": _read(root / "proc" / "cpuinfo"),
        "sys_caches": entries,
        "base_khz": _read(root / CPUFREQ_ROOT / "base_frequency"),
        "max_khz": _read(root / CPUFREQ_ROOT / "cpuinfo_max_freq"),
    }


# the square matrix sizes an idea names ("matrices of n = 256, 512 and 1024", "at n=4096")
_MATRIX_SIZES = re.compile(r"\bn\s*=\s*(\d+(?:\s*(?:,|and|or)\s*\d+)*)", re.IGNORECASE)
MAX_WORKING_SETS = 6


def working_sets(idea: str, caches: dict[str, dict[str, Any]] | None) -> str:
    """The working set of each square matrix size the ``idea`` names (``n = 256, 512 and 1024``)
    against the data caches, one line: ``"n=1024: 8 MiB a matrix, 24 MiB for three — above L2
    (2 MiB), within L3 (320 MiB)"``; "" when the idea names no matrix sizes with an element
    type (double / float) or no cache is known. A matrix product (multiplication, GEMM) holds
    three matrices. Relay s9 mm 001: n=1024's 24 MiB fit a 320 MiB L3 while the hypothesis was
    about matrices too large for it, and no prompt put the two side by side."""
    text = idea.lower()
    element = 8 if re.search(r"\bdouble", text) else 4 if re.search(r"\b(?:float|single)", text) else 0
    levels = sorted(
        (
            (int(n[1:].rstrip("du")), n, int(c["bytes"]))
            for n, c in (caches or {}).items()
            if not n.endswith("i") and n[1:].rstrip("du").isdigit() and c.get("bytes")
        ),
    )
    if not element or "matri" not in text or not levels:
        return ""
    sizes = sorted({int(x) for m in _MATRIX_SIZES.finditer(idea) for x in re.findall(r"\d+", m.group(1))})
    sizes = [n for n in sizes if n >= 16][:MAX_WORKING_SETS]
    if not sizes:
        return ""
    count = 3 if re.search(r"multipl|product|gemm|matmul", text) else 1
    parts = []
    for n in sizes:
        one = element * n * n
        total = count * one
        inside = [f"{name} ({_mib(b)})" for _, name, b in levels if b >= total]
        above = [f"{name} ({_mib(b)})" for _, name, b in levels if b < total]
        where = f"above {above[-1]}" if above else ""
        where += (", " if above else "") + f"within {inside[0]}" if inside else ": memory-bound"
        amount = f"{_mib(one)} a matrix, {_mib(total)} for three" if count == 3 else f"{_mib(one)} a matrix"
        parts.append(f"n={n}: {amount} — {where}")
    kind = "double" if element == 8 else "float"
    return f"Working sets of the idea's sizes ({kind} n×n matrices): " + "; ".join(parts)


def _mib(b: float) -> str:
    if b >= 2**20:
        return f"{b / 2**20:.3g} MiB"
    return f"{b / 2**10:.3g} KiB"
