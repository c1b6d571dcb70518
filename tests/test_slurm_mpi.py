"""MPI experiments under the slurm backend (issue 35): a code answer may ask for ``run.ntasks``
ranks (bounded by ``exec.slurm.max_ntasks``); the job gets ``--ntasks=N`` on one node and each run
command is started by ``exec.slurm.mpi_launcher`` (``mpirun -n N``) inside the allocation and the
inner sandbox. The first test runs a two-task MPI hello world on the real local cluster (Debian's
openmpi-bin / libopenmpi-dev, scripts/setup.sh); the pipeline test drives a scripted run against the
fake controller (tests/slurm_fake.py, whose sbatch runs the batch script here) whose code answer
asks for two ranks.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import slurm_fake
from ai_scientist_testing.scripted import ExampleResponder
from components import needs, slurm_down
from pipeline_support import journal_nodes, prompt_records, start_run

from ai_scientist.base.config import load_config
from ai_scientist.execution.base import Limits
from ai_scientist.execution.slurm_backend import SlurmExecutor
from ai_scientist.phases.schemas import CODE_SCHEMA, with_ntasks

HELLO_C = r"""#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("hello from rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
"""
NO_MPI = (
    None
    if shutil.which("mpicc") and shutil.which("mpirun")
    else "no MPI: apt-get install openmpi-bin libopenmpi-dev"
)
DOWN = slurm_down() or NO_MPI


def _ranks(stdout: str) -> list[tuple[int, int]]:
    return sorted((int(r), int(n)) for r, n in re.findall(r"hello from rank (\d+) of (\d+)", stdout))


def _sent_ntasks(job_dir: str) -> int:
    """The --ntasks the job was submitted with (its batch script: what sbatch read)."""
    return int(re.search(r"^#SBATCH --ntasks=(\d+)$", (Path(job_dir) / "job.sh").read_text(), re.M).group(1))


@needs("slurm", DOWN is not None, DOWN or "")
def test_two_task_mpi_hello_world_on_the_cluster(tmp_path):
    ws = tmp_path / "exp" / "run1" / "nodes" / "n0001" / "workspace"
    ws.mkdir(parents=True)
    (ws / "hello.c").write_text(HELLO_C)
    cfg = load_config(None, ["exec.slurm.poll_interval_s=0.2", f"exec.slurm.shared_dir={tmp_path / 'shared'}",
                             "exec.slurm.max_ntasks=2"])  # fmt: skip
    ex = SlurmExecutor(cfg.exec)
    try:
        build = ex.run(["bash", "-c", "mpicc -o hello hello.c"], workspace=ws, limits=Limits(timeout_s=120))
        assert build.ok, build.summary() + build.stderr
        res = ex.run(["bash", "-c", "./hello"], workspace=ws, limits=Limits(timeout_s=120, ntasks=2))
    finally:
        ex.close()
    assert res.ok, res.summary() + res.stderr
    assert res.command == ["mpirun", "-n", "2", "bash", "-c", "./hello"]
    n = _sent_ntasks(res.extra["job_dir"])
    assert n == 2 and _ranks(res.stdout) == [(r, n) for r in range(n)], res.stdout


def test_ntasks_is_bounded_and_offered_only_when_allowed(tmp_path):
    assert with_ntasks(CODE_SCHEMA, 1) is CODE_SCHEMA  # not offered: the schema is unchanged
    offered = with_ntasks(CODE_SCHEMA, 4)["properties"]["run"]["properties"]["ntasks"]
    assert offered["maximum"] == 4 and offered["minimum"] == 1
    state, env = tmp_path / "state", slurm_fake.install(tmp_path / "bin", tmp_path / "state")
    from ai_scientist.execution.slurm_cli import SlurmCLI

    cfg = load_config(None, [f"exec.slurm.shared_dir={tmp_path / 'shared'}", "exec.slurm.max_ntasks=3"])
    ex = SlurmExecutor(cfg.exec, cli=SlurmCLI(env=env))
    assert ex.launch_argv(["bash", "-c", "./a"], 3) == ["mpirun", "-n", "3", "bash", "-c", "./a"]
    assert "--ntasks=3" in ex.sbatch_options("x", tmp_path, Limits(ntasks=3))
    with pytest.raises(ValueError, match="max_ntasks allows 1 to 3"):
        ex.launch_argv(["true"], 4)
    assert not slurm_fake.calls(state)  # nothing was submitted for a refused count


class MpiResponder(ExampleResponder):
    """The example experiment, plus an MPI hello world run on two ranks (rank 0 alone runs the
    Python experiment that writes metrics.json)."""

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        answer["files"].append({"path": "hello.c", "content": HELLO_C, "encoding": "utf-8"})
        answer["build"] = {"language": "c", "compiler": "mpicc", "commands": ["mpicc -o hello hello.c"]}
        answer["run"] = {
            "commands": [
                "./hello",
                'test "${OMPI_COMM_WORLD_RANK:-0}" != 0 || /usr/bin/python3 experiment.py',
            ],
            "expected_outputs": ["metrics.json"],
            "ntasks": 2,
        }
        return json.dumps(answer)


@needs("slurm", NO_MPI is not None, NO_MPI or "")
def test_a_code_answer_asks_for_two_ranks_in_a_scripted_run(tmp_path, monkeypatch):
    state = tmp_path / "slurmstate"
    env = slurm_fake.install(tmp_path / "bin", state)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    code, run_dir, _ = start_run(
        tmp_path, "exec.backend=slurm", "exec.slurm.poll_interval_s=0.05", "exec.slurm.max_ntasks=2",
        "agent.stages.stage1_max_iters=1", "agent.stages.stage2_max_iters=0", "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0", f"exec.slurm.shared_dir={tmp_path / 'shared'}",
        responder=MpiResponder(buggy_nodes=()),
    )  # fmt: skip
    nodes = journal_nodes(run_dir)
    assert nodes["n0001"]["status"] == "good", nodes["n0001"].get("error")
    records = [
        json.loads(p.read_text())
        for p in sorted((run_dir / "nodes" / "n0001" / "exec").glob("*_phase4_*.json"))
    ]
    hello = next(r for r in records if r["command"][-1] == "./hello")
    n = _sent_ntasks(hello["extra"]["job_dir"])
    assert hello["command"] == ["mpirun", "-n", str(n), "bash", "-c", "./hello"] and n == 2
    assert _ranks(hello["stdout"]) == [(r, n) for r in range(n)], hello["stdout"]
    # the builds ran as one task; the code prompt said how to ask (only because the backend is slurm)
    build = [
        json.loads(p.read_text()) for p in (run_dir / "nodes" / "n0001" / "exec").glob("*_phase3_*.json")
    ]
    assert build and all(_sent_ntasks(r["extra"]["job_dir"]) == 1 for r in build)
    (code_call,) = [r for r in prompt_records(run_dir) if r["phase"] == "phase2" and r["node_id"] == "n0001"]
    sent = "\n".join(str(m.get("content")) for m in code_call["messages"])
    assert '`"ntasks": N` in `run` (2 to 2)' in sent and "`mpirun -n N bash -c '<line>'`" in sent
    assert code_call["params"]["schema"]["properties"]["run"]["properties"]["ntasks"]["maximum"] == 2
    assert code == 0 or nodes["n0001"]["status"] == "good"
