"""What a compiled / HPC experiment needs to know about the machine and the sandbox (issue 28):
cache sizes, vector ISA and clock (read on the host, kept where the sandbox hides ``/sys``), how
build and run commands are executed and limited, and a package list without OS plumbing.

The probes are driven with their raw inputs (a fake ``/sys`` + ``/proc`` tree, a probe's output);
the statements about command execution are checked against what the pipeline really does; the
last test reads the prompt a scripted run really sent on this machine.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import start_run
from waiting import load_scaled

from ai_scientist.base.config import load_config
from ai_scientist.execution.cpu_facts import caches_from_getconf
from ai_scientist.execution.environment import cpu_info, probe_environment, render_environment
from ai_scientist.execution.sandbox_probe import parse_probe

ONE_NODE = (
    "agent.stages.stage1_max_iters=1",
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.search.num_drafts=1",
    "agent.multi_seed_eval.num_seeds=1",
    # the full environment block (the bundled idea is pure Python: it would get the compact one)
    "context.environment_detail=full",
)
FLAGS = "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx avx2 avx512f avx512dq avx512bw avx512vl hypervisor"
CPUINFO = f"""processor\t: 0
model name\t: Fake(R) Xeon(R) Gold 6000 CPU @ 2.10GHz
cpu MHz\t\t: 3000.000
flags\t\t: {FLAGS}

processor\t: 1
model name\t: Fake(R) Xeon(R) Gold 6000 CPU @ 2.10GHz
flags\t\t: fpu sse
"""
# index: (level, type, size, shared_cpu_list)
FAKE_CACHES = {
    0: ("1", "Data", "32K", "0-1"),
    1: ("1", "Instruction", "32K", "0-1"),
    2: ("2", "Unified", "1024K", "0-1"),
    3: ("3", "Unified", "36608K", "0-15"),
}


def _fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").write_text(CPUINFO)
    cpu0 = root / "sys/devices/system/cpu/cpu0"
    for i, (level, kind, size, shared) in FAKE_CACHES.items():
        d = cpu0 / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(value + "\n")
        (d / "coherency_line_size").write_text("64\n")
    (cpu0 / "cpufreq").mkdir(parents=True)
    (cpu0 / "cpufreq" / "cpuinfo_max_freq").write_text("3900000\n")
    return root


def _host_env(tmp_path: Path) -> dict:
    env = probe_environment(load_config(overrides=["exec.apptainer_binary=missing-x"]))
    env["cpu"] = cpu_info(_fake_root(tmp_path))
    return env


def _sandbox(**measured) -> dict:
    """The declared facts of a bwrap sandbox plus what its probe measured."""
    return {
        "key": "bwrap|None|/usr/bin/python3",
        "backend": "bwrap",
        "image": None,
        "interpreter": "/usr/bin/python3",
        "workspace": "/workspace",
        "resources": None,
        "network": False,
        "limits": {"timeout_s": 600.0, "memory_mb": 4096, "cpus": 1.0, "pids": 256, "gpus": []},
        "ok": True,
        **measured,
    }


def test_the_host_probe_reads_caches_isa_and_clock_from_a_fake_sys_tree(tmp_path):
    cpu = cpu_info(_fake_root(tmp_path))
    assert cpu["model"].startswith("Fake(R) Xeon")
    assert cpu["caches"] == {
        "L1d": {"bytes": 32 * 1024, "shared_by": 2, "line": 64},
        "L1i": {"bytes": 32 * 1024, "shared_by": 2, "line": 64},
        "L2": {"bytes": 1024 * 1024, "shared_by": 2, "line": 64},
        "L3": {"bytes": 36608 * 1024, "shared_by": 16, "line": 64},
    }
    assert cpu["caches_source"] == "sys"
    # a short list (no fpu, sse, hypervisor...), the widest vector, the base clock of the model name
    assert cpu["simd"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"]
    assert cpu["vector_bits"] == 512
    assert cpu["clock"] == {"mhz": 2100, "kind": "base"}


def test_getconf_stands_in_for_a_hidden_sys():
    text = "LEVEL1_ICACHE_SIZE                 32768\nLEVEL1_DCACHE_SIZE   49152\nLEVEL1_DCACHE_LINESIZE 64\n"
    text += "LEVEL2_CACHE_SIZE 2097152\nLEVEL3_CACHE_SIZE 0\nLEVEL4_CACHE_SIZE\n"
    assert caches_from_getconf(text) == {
        "L1d": {"bytes": 49152, "shared_by": None, "line": 64},
        "L1i": {"bytes": 32768, "shared_by": None, "line": None},
        "L2": {"bytes": 2097152, "shared_by": None, "line": None},
    }


def test_host_facts_fill_in_where_the_sandbox_hides_them_and_say_whose_they_are(tmp_path):
    env = _host_env(tmp_path)
    # a sandbox whose probe saw neither /sys nor /proc/cpuinfo nor getconf: the host's facts, labelled
    env["sandbox"] = _sandbox(**parse_probe("os\tDebian"))
    text = render_environment(env)
    caches = next(line for line in text.splitlines() if line.startswith("- Caches:"))
    assert "L1d 32 KiB shared by 2 CPUs" in caches and "L2 1 MiB" in caches and "L3 35.8 MiB" in caches
    assert "64-byte lines" in caches and "this machine's, read outside the sandbox" in caches
    vectors = next(line for line in text.splitlines() if line.startswith("- Vector instructions:"))
    assert "avx512f" in vectors and "512-bit vectors (8 doubles, 16 floats)" in vectors
    assert "peak 33.6 GFLOP/s double per core and FMA unit" in vectors  # 2.1 GHz x 8 doubles x 2
    # both bounds said: a relay run's judge could not tell whether a 36 GFLOP/s point was possible
    assert "33.6 with one unit, 67.2 with two" in vectors and "a rate above 33.6 means two" in vectors
    assert "this machine's" in vectors and "2100 MHz (base clock)" in text

    # the sandbox's own facts win where it has them: getconf's caches, its /proc/cpuinfo flags
    inside = parse_probe(
        "\n".join(
            [
                "cpuinfo\tmodel name\t: Inside CPU",
                "cpuinfo\tflags\t\t: sse4_2 avx avx2 fma",
                "getconf\tLEVEL1_DCACHE_SIZE                 49152",
                "getconf\tLEVEL2_CACHE_SIZE                  2097152",
            ]
        )
    )
    env["sandbox"] = _sandbox(**inside)
    text = render_environment(env)
    caches = next(line for line in text.splitlines() if line.startswith("- Caches:"))
    assert caches == "- Caches: L1d 48 KiB, L2 2 MiB"
    vectors = next(line for line in text.splitlines() if line.startswith("- Vector instructions:"))
    assert vectors.startswith("- Vector instructions: sse4_2, avx, avx2, fma; 256-bit vectors (4 doubles")
    assert "this machine's" not in vectors
    assert "CPU: Inside CPU" in text and "2100 MHz (base clock)" in text  # the clock: the host's


def test_os_plumbing_is_neither_in_the_package_list_nor_in_the_dependency_enum(tmp_path):
    from ai_scientist.phases.schemas import probed_packages

    installed = {
        "numpy": "1.24.2",
        "pyyaml": "6.0",
        "dbus-python": "1.3.2",
        "python-apt": "2.6.0",
        "pygobject": "3.42.2",
        "lazr.restfulclient": "0.14.5",
        "pip": "23.0.1",
    }
    raw = {"version": "3.11.2", "executable": "/usr/bin/python3", "package_count": 7, "packages": installed}
    facts = parse_probe("python\t" + json.dumps(raw))
    py = facts["python"]
    assert py["packages"] == {"numpy": "1.24.2", "pyyaml": "6.0"}
    assert py["os_packages"] == ["dbus-python", "lazr.restfulclient", "pip", "pygobject", "python-apt"]
    assert py["package_count"] == 2
    env = _host_env(tmp_path)
    env["sandbox"] = _sandbox(**facts)
    assert probed_packages(env) == ["numpy", "pyyaml"]  # the enum a plan's pip list is chosen from
    text = render_environment(env)
    line = next(line for line in text.splitlines() if line.startswith("- Python there:"))
    assert line.endswith("numpy 1.24.2; 2 packages installed: pyyaml")
    # a list the probe cut stays marked as cut (the enum then refuses to constrain to it)
    cut = parse_probe("python\t" + json.dumps({**raw, "package_count": 900}))["python"]
    assert cut["package_count"] == 895 > len(cut["packages"])


def test_commands_run_as_the_layer_says(tmp_path):
    """`bash -c` in the working directory, a new process each, the timeout per command."""
    from ai_scientist.execution import make_executor
    from ai_scientist.phases.execution import run_command

    tmp_path.chmod(0o755)
    # two commands of 0.6 x the timeout each: together over it, each under it. Scaled with the
    # load, so a busy machine's slower process starts still fit in the 0.4 x left to each
    k = load_scaled(1.0)
    cfg = load_config(overrides=["exec.backend=subprocess", f"exec.timeout={2.5 * k:.2f}"])
    workspace = tmp_path / "workspace"
    exec_dir = tmp_path / "exec"
    exec_dir.mkdir()
    ctx = SimpleNamespace(
        cfg=cfg,
        workspace=workspace,
        paths=SimpleNamespace(exec=exec_dir),
        executor=make_executor(cfg, "subprocess"),
        exec_env={},
        run=SimpleNamespace(redactor=SimpleNamespace(redact_obj=lambda o: o)),
    )
    first = run_command(
        ctx, f"mkdir -p sub && cd sub && sleep {1.5 * k:.2f} && echo a | tr a b > out", phase="t", label="a"
    )
    second = run_command(ctx, f"sleep {1.5 * k:.2f}; pwd", phase="t", label="b")
    assert first.ok and second.ok  # 3 s in all under a 2.5 s timeout (x k): the limit is per command
    assert first.command[:2] == ["bash", "-c"]
    assert (workspace / "sub" / "out").read_text() == "b\n"  # a pipe, in the working directory
    assert Path(second.stdout.strip()).name == "workspace"  # the cd did not carry over
    assert run_command(ctx, "sleep 60", phase="t", label="c").killed_by == "timeout"
    text = render_environment({**_host_env(tmp_path), "sandbox": _sandbox(**parse_probe(""))})
    assert (
        "each line by `bash -c` in a new process" in text and "a `cd` or `export` does not carry over" in text
    )
    assert "Limits, each command separately (no total per node): 600 s wall clock" in text


def test_the_prompt_sent_on_this_machine_states_its_caches_and_no_os_plumbing(tmp_path):
    getconf = subprocess.run(["getconf", "-a"], capture_output=True, text=True).stdout
    l1d = caches_from_getconf(getconf).get("L1d")
    if not l1d:
        pytest.skip("getconf reports no L1d cache size on this machine")
    tmp_path.chmod(0o755)
    code, run_dir, _ = start_run(tmp_path, *ONE_NODE, responder=ExampleResponder(buggy_nodes=()))
    assert code == 0
    env = json.loads((run_dir / "environment.json").read_text())
    logs = sorted((run_dir / "nodes" / "n0001" / "prompt_logs").glob("*.json"))
    record = json.loads(logs[0].read_text())
    sent = "\n".join(m["content"] for m in record["messages"] if isinstance(m.get("content"), str))
    assert f"L1d {l1d['bytes'] // 1024} KiB" in sent
    assert "Vector instructions:" in sent and "`bash -c`" in sent
    timeout = int(env["sandbox"]["limits"]["timeout_s"])
    assert f"each command separately (no total per node): {timeout} s wall clock" in sent
    # what the sandbox's python has but an experiment does not import is in neither copy of the
    # package list: the environment layer's and the dependency enum of the answer's schema
    listed = next(line for line in sent.splitlines() if line.startswith("- Python there:"))
    listed_names = {n.split()[0] for n in re.split(r"[:;,] ", listed) if n.strip()}
    deps = record["params"]["schema"]["properties"]["dependencies"]["properties"]
    enum = set(deps["pip"]["items"]["enum"])
    assert "numpy" in listed_names and "numpy" in enum
    for name in env["sandbox"]["python"].get("os_packages", []):
        assert name not in listed_names and name not in enum


def test_without_a_gpu_the_cuda_toolkit_is_not_offered(tmp_path):
    """A CPU-only sandbox listed "nvcc" and "cuda" beside "GPUs: none (do not use CUDA)": the
    capable model read it as a contradiction. Without a GPU they are left out; with one, listed."""
    tools = {"gcc": "gcc (Debian 12.2.0) 12.2.0", "nvcc": "Cuda compilation tools, release 13.0"}
    libs = {"notable": ["blas", "cuda", "openblas"], "count": 3}
    measured = {**parse_probe(""), "tools": tools, "libraries": libs}
    host = _host_env(tmp_path)
    cpu_only = render_environment({**host, "sandbox": _sandbox(**measured)})
    line = next(ln for ln in cpu_only.splitlines() if ln.startswith("- Compilers and build tools there"))
    libs_line = next(ln for ln in cpu_only.splitlines() if ln.startswith("- Native libraries there"))
    assert "gcc" in line and "nvcc" not in line and "cuda" not in libs_line and "openblas" in libs_line
    with_gpu = render_environment(
        {**host, "sandbox": {**_sandbox(**measured), "gpu_devices": ["0: NVIDIA A100"]}}
    )
    assert "nvcc" in with_gpu and "cuda, openblas" in with_gpu
