"""The HPC facts of both probes (NUMA layout, MPI, environment modules), the Slurm probe's cache
key, and the ``module load`` check, without a cluster (tests/test_env_probe_slurm.py has one)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ai_scientist.base.config import load_config
from ai_scientist.execution.environment import cpu_info, host_modules, render_environment
from ai_scientist.execution.hpc_facts import check_module_loads, module_loads, modules_env
from ai_scientist.execution.sandbox_probe import PROBE_SH, TOOLS, parse_probe, sandbox_key

FAKE_MODULES = Path(__file__).parent / "fixtures" / "fake_modules"
OPEN_MPI = "mpirun (Open MPI) 4.1.4 Report bugs to http://www.open-mpi.org/community/help/"
HYDRA = "HYDRA build details:     Version:                                 4.0.2     Release Date: 2022"
AVAIL = [
    "/apps/modulefiles/Core:",
    "gcc/12.2.0",
    "gcc/13.1.0(default)",
    "openmpi/4.1.5",
    "cuda/12.2<aL>",
    "/apps/modulefiles/Other:",
    "hdf5/1.14.0",
]


def _probe_output(mpirun: str, modules: list[str] | None, init: str = "/etc/profile.d/lmod.sh") -> str:
    lines = [
        "cwd\t/workspace",
        "tool\tgcc\t/usr/bin/gcc\tgcc (Debian 12.2.0-14) 12.2.0",
        f"tool\tmpirun\t/usr/bin/mpirun\t{mpirun}",
        "tool\tmpicc\t/usr/bin/mpicc\tgcc (Debian 12.2.0-14) 12.2.0",
        "tool\tsrun\t/usr/bin/srun\tslurm 22.05.8",
        "node\tcn042\t5.14.0-362.el9.x86_64\tx86_64",
        "ncpu\t64",
        "memtotal\t263921664",
        "numa\t0\t0-31",
        "numa\t1\t32-63",
        "gpuinfo\tNVIDIA A100-SXM4-40GB, 40960, 535.104.05",
        "slurm_partition\tgpu",
    ]
    if modules is not None:
        lines += [f"modules_init\t{init}", "modules_system\tModules based on Lua: Version 8.7.32"]
        lines += [f"module\t{m}" for m in modules]
    return "\n".join(lines) + "\n"


def test_the_probe_reads_numa_mpi_gpus_and_modules():
    facts = parse_probe(_probe_output(OPEN_MPI, AVAIL))
    assert facts["numa"] == [
        {"node": 0, "cpus": "0-31", "count": 32},
        {"node": 1, "cpus": "32-63", "count": 32},
    ]
    assert facts["mpi"] == {
        "implementation": "Open MPI 4.1.4",
        "launchers": ["mpirun", "srun"],
        "wrappers": ["mpicc"],
    }
    assert facts["gpus"] == [{"name": "NVIDIA A100-SXM4-40GB", "memory_mb": 40960, "driver": "535.104.05"}]
    assert facts["node"] == {"hostname": "cn042", "kernel": "5.14.0-362.el9.x86_64", "arch": "x86_64"}
    assert (facts["cpu_count"], facts["memory_mb"], facts["slurm_partition"]) == (64, 257736, "gpu")
    mods = facts["modules"]
    # directory headers and markers ((default), <aL>) are not module names
    assert mods["available"] == ["cuda/12.2", "gcc/12.2.0", "gcc/13.1.0", "hdf5/1.14.0", "openmpi/4.1.5"]
    assert mods["init"] == "/etc/profile.d/lmod.sh" and mods["system"].startswith("Modules based on Lua")
    assert parse_probe(_probe_output(HYDRA, None))["mpi"]["implementation"] == "MPICH 4.0.2"
    assert "modules" not in parse_probe(_probe_output(HYDRA, None))


def test_the_module_list_is_bounded():
    from ai_scientist.execution.hpc_facts import MAX_MODULES

    many = [f"pkg{i:05d}/1.0" for i in range(MAX_MODULES + 500)]
    mods = parse_probe(_probe_output(OPEN_MPI, many))["modules"]
    assert len(mods["available"]) == MAX_MODULES and mods["truncated"]
    assert f"head -n {MAX_MODULES}" in PROBE_SH  # the script cuts before the parser


def _env(modules: list[str] | None, backend: str = "slurm") -> dict:
    sandbox = {
        **parse_probe(_probe_output(OPEN_MPI, modules)),
        "ok": True,
        "backend": backend,
        "partition": "gpu",
    }
    return {"sandbox": sandbox}


def _answer(build: list[str], run: list[str] | None = None) -> dict:
    return {
        "build": {"language": "c", "compiler": "gcc", "commands": build},
        "run": {"commands": run or ["./p"]},
    }


def test_module_load_lines_are_checked_against_the_probe():
    env = _env(AVAIL)
    check_module_loads(_answer(["module load gcc/13.1.0 openmpi && mpicc -O2 -o p p.c"]), env)
    check_module_loads(_answer(["ml gcc/12.2.0; gcc -o p p.c"], ["module load hdf5 && ./p"]), env)
    with pytest.raises(ValueError) as bad_version:
        check_module_loads(_answer(["module load gcc/99 && gcc -o p p.c"]), env)
    assert str(bad_version.value) == (
        "build.commands[0]: module 'gcc/99' is not available on the compute node (partition gpu); "
        "versions of gcc there: gcc/12.2.0, gcc/13.1.0. Load one of those, or none"
    )
    with pytest.raises(
        ValueError, match=r"^run.commands\[0\]: module 'intel' is not available .* modules there: cuda/12.2"
    ):
        check_module_loads(_answer(["gcc -o p p.c"], ["module load intel && ./p"]), env)
    with pytest.raises(ValueError, match="has no environment modules"):
        check_module_loads(_answer(["module load gcc && gcc -o p p.c"]), _env(None, backend="bwrap"))
    # a cut list proves nothing; an unprobed sandbox cannot be judged
    cut = _env(AVAIL)
    cut["sandbox"]["modules"]["truncated"] = True
    check_module_loads(_answer(["module load anything/1 && make"]), cut)
    check_module_loads(
        _answer(["module load anything/1 && make"]), {"sandbox": {"ok": False, "backend": "slurm"}}
    )
    assert module_loads("module purge; module load a/1 b && ml c/2 && ml avail && module -q load d") == [
        "a/1",
        "b",
        "c/2",
        "d",
    ]


def test_a_compiler_a_module_may_provide_is_not_refused():
    from ai_scientist.phases.schemas import validate_code

    answer = {"files": [{"path": "p.f90", "content": "end"}], **_answer(["ifx -O2 -o p p.f90"])}
    answer["build"].update(language="fortran", compiler="ifx")
    with pytest.raises(ValueError, match="'ifx' is not installed in the compute node \\(partition gpu\\)"):
        validate_code(answer, _env(AVAIL))
    answer["build"]["commands"] = ["module load gcc/13.1.0 && ifx -O2 -o p p.f90"]
    validate_code(answer, _env(AVAIL))


def test_commands_get_the_init_script_as_bash_env():
    assert modules_env(_env(AVAIL)) == {"BASH_ENV": "/etc/profile.d/lmod.sh"}
    assert modules_env(_env(None)) == {}
    function_only = _env(AVAIL)
    function_only["sandbox"]["modules"]["init"] = ""  # `module` came as a function of the environment
    assert modules_env(function_only) == {}


def test_the_slurm_probe_is_cached_per_partition_constraint_and_image():
    class Slurm:
        name = "slurm"

    def key(*overrides: str) -> str:
        return sandbox_key(Slurm(), load_config(None, ["exec.backend=slurm", *overrides]))  # type: ignore[arg-type]

    base = key("exec.slurm.partition=cpu")
    assert base == key("exec.slurm.partition=cpu")
    assert base != key("exec.slurm.partition=gpu")
    assert key('exec.slurm.extra_args=["--constraint=skylake"]') != key(
        'exec.slurm.extra_args=["-C", "icelake"]'
    )
    assert key('exec.slurm.extra_args=["-C", "icelake"]') == key(
        'exec.slurm.extra_args=["--constraint=icelake"]'
    )
    apptainer = ["exec.slurm.sandbox=apptainer"]
    assert key(*apptainer, "exec.apptainer_image=/s/a.sif") != key(
        *apptainer, "exec.apptainer_image=/s/b.sif"
    )


def test_the_compute_node_section_shows_its_numa_layout_gpus_and_modules():
    env = {
        "os": {"name": "Debian", "kernel": "6.1", "arch": "x86_64"},
        "cpu": {"model": "login CPU", "usable_cores": 8, "logical_cores": 8, "numa_nodes": 1},
        "memory": {"total_mb": 16000},
        "gpus": {"count": 0, "devices": []},
        "compilers": {"gcc": "gcc 12"},
    }
    probed = parse_probe(_probe_output(OPEN_MPI, AVAIL))
    env["sandbox"] = {
        **probed,
        "ok": True,
        "backend": "slurm",
        "partition": "gpu",
        "constraint": None,
        "gres": "gpu:1",
        "image": None,
        "interpreter": "/usr/bin/python3",
        "workspace": "$AI_SCIENTIST_WORKSPACE",
        "resources": None,
        "network": False,
        "limits": {"timeout_s": 600, "memory_mb": 4096, "cpus": 4, "pids": 256, "gpus": [], "slurm_cores": 4},
    }
    text = render_environment(env)
    assert "- Node: cn042, probed by a job on partition gpu and gres gpu:1" in text
    assert "64 NUMA" not in text and "2 NUMA nodes (node 0: CPUs 0-31; node 1: CPUs 32-63)" in text
    assert "- GPUs: NVIDIA A100-SXM4-40GB (40960 MB); driver 535.104.05" in text
    assert "- Memory: 257736 MB total" in text and "- Kernel: 5.14.0-362.el9.x86_64 (x86_64)" in text
    assert "- MPI there: Open MPI 4.1.4; launchers mpirun, srun; compiler wrappers mpicc" in text
    assert "gcc 12.2.0 13.1.0, hdf5 1.14.0, openmpi 4.1.5" in text
    assert "login CPU" not in text and "16000" not in text  # the orchestrator's own facts stay out


def test_the_host_probe_reads_numa_from_sys_and_finds_a_module_system(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for n, cpus in ((0, "0-3"), (1, "4-7")):
        (root / f"sys/devices/system/node/node{n}").mkdir(parents=True)
        (root / f"sys/devices/system/node/node{n}/cpulist").write_text(cpus + "\n")
    cpu = cpu_info(root)
    assert cpu["numa_nodes"] == 2 and [n["count"] for n in cpu["numa"]] == [4, 4]

    monkeypatch.setenv("MODULESHOME", str(FAKE_MODULES))
    found = host_modules()
    assert found is not None
    # what the fixture's own `module -t avail` prints, without its directory header
    listed = subprocess.run(
        ["bash", "-c", "module -t avail 2>&1"],
        env={"PATH": os.environ["PATH"], "BASH_ENV": str(FAKE_MODULES / "init" / "bash")},
        capture_output=True,
        text=True,
    ).stdout.split()
    assert found["available"] == sorted(m for m in listed if not m.endswith(":"))
    assert found["init"] == str(FAKE_MODULES / "init" / "bash")
    assert set(TOOLS) >= {"mpiexec", "srun"}


def test_the_probe_script_reads_mpich_and_skips_a_wrapper_with_no_compiler(tmp_path):
    # the shell script itself, on a PATH of fake tools: MPICH's version is on its third line, and
    # Open MPI's mpifort without gfortran prints a banner and compiles nothing
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {
        "mpirun": "printf 'HYDRA build details:\\n    Version:    4.0.2\\n    Release Date: x\\n'",
        "mpifort": "printf -- '-----\\nNo underlying compiler was specified in the wrapper compiler data file\\n'",
        "mpicc": "echo 'gcc (fake) 12.2.0'",
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "probe.sh").write_text(PROBE_SH)
    out = subprocess.run(
        ["/bin/sh", "probe.sh", "/nonexistent/python", *TOOLS],
        cwd=tmp_path,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    facts = parse_probe(out)
    assert "mpifort" not in facts["tools"] and facts["tools"]["mpicc"] == "gcc (fake) 12.2.0"
    assert facts["mpi"]["implementation"] == "MPICH 4.0.2"
    assert facts["mpi"]["launchers"][0] == "mpirun" and "mpicc" in facts["mpi"]["wrappers"]
