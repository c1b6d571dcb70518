"""Environment probe: what this machine offers, measured once per run, never an env dump.

``probe_environment(cfg)`` returns a JSON-able dict (the run saves it as
``environment.json`` and reuses it on resume): OS release, CPU (model, cores,
NUMA nodes, caches, vector extensions, clock: :mod:`.cpu_facts`), memory, GPUs via pynvml (``{"count": 0, "reason": ...}`` when
there are none), compilers and build tools with their versions, libraries
(pkg-config and ldconfig summaries), the sandbox Python with key packages,
real network reachability (a ~1 s TCP connect to an IP literal: no DNS), and
the sandbox backends with a live check. No environment variable is read into
it beyond what the tools themselves print. ``render_environment`` turns it
into the environment prompt layer through ``prompt/environment/``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from ..base.fileio import atomic_write_json, read_json
from ..base.paths import RunPaths
from .base import SYSTEM_PATH
from .cpu_facts import cpu_facts, last_level_cache, read_sys_cpu, working_sets
from .hpc_facts import MAX_MODULES, modules_view, mpi_summary, numa_layout, parse_modules
from .sandbox_probe import GPU_TOOLS, NOTABLE_LIBS, TOOLS, gpu_visible

if TYPE_CHECKING:
    from ..base.config import Config

COMPILERS = (
    "gcc",
    "g++",
    "clang",
    "gfortran",
    "nvcc",
    "mpicc",
    "mpicxx",
    "cmake",
    "make",
    "rustc",
    "go",
    "java",
)
KEY_PACKAGES = (
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "matplotlib",
    "torch",
    "torchvision",
    "jax",
    "tensorflow",
    "transformers",
    "datasets",
    "sympy",
    "numba",
    "mpi4py",
)
# An IP literal so the probe never depends on DNS; port 443 answers almost everywhere.
DEFAULT_NETWORK_TARGET = ("1.1.1.1", 443)

_PKG_SCRIPT = """
import json, sys
from importlib import metadata
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps({"version": sys.version.split()[0], "packages": out}))
"""


def _run(argv: list[str], timeout: float = 5.0) -> str | None:
    # Tools run with a minimal fixed environment: nothing from the host environment leaks in.
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout or proc.stderr).strip() if proc.returncode == 0 or proc.stdout else None


def os_info() -> dict[str, Any]:
    rel: dict[str, str] = {}
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            rel[key] = value.strip().strip('"')
    except OSError:
        pass
    return {
        "name": rel.get("PRETTY_NAME", platform.system()),
        "id": rel.get("ID"),
        "version_id": rel.get("VERSION_ID"),
        "kernel": platform.release(),
        "arch": platform.machine(),
    }


def cpu_info(root: Path = Path("/")) -> dict[str, Any]:
    """Model, cores, NUMA nodes, and the facts a performance experiment needs (caches, vector
    extensions, clock: :mod:`.cpu_facts`); ``root`` is ``/`` except in a test's fake tree."""
    raw = read_sys_cpu(root)
    getconf = ""
    if not raw["sys_caches"] and root == Path("/"):  # /sys hidden here: glibc reads cpuid
        getconf = _run(["getconf", "-a"]) or ""
    facts = cpu_facts(raw["cpuinfo"], raw["sys_caches"], getconf, raw["base_khz"], raw["max_khz"])
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"))
    layout = numa_layout([(d.name[4:], _read_text(d / "cpulist")) for d in nodes])
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        **facts,
        "model": facts.get("model") or platform.processor() or "unknown",
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": usable,
        "numa_nodes": len(nodes) or 1,
        "numa": layout,
    }


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


# where Lmod / Environment Modules put the script that defines the ``module`` shell function
MODULE_INITS = (
    "/etc/profile.d/lmod.sh",
    "/etc/profile.d/z00_lmod.sh",
    "/etc/profile.d/modules.sh",
    "/usr/share/lmod/lmod/init/bash",
    "/usr/share/modules/init/bash",
    "/usr/share/Modules/init/bash",
)


def host_modules() -> dict[str, Any] | None:
    """This machine's module system (init script, version, ``module -t avail``), or None. The
    orchestrator's ``$MODULESHOME`` / ``$LMOD_PKG`` only say where to look, like ``PATH``."""
    homes = [os.environ.get(v) for v in ("MODULESHOME", "LMOD_PKG")]
    candidates = [f"{h}/init/bash" for h in homes if h] + list(MODULE_INITS)
    init = next((c for c in candidates if os.access(c, os.R_OK)), None)
    bash = shutil.which("bash", path=SYSTEM_PATH)
    if not init or not bash:
        return None

    def module(*args: str, timeout: float) -> list[str]:
        try:
            proc = subprocess.run(
                [bash, "-c", 'module "$@" 2>&1', "module", *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "BASH_ENV": init},
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [line for line in proc.stdout.splitlines() if line.strip()]

    version = module("--version", timeout=5)
    return parse_modules(
        init, version[0][:120] if version else "", module("-t", "avail", timeout=30)[:MAX_MODULES]
    )


def memory_info() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    return {
        "total_mb": vm.total // 2**20,
        "available_mb": vm.available // 2**20,
        "swap_mb": psutil.swap_memory().total // 2**20,
    }


def gpu_info() -> dict[str, Any]:
    """GPUs through NVML; ``count: 0`` with the reason when there are none."""
    try:
        import pynvml
    except ImportError:
        return {"count": 0, "devices": [], "reason": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses vary by failure (no driver, no library)
        return {"count": 0, "devices": [], "reason": f"no NVIDIA driver/GPU ({type(exc).__name__})"}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            devices.append(
                {"index": i, "name": _s(pynvml.nvmlDeviceGetName(h)), "memory_mb": mem.total // 2**20}
            )
        return {"count": len(devices), "devices": devices, "driver": _s(driver)}
    finally:
        pynvml.nvmlShutdown()


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def compilers() -> dict[str, str]:
    """Tool name -> first line of its version output, for the tools found on this process's PATH
    or the system PATH (PATH is only searched, never stored: ``ifx`` set up by a oneAPI
    ``setvars.sh`` counts, and the sandbox probe then shows whether the sandbox has it too)."""
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SYSTEM_PATH) if p)

    def one(name: str) -> tuple[str, str | None]:
        path = shutil.which(name, path=search)
        if not path:
            return name, None
        flag = "-version" if name == "java" else ("version" if name == "go" else "--version")
        out = _run([path, flag])
        return name, (out.splitlines()[0][:160] if out else "present (version unknown)")

    with ThreadPoolExecutor(max_workers=4) as pool:
        return {
            k: v for k, v in pool.map(one, COMPILERS + tuple(t for t in TOOLS if t not in COMPILERS)) if v
        }


def libraries() -> dict[str, Any]:
    pc = _run(["pkg-config", "--list-all"]) or ""
    pc_names = sorted(line.split()[0] for line in pc.splitlines() if line.strip())
    ld = _run(["ldconfig", "-p"]) or _run(["/sbin/ldconfig", "-p"]) or ""
    sonames = sorted({line.split()[0] for line in ld.splitlines()[1:] if line.strip()})
    notable = sorted({n for n in NOTABLE_LIBS for so in sonames if so.startswith(f"lib{n}")})
    return {
        "pkg_config_count": len(pc_names),
        "pkg_config": pc_names[:80],
        "ldconfig_count": len(sonames),
        "notable": notable,
    }


def python_info(python: str) -> dict[str, Any]:
    out = _run([python, "-c", _PKG_SCRIPT, *KEY_PACKAGES], timeout=20)
    try:
        data = json.loads(out.splitlines()[-1]) if out else None
    except (json.JSONDecodeError, IndexError):
        data = None
    if not data:
        return {"interpreter": python, "error": "could not run the sandbox interpreter"}
    return {"interpreter": python, **data}


def network_info(target: tuple[str, int] = DEFAULT_NETWORK_TARGET, timeout_s: float = 1.0) -> dict[str, Any]:
    """A real TCP connect (not a DNS lookup) to ``target``; reachable or the error."""
    host, port = target
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
        return {
            "reachable": True,
            "target": f"{host}:{port}",
            "latency_ms": round((time.monotonic() - start) * 1000, 1),
        }
    except OSError as exc:
        return {"reachable": False, "target": f"{host}:{port}", "error": type(exc).__name__}


def sandbox_info(cfg: Config) -> list[dict[str, Any]]:
    from .doctor import check_sandboxes

    return check_sandboxes(cfg)


def probe_environment(
    cfg: Config, *, run_dir: Path | None = None, network_target: tuple[str, int] = DEFAULT_NETWORK_TARGET
) -> dict[str, Any]:
    """The environment dict; with ``run_dir``, read from / saved to ``run_dir/environment.json``."""
    cache = RunPaths(run_dir).environment if run_dir else None
    if cache is not None:
        cached = read_json(cache)
        if cached:
            return cached
    env = {
        "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "os": os_info(),
        "cpu": cpu_info(),
        "memory": memory_info(),
        "gpus": gpu_info(),
        "compilers": (found := compilers()),
        "mpi": mpi_summary(found),
        "modules": host_modules(),
        "libraries": libraries(),
        "python": python_info(cfg.exec.python),
        "network": network_info(network_target),
        "sandbox_network": bool(cfg.exec.network),
        "sandboxes": sandbox_info(cfg),
        "limits": {
            "timeout_s": cfg.exec.timeout,
            "memory_mb": cfg.exec.memory_mb,
            "cpus": cfg.exec.cpus,
            "gpus": list(cfg.exec.gpus),
        },
    }
    if cache is not None:
        atomic_write_json(cache, env)
    return env


_VERSION = re.compile(r"\d+(?:\.\d+)+")


def short_version(line: str) -> str:
    """The version number in a tool's ``--version`` line (``gcc (Debian 12.2.0-14) 12.2.0`` ->
    ``12.2.0``); the line's start when it holds none."""
    m = _VERSION.search(line)
    return m.group(0) if m else line[:40]


def cpu_view(env: dict[str, Any]) -> dict[str, Any]:
    """The machine facts the sandbox layer shows: the sandbox probe's where it has them (the code
    runs there), this machine's where it has not (``/sys`` hidden, a probe that did not run), each
    CPU group with ``<key>_from``: ``"sandbox"`` or ``"host"``. Under Slurm with a probe that ran
    (a job on a compute node: ``compute_node`` true) cores, NUMA, memory, GPUs and kernel are the
    node's too; this machine is then only the orchestrator's."""
    host = env.get("cpu") or {}
    sandbox = env.get("sandbox") or {}
    inside = sandbox.get("cpu") or {}
    compute = sandbox.get("backend") == "slurm" and bool(sandbox.get("ok"))
    cores = (sandbox.get("python") or {}).get("usable_cores")
    numa = sandbox.get("numa") or ([] if compute else host.get("numa")) or []
    view: dict[str, Any] = {
        "compute_node": compute,
        # on a compute node nothing falls back to the orchestrator's CPU
        "model": inside.get("model") or ("unknown" if compute else host.get("model")),
        "usable_cores": cores or (sandbox.get("cpu_count") if compute else host.get("usable_cores")),
        "logical_cores": sandbox.get("cpu_count") if compute else host.get("logical_cores"),
        "numa_nodes": len(numa) or (1 if compute else host.get("numa_nodes") or 1),
        "numa": numa,
        **dict.fromkeys(("caches", "caches_from", "simd", "simd_from", "vector_bits", "clock", "clock_from")),
    }
    for key, follows in (("caches", ()), ("simd", ("vector_bits",)), ("clock", ())):
        for where, facts in (("sandbox", inside), ("host", host)):
            if facts.get(key):
                view[key], view[f"{key}_from"] = facts[key], where
                view.update({k: facts.get(k) for k in follows})
                break
    # a working set above it is memory-bound here (the machine facts say so: relay s6 mm)
    view["last_level_cache"] = last_level_cache(view["caches"])
    if compute:
        node = sandbox.get("node") or {}
        gpus = sandbox.get("gpus") or []
        view.update(
            memory_mb=sandbox.get("memory_mb"),
            gpus=gpus,
            gpu_driver=gpus[0].get("driver") if gpus else None,
            hostname=node.get("hostname"),
            kernel=node.get("kernel"),
            arch=node.get("arch"),
        )
    else:
        gpu_facts = env.get("gpus") or {}
        os_facts = env.get("os") or {}
        view.update(
            memory_mb=(env.get("memory") or {}).get("total_mb"),
            gpus=gpu_facts.get("devices") if gpu_facts.get("count") else [],
            gpu_driver=gpu_facts.get("driver"),
            kernel=os_facts.get("kernel"),
            arch=os_facts.get("arch"),
        )
    return view


def machine_text(env: dict[str, Any] | None, idea: str = "") -> str:
    """The machine a benchmark ran on, in a few lines (CPU, cores, clock, caches, vector width and
    peak rate): what a review or critique of its timings is judged against. "" when the run
    recorded no CPU. A relay run's judges called the whole environment block (sandbox, tools, 41
    Python packages) in every review and critique waste: only the machine bears on a result.
    ``idea``: the research idea's text (:func:`.cpu_facts.working_sets`)."""
    from ..base.templates import render

    if not isinstance(env, dict) or not env.get("cpu"):
        return ""
    cpu = cpu_view(env)
    # the idea's matrix sizes against the caches: a review judges an "out-of-cache" claim by it
    return render(
        "environment/machine.md.j2", cpu=cpu, working_sets=working_sets(idea, cpu["caches"])
    ).strip()


def render_environment(
    env: dict[str, Any], budget_chars: int | None = None, python_only: bool = False, idea: str = ""
) -> str:
    """The environment prompt layer; shortened (compact form, then cut) to ``budget_chars`` if given.
    ``python_only``: a pure-Python task (``context.kinds.needs_machine_details``), without build
    tools, MPI, modules, native libraries, caches and vector units. ``idea``: the research idea's
    text, whose matrix sizes are set against the caches (:func:`.cpu_facts.working_sets`).

    With the sandbox probe's facts (``env["sandbox"]``, see :mod:`.sandbox_probe`) the layer
    describes the sandbox first and the host only where the sandbox shares it; an environment
    recorded without them (older runs, replays of them) renders as it always did."""
    from ..base.templates import render

    name = "environment/sandbox.md.j2" if "sandbox" in env else "environment/environment.md.j2"
    # the toolchains that need a GPU where the code runs has none: present, not listed
    extra: dict[str, Any] = {"unusable": [] if gpu_visible(env) else sorted(GPU_TOOLS)}
    if "sandbox" in env:
        tools = env["sandbox"].get("tools") or {}
        versions = {k: short_version(v) for k, v in tools.items() if v and v != "present"}
        extra |= {
            "key_packages": KEY_PACKAGES,
            "cpu": (cpu := cpu_view(env)),
            "working_sets": working_sets(idea, cpu["caches"]),
            "versions": versions,
            "modules": modules_view(env["sandbox"].get("modules") if env["sandbox"].get("ok") else None),
        }
    text = render(name, env=env, compact=False, python_only=python_only, **extra)
    if budget_chars is None or len(text) <= budget_chars:
        return text
    text = render(name, env=env, compact=True, python_only=python_only, **extra)
    return text if len(text) <= budget_chars else text[: max(0, budget_chars - 20)] + "\n[... truncated]"
