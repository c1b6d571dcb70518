"""What generated code really gets: a probe run *inside* the configured sandbox, once per run.

The host probe (:mod:`.environment`) describes the machine the orchestrator runs on; the code
of a node runs elsewhere: a bwrap namespace that sees only ``/usr`` and ``/etc`` of the host, a
Docker image with its own files, a Slurm compute node. ``probe_sandbox`` runs a small POSIX
shell script (and the sandbox's Python, when it has one) through the executor itself, under
tight limits (``PROBE_TIMEOUT_S``, ``PROBE_OUTPUT_BYTES``), and reports what is present *there*:
compilers and build tools with their versions, the notable shared libraries (BLAS, LAPACK,
FFTW, HDF5, MPI, CUDA, ...), the Python version and its installed packages, the OS release, which paths are writable, the mount table, the network interfaces, the CPU,
memory and process limits seen from inside, GPU devices. The sandbox facts that are known
without running anything come from the executor and the config: backend, image, workspace and
resources mount points, network on/off, the limits every command gets.

The probe's output is read as untrusted text (it is produced by a program running in the
sandbox): only known keys and known tool names are kept, every string is stripped of control
characters and cut to a bound, the number of lines read is capped, and the Python part is one
JSON object checked field by field. A probe that fails is a value (``ok: false`` with the
reason), never an exception: the run continues and the prompt says the facts are the host's.

``ensure_sandbox_facts`` caches the result in ``environment.json`` under ``sandbox``, keyed by
backend, image and interpreter: a resumed run with the same sandbox does not probe again.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import RESOURCES_ENV, SANDBOX_RESOURCES, SANDBOX_WORKSPACE, Limits, SandboxError
from .cpu_facts import cpu_facts
from .hpc_facts import MAX_MODULES, mpi_summary, numa_layout, parse_modules

if TYPE_CHECKING:
    from ..base.config import Config
    from .base import Executor

# Shared libraries worth naming in the environment block (found by ldconfig, host or sandbox).
NOTABLE_LIBS = (
    "openblas",
    "blas",
    "lapack",
    "mkl",
    "fftw",
    "hdf5",
    "netcdf",
    "mpi",
    "cuda",
    "cudnn",
    "nccl",
    "boost",
    "eigen",
    "gsl",
    "omp",
    "tbb",
    "zlib",
    "ssl",
)

# Build tools the probe looks for (first line of ``--version``); the build plan check rejects a
# compiler from this list that the sandbox lacks (a name outside it cannot be judged).
TOOLS = (
    "gcc",
    "g++",
    "cc",
    "c++",
    "clang",
    "clang++",
    "gfortran",
    "ifx",
    "ifort",
    "icx",
    "icpx",
    "icc",
    "nvcc",
    "nvfortran",
    "mpicc",
    "mpicxx",
    "mpifort",
    "mpif90",
    "mpirun",
    "mpiexec",
    "srun",
    "cmake",
    "make",
    "ninja",
    "rustc",
    "cargo",
    "go",
    "java",
    "git",
    "curl",
    "wget",
)
PROBE_TIMEOUT_S = 60.0
PROBE_OUTPUT_BYTES = 256 * 1024
MAX_LINES = 4000  # the module list alone may take MAX_MODULES lines
MAX_MOUNTS = 40
MAX_PACKAGES = 500
PROBE_DIR = "sandbox_probe"  # under the run directory; removed after the probe

PROBE_SH = r"""# ai-scientist sandbox probe: facts only, one per line, tab-separated
PY="$1"; shift
T=""; command -v timeout >/dev/null 2>&1 && T="timeout 5"
printf 'cwd\t%s\n' "$(pwd)"
printf 'uid\t%s\n' "$(id -u 2>/dev/null)"
printf 'resources_seen\t%s\n' "${AI_SCIENTIST_RESOURCES:-}"
printf 'os\t%s\n' "$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
for d in "$(pwd)" "${AI_SCIENTIST_RESOURCES:-}" /tmp /usr /etc /opt /; do
  [ -n "$d" ] || continue
  if [ ! -e "$d" ]; then a=absent; elif [ -w "$d" ]; then a=rw; else a=ro; fi
  printf 'path\t%s\t%s\n' "$d" "$a"
done
for t in "$@"; do
  p=$(command -v "$t" 2>/dev/null) || continue
  case "$p" in /*) ;; *) continue ;; esac
  case "$t" in java) f=-version ;; go) f=version ;; *) f=--version ;; esac
  if [ "$t" = nvcc ]; then v=$($T "$p" $f 2>&1 </dev/null | grep -i -m 1 release)
  elif [ "$t" = mpirun ] || [ "$t" = mpiexec ]; then  # MPICH's first line is "HYDRA build details:"
    v=$($T "$p" $f 2>&1 </dev/null | grep -v '^[[:space:]]*$' | head -n 3 | tr '\n\t' '  ')
  elif [ "$t" = srun ]; then  # no version without a reachable slurm.conf: then srun cannot launch either
    v=$($T "$p" $f 2>/dev/null </dev/null | head -n 1); [ -n "$v" ] || continue
  else v=$($T "$p" $f 2>&1 </dev/null | grep -m 1 '[[:alnum:]]'); fi  # past a banner of dashes
  case "$v" in "No underlying compiler"* | *"unable to find the specified compiler"*) continue ;; esac  # an MPI
  # wrapper with no compiler under it (Open MPI's mpifort without gfortran) compiles nothing
  printf 'tool\t%s\t%s\t%s\n' "$t" "$p" "$v"
done
printf 'ulimit_v\t%s\n' "$(ulimit -v 2>/dev/null)"
for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max; do
  [ -r "$f" ] && printf 'cgroup\t%s\t%s\n' "${f##*/}" "$(head -n 1 "$f")"
done
L=$(command -v ldconfig 2>/dev/null) || L=/sbin/ldconfig
if [ -x "$L" ]; then
  $T "$L" -p 2>/dev/null | sed -n 's/^[[:space:]]*\(lib[A-Za-z0-9_+-]*\)\.so.*/\1/p' | sort -u | head -n 600 | tr '\n' ' ' \
    | { printf 'libs\t'; cat; echo; }
fi
sed -n '1,/^$/p' /proc/cpuinfo 2>/dev/null | grep -E '^(model name|flags|Features|cpu MHz)[[:space:]]*:' \
  | while IFS= read -r l; do printf 'cpuinfo\t%s\n' "$l"; done
for d in /sys/devices/system/cpu/cpu0/cache/index[0-9]*; do
  [ -r "$d/size" ] || continue
  printf 'cache\t%s\t%s\t%s\t%s\t%s\n' "$(cat "$d/level")" "$(cat "$d/type")" "$(cat "$d/size")" \
    "$(cat "$d/shared_cpu_list" 2>/dev/null)" "$(cat "$d/coherency_line_size" 2>/dev/null)"
done
getconf -a 2>/dev/null | grep -E '^LEVEL[1-4]_[ID]?CACHE_(SIZE|LINESIZE)' | while IFS= read -r l; do printf 'getconf\t%s\n' "$l"; done
F=/sys/devices/system/cpu/cpu0/cpufreq
[ -r "$F/base_frequency" ] && printf 'cpufreq\tbase\t%s\n' "$(cat "$F/base_frequency")"
[ -r "$F/cpuinfo_max_freq" ] && printf 'cpufreq\tmax\t%s\n' "$(cat "$F/cpuinfo_max_freq")"
for n in /sys/class/net/*; do [ -e "$n" ] && printf 'net\t%s\n' "${n##*/}"; done
for g in /dev/nvidia[0-9]*; do [ -e "$g" ] && printf 'gpu\t%s\n' "$g"; done
if command -v nvidia-smi >/dev/null 2>&1; then
  $T nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits 2>/dev/null \
    | head -n 16 | while IFS= read -r l; do printf 'gpuinfo\t%s\n' "$l"; done
fi
[ -n "${SLURM_JOB_PARTITION:-}" ] && printf 'slurm_partition\t%s\n' "$SLURM_JOB_PARTITION"
printf 'node\t%s\t%s\t%s\n' "$(uname -n 2>/dev/null)" "$(uname -r 2>/dev/null)" "$(uname -m 2>/dev/null)"
printf 'ncpu\t%s\n' "$(getconf _NPROCESSORS_ONLN 2>/dev/null)"
sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB.*/memtotal\t\1/p' /proc/meminfo 2>/dev/null
N=0
for n in /sys/devices/system/node/node[0-9]*; do
  [ -r "$n/cpulist" ] && printf 'numa\t%s\t%s\n' "${n##*node}" "$(cat "$n/cpulist")" && N=1
done
[ "$N" = 0 ] && command -v lscpu >/dev/null 2>&1 && $T lscpu 2>/dev/null \
  | sed -n 's/^NUMA node\([0-9][0-9]*\) CPU(s):[[:space:]]*/numa\t\1\t/p'
# environment modules: the init script that defines `module` (what a build line gets as BASH_ENV)
MI=""
for f in "${MODULESHOME:+$MODULESHOME/init/bash}" "${LMOD_PKG:+$LMOD_PKG/init/bash}" /etc/profile.d/lmod.sh \
  /etc/profile.d/z00_lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash \
  /usr/share/modules/init/bash /usr/share/Modules/init/bash; do
  if [ -n "$f" ] && [ -r "$f" ]; then MI=$f; break; fi
done
B=$(command -v bash 2>/dev/null)
if [ -n "$B" ] && { [ -n "$MI" ] || [ "$("$B" -c 'type -t module' 2>/dev/null)" = function ]; }; then
  printf 'modules_init\t%s\n' "$MI"
  printf 'modules_system\t%s\n' "$(BASH_ENV="$MI" $T "$B" -c 'module --version' 2>&1 </dev/null \
    | grep -v '^[[:space:]]*$' | head -n 1)"
  BASH_ENV="$MI" timeout 30 "$B" -c 'module -t avail' 2>&1 </dev/null | head -n MAX_MODULES \
    | while IFS= read -r l; do printf 'module\t%s\n' "$l"; done
fi
head -n 300 /proc/self/mountinfo 2>/dev/null | while IFS= read -r l; do printf 'mount\t%s\n' "$l"; done
if command -v "$PY" >/dev/null 2>&1; then
  printf 'python\t'; timeout 30 "$PY" probe.py 2>&1 | head -n 1; echo
else
  printf 'python_missing\t%s\n' "$PY"
fi
""".replace("MAX_MODULES", str(MAX_MODULES))

PROBE_PY = r"""import json, os, sys
from importlib import metadata
pk = {}
for d in metadata.distributions():
    try:
        name, version = d.metadata["Name"], d.version
    except Exception:
        continue
    if name and name.lower() not in pk:
        pk[name.lower()] = version
try:
    cores = len(os.sched_getaffinity(0))
except Exception:
    cores = os.cpu_count()
print(json.dumps({"version": sys.version.split()[0], "executable": sys.executable,
                  "package_count": len(pk), "packages": dict(sorted(pk.items())[:MAX_PACKAGES]),
                  "usable_cores": cores}))
""".replace("MAX_PACKAGES", str(MAX_PACKAGES))

_CTRL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")
_HIDDEN_MOUNTS = ("/proc", "/sys", "/dev")
# Python distributions an OS image installs for its own tools, never for an experiment: they are
# kept out of the package list the prompt and the dependency enum show (``os_packages`` keeps
# their names). Matched after PEP 503 normalisation; a name starting with a prefix counts too.
OS_PACKAGES = frozenset(
    {
        # bindings to the OS's services and package manager
        "dbus-python",
        "python-apt",
        "pygobject",
        "systemd-python",
        "python-debian",
        "distro-info",
        "perf",  # the kernel's perf tool's bindings
        "cupshelpers",
        "ufw",
        "unattended-upgrades",
        "command-not-found",
        "cloud-init",
        "netplan",
        "sos",
        "ssh-import-id",
        "apport",
        "language-selector",
        "software-properties",
        "xkit",
        "launchpadlib",
        "wadllib",
        # installers: an experiment does not import them
        "pip",
        "setuptools",
        "wheel",
    }
)
OS_PACKAGE_PREFIXES = ("lazr-", "ubuntu-", "landscape-")


def is_os_package(name: str) -> bool:
    """Whether a distribution name is OS plumbing (``OS_PACKAGES``), not something to import."""
    norm = re.sub(r"[-_.]+", "-", name).lower()
    return norm in OS_PACKAGES or norm.startswith(OS_PACKAGE_PREFIXES)


def _clean(value: Any, limit: int = 160) -> str:
    """A probe string as safe prompt text: no control characters, at most ``limit`` characters."""
    return _CTRL.sub(" ", str(value)).strip()[:limit]


def _unescape_mount(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _mount(line: str) -> dict[str, str] | None:
    fields = line.split(" ")
    if "-" not in fields or len(fields) < 6:
        return None
    sep = fields.index("-")
    if sep + 1 >= len(fields):
        return None
    path = _clean(_unescape_mount(fields[4]), 200)
    if not path.startswith("/") or any(path == h or path.startswith(h + "/") for h in _HIDDEN_MOUNTS):
        return None
    access = "ro" if "ro" in fields[5].split(",") else "rw"
    return {"path": path, "access": access, "fs": _clean(fields[sep + 1], 30)}


def _python(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, ValueError):
        return {"error": f"the sandbox Python did not answer: {_clean(raw, 200) or 'no output'}"}
    if not isinstance(data, dict):
        return {"error": "the sandbox Python answered something else than a JSON object"}
    found = data.get("packages")
    packages: dict[Any, Any] = found if isinstance(found, dict) else {}
    clean = {
        k: _clean(v, 40)
        for k, v in list(packages.items())[:MAX_PACKAGES]
        if isinstance(k, str) and _NAME.match(k) and isinstance(v, str)
    }
    plumbing = sorted(k for k in clean if is_os_package(k))
    count = data.get("package_count")
    count = count if isinstance(count, int) and count >= len(clean) else len(clean)
    cores = data.get("usable_cores")
    return {
        "version": _clean(data.get("version", ""), 40),
        "executable": _clean(data.get("executable", ""), 200),
        # what an experiment may import; a count above the list's length means the list was cut
        "package_count": count - len(plumbing),
        "packages": {k: v for k, v in clean.items() if k not in plumbing},
        "os_packages": plumbing,
        "usable_cores": cores if isinstance(cores, int) and cores > 0 else None,
    }


def _libraries(line: str) -> dict[str, Any]:
    """The shared-library names ldconfig lists inside: their count and the notable ones present."""
    names = {n for n in line.split()[:1000] if _NAME.match(n) and n.startswith("lib")}
    notable = sorted({lib for lib in NOTABLE_LIBS for n in names if n.startswith(f"lib{lib}")})
    return {"count": len(names), "notable": notable}


def parse_probe(stdout: str) -> dict[str, Any]:
    """The facts in the probe's output (see the module docstring: untrusted text, bounded)."""
    facts: dict[str, Any] = {
        "paths": {},
        "tools": {},
        "tool_paths": {},
        "cgroup": {},
        "interfaces": [],
        "gpu_devices": [],
        "mounts": [],
    }
    cpu: dict[str, Any] = {"cpuinfo": [], "cache": [], "getconf": [], "base": "", "max": ""}
    numa: list[tuple[str, str]] = []
    gpus: list[dict[str, Any]] = []
    modules: dict[str, Any] = {"init": None, "system": "", "lines": []}
    for line in stdout.splitlines()[:MAX_LINES]:
        key, _, rest = line.partition("\t")
        parts = rest.split("\t")
        if key in ("cwd", "uid", "os", "ulimit_v", "resources_seen", "slurm_partition"):
            facts[key] = _clean(rest, 200)
        elif key == "path" and len(parts) == 2 and parts[1] in ("rw", "ro", "absent"):
            if len(facts["paths"]) < 20:
                facts["paths"][_clean(parts[0], 200)] = parts[1]
        elif key == "tool" and len(parts) >= 2 and parts[0] in TOOLS and parts[1].startswith("/"):
            facts["tools"][parts[0]] = _clean(parts[2] if len(parts) > 2 else "", 160) or "present"
            facts["tool_paths"][parts[0]] = _clean(parts[1], 200)
        elif key == "cgroup" and len(parts) == 2 and parts[0] in ("memory.max", "cpu.max", "pids.max"):
            facts["cgroup"][parts[0]] = _clean(parts[1], 60)
        elif key == "net" and _NAME.match(rest) and len(facts["interfaces"]) < 20:
            facts["interfaces"].append(rest)
        elif key == "gpu" and re.match(r"^/dev/nvidia[0-9]+$", rest) and len(facts["gpu_devices"]) < 32:
            facts["gpu_devices"].append(rest)
        elif key == "mount" and len(facts["mounts"]) < MAX_MOUNTS:
            m = _mount(rest)
            if m and m not in facts["mounts"]:
                facts["mounts"].append(m)
        elif key == "libs":
            facts["libraries"] = _libraries(rest)
        elif key == "python":
            facts["python"] = _python(rest)
        elif key == "python_missing":
            facts["python"] = {"error": f"no interpreter {_clean(rest, 200)!r} in the sandbox"}
        elif key in ("cpuinfo", "getconf") and len(cpu[key]) < 20:
            cpu[key].append(_clean(rest, 4000))  # a flags line is long
        elif key == "cache" and len(parts) == 5 and len(cpu["cache"]) < 10:
            names = ("level", "type", "size", "shared_cpu_list", "coherency_line_size")
            cpu["cache"].append(dict(zip(names, (_clean(p, 40) for p in parts), strict=True)))
        elif key == "cpufreq" and len(parts) == 2 and parts[0] in ("base", "max"):
            cpu[parts[0]] = _clean(parts[1], 20)
        elif key == "node" and len(parts) == 3:
            facts["node"] = dict(
                zip(("hostname", "kernel", "arch"), (_clean(p, 80) for p in parts), strict=True)
            )
        elif key == "ncpu" and rest.strip().isdigit():
            facts["cpu_count"] = int(rest)
        elif key == "memtotal" and rest.strip().isdigit():
            facts["memory_mb"] = int(rest) // 1024
        elif key == "numa" and len(parts) == 2 and len(numa) < 64:
            numa.append((parts[0], _clean(parts[1], 200)))
        elif key == "gpuinfo" and len(gpus) < 16:
            name, mem, driver = ([_clean(p, 80) for p in rest.split(",")] + ["", "", ""])[:3]
            gpus.append({"name": name, "memory_mb": int(mem) if mem.isdigit() else None, "driver": driver})
        elif key == "modules_init":
            modules["init"] = _clean(rest, 300)
        elif key == "modules_system":
            modules["system"] = _clean(rest, 120)
        elif key == "module" and len(modules["lines"]) < MAX_MODULES:
            modules["lines"].append(_clean(rest, 120))
    if cpu["cpuinfo"] or cpu["cache"] or cpu["getconf"]:
        found = cpu_facts(
            "\n".join(cpu["cpuinfo"]), cpu["cache"], "\n".join(cpu["getconf"]), cpu["base"], cpu["max"]
        )
        facts["cpu"] = {k: v for k, v in found.items() if v}  # only what the sandbox showed
    if numa:
        facts["numa"] = numa_layout(numa)
    if gpus:
        facts["gpus"] = gpus
    if modules["init"] is not None:
        facts["modules"] = parse_modules(modules["init"], modules["system"], modules["lines"])
    mpi = mpi_summary(facts["tools"])
    if mpi:
        facts["mpi"] = mpi
    return facts


def sandbox_key(executor: Executor, cfg: Config) -> str:
    """What identifies one sandbox: backend, image and interpreter (the cache key); under Slurm
    also the partition, constraint, GRES and inner sandbox, which decide the node a job gets."""
    parts: list[Any] = [executor.name, _image(executor, cfg), _python_of(executor, cfg)]
    if executor.name == "slurm":
        parts += list(slurm_target(cfg).values())
    return "|".join(str(x) for x in parts)


def slurm_target(cfg: Config) -> dict[str, str | None]:
    """Where a Slurm job of this run lands: partition, ``--constraint`` (from
    ``exec.slurm.extra_args``), GRES and the inner sandbox."""
    c = cfg.exec.slurm
    constraint = None
    args = list(c.extra_args)
    for i, a in enumerate(args):
        if a.startswith("--constraint="):
            constraint = a.split("=", 1)[1]
        elif a in ("-C", "--constraint") and i + 1 < len(args):
            constraint = args[i + 1]
        elif a.startswith("-C") and len(a) > 2:
            constraint = a[2:]
    return {"partition": c.partition, "constraint": constraint, "gres": c.gres, "inner_sandbox": c.sandbox}


def _image(executor: Executor, cfg: Config | None = None) -> str | None:
    image = getattr(executor, "image", None)
    if not image and cfg is not None and executor.name == "slurm" and cfg.exec.slurm.sandbox == "apptainer":
        image = cfg.exec.apptainer_image  # the image the job's inner sandbox runs
    return str(image) if image else None


def _python_of(executor: Executor, cfg: Config) -> str:
    return str(getattr(executor, "python", None) or cfg.exec.python)


def _declared(executor: Executor, cfg: Config) -> dict[str, Any]:
    """The sandbox facts known without running anything: backend, image, mount points, limits."""

    host_paths = bool(getattr(executor, "host_paths", False))
    if executor.name == "slurm":  # the job's inner sandbox decides: subprocess keeps host paths
        host_paths = cfg.exec.slurm.sandbox == "subprocess"
    resources = getattr(executor, "resources_dir", None)
    limits = Limits.from_config(cfg.exec)
    return {
        "key": sandbox_key(executor, cfg),
        "backend": executor.name,
        **(slurm_target(cfg) if executor.name == "slurm" else {}),
        "image": _image(executor, cfg),
        "interpreter": _python_of(executor, cfg),
        # subprocess: each node's own directory, named in the command's environment
        "workspace": "$AI_SCIENTIST_WORKSPACE" if host_paths else SANDBOX_WORKSPACE,
        "resources": (None if not resources else (str(resources) if host_paths else SANDBOX_RESOURCES)),
        "resources_env": RESOURCES_ENV,
        # a mount table of its own (bwrap, containers); subprocess shares the host's
        "own_mounts": not host_paths,
        "network": limits.network,
        "limits": {
            "timeout_s": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "cpus": limits.cpus,
            "pids": limits.pids,
            "gpus": list(limits.gpus),
            # RLIMIT_CPU of each process (subprocess, bwrap, apptainer, and inside a Slurm job)
            "cpu_seconds": limits.cpu_seconds,
            # cores Slurm allocates a command (sbatch --cpus-per-task)
            "slurm_cores": (cfg.exec.slurm.cpus or max(1, math.ceil(limits.cpus)))
            if executor.name == "slurm"
            else None,
            # MPI ranks a run may ask for, and how they start (slurm_backend.launch_argv)
            "max_ntasks": cfg.exec.slurm.max_ntasks if executor.name == "slurm" else 1,
            "mpi_launcher": " ".join(cfg.exec.slurm.mpi_launcher) if executor.name == "slurm" else None,
        },
    }


def probe_sandbox(executor: Executor, cfg: Config, workdir: Path) -> dict[str, Any]:
    """Run the probe in ``executor`` with ``workdir`` as its workspace (created, then removed).

    Returns the declared facts plus, when the probe ran, the measured ones (``ok: true``);
    otherwise ``ok: false`` and ``error`` says why. Never raises for a failing probe.
    """
    facts = _declared(executor, cfg)
    facts["probed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    workdir = Path(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    workdir.chmod(0o755)
    (workdir / "probe.sh").write_text(PROBE_SH)
    (workdir / "probe.py").write_text(PROBE_PY)
    limits = Limits(
        timeout_s=PROBE_TIMEOUT_S,
        memory_mb=int(cfg.exec.memory_mb),  # what the node's commands get (a JVM checks it at start)
        # under Slurm the cores decide --cpus-per-task: the probe job gets what an experiment's gets
        cpus=float(cfg.exec.cpus) if executor.name == "slurm" else 1.0,
        output_bytes=PROBE_OUTPUT_BYTES,
        network=bool(cfg.exec.network),
        gpus=tuple(int(g) for g in cfg.exec.gpus),
    )
    try:
        result = executor.run(
            ["/bin/sh", "probe.sh", facts["interpreter"], *TOOLS], workspace=workdir, limits=limits
        )
    except (SandboxError, OSError, ValueError) as exc:
        facts.update(ok=False, error=f"the probe could not run: {_clean(exc, 300)}")
        return facts
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if result.killed_by or (result.exit_code != 0 and not result.stdout):
        facts.update(ok=False, error=f"the probe failed: {_clean(result.summary(), 300)}")
        return facts
    facts.update(parse_probe(result.stdout))
    facts.update(ok=True, error=None, duration_s=round(result.duration_s, 2))
    return facts


def ensure_sandbox_facts(env: dict[str, Any], executor: Executor, cfg: Config, run_dir: Path) -> bool:
    """Put the sandbox facts into ``env["sandbox"]`` unless the cached ones have the same key.

    Returns True when it probed (the caller saves ``environment.json``)."""
    cached = env.get("sandbox")
    if isinstance(cached, dict) and cached.get("key") == sandbox_key(executor, cfg):
        return False
    workdir = Path(run_dir) / PROBE_DIR
    if executor.name == "slurm":
        # as the ``run`` pseudo-node's workspace: the job directory goes where the run's jobs go
        # (exec.slurm.shared_dir or <run>/slurm, storage the compute nodes see), not to /tmp
        from ..base.paths import WORKSPACE_DIR, RunPaths

        workdir = RunPaths(Path(run_dir)).node("run").root / WORKSPACE_DIR
    env["sandbox"] = probe_sandbox(executor, cfg, workdir)
    return True


# the CUDA toolchains build for a GPU: where the code runs without one they are no option, neither
# in the environment layer nor in a code answer's schema (a relay run's schema offered nvcc as a
# compiler and an apt dependency on a CPU-only machine: s7 mm2 001, 005)
GPU_TOOLS = frozenset({"nvcc", "nvfortran"})


def gpu_visible(environment: dict[str, Any] | None) -> bool:
    """Whether the code's sandbox has a GPU: devices the sandbox probe saw, GPUs configured for
    it (``exec.gpus``), or — recorded without a sandbox probe — the host's."""
    env = environment or {}
    sandbox = env.get("sandbox")
    if isinstance(sandbox, dict):
        return bool(
            sandbox.get("gpu_devices") or sandbox.get("gpus") or (sandbox.get("limits") or {}).get("gpus")
        )
    return bool((env.get("gpus") or {}).get("count"))


def available_tools(environment: dict[str, Any] | None) -> tuple[set[str], str] | None:
    """(tool names present where the code runs, where that is) from an environment dict, or None.

    The sandbox probe when it ran; None when the sandbox could not be probed (Slurm, a failed
    probe); the host's compilers for a run recorded before the sandbox probe, whether stored as
    a dict (name -> version, what the probe writes) or a list of ``{"name": ...}``."""
    if not environment:
        return None
    sandbox = environment.get("sandbox")
    if isinstance(sandbox, dict):
        if not sandbox.get("ok"):
            return None  # not probed there: the host's list would be a guess
        where = f"the {sandbox.get('backend')} sandbox"
        if sandbox.get("backend") == "slurm":
            where = f"the compute node (partition {sandbox.get('partition') or 'default'})"
        if sandbox.get("image"):
            where += f" (image {sandbox['image']})"
        return _usable(set(sandbox.get("tools") or {}), environment), where
    host = environment.get("compilers")
    if isinstance(host, dict):
        return _usable(set(host), environment), "this machine"
    if isinstance(host, list):
        names = {c.get("name") if isinstance(c, dict) else c for c in host}
        return _usable({n for n in names if isinstance(n, str)}, environment), "this machine"
    return None


def _usable(tools: set[str], environment: dict[str, Any]) -> set[str]:
    return tools if gpu_visible(environment) else tools - GPU_TOOLS


def installed_tools(node_dir: Path) -> set[str]:
    """Names of the build tools a node's install prefix adds (``nodes/<id>/env/bin``, phase 1)."""
    from ..base.paths import NodePaths

    try:
        return {p.name for p in (NodePaths(Path(node_dir)).env / "bin").iterdir() if p.name in TOOLS}
    except OSError:
        return set()
