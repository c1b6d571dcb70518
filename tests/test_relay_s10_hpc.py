"""Issue 28, relay run s9 mm (blocked matrix multiplication in C, a capable model answering each
request alone): the compiled-program findings — a C program's raw ``.jsonl`` records and text
tables left out of the plotting call's data files (023); a compile-time constant shared by every
condition and a value set in two places offered as one-line tunables (010, 011, 015).

One scripted run whose every node builds a small C kernel program with gcc (``#define NR`` used
by two kernels, tiles from ``argv[1]``, one record a line into ``res_mm.jsonl``, a text table)
beside the example's Python experiment, which fixes ``HEADLINE_TILE`` to the first tile the run
command passes. Each test derives its expectation from the run's own files (workspaces, code
answers), never from a constant of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import prompt_records, record_text, start_run

from ai_scientist.base.paths import RunPaths

MM_C = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define NR 4
#define SIZE 48

static void pack_b(int n, int t, const double *B, double *P) {
    for (int k = 0; k < t; k++)
        for (int j = 0; j < NR; j++) P[k * NR + j] = B[k * n + j];
}

static void kernel_packed(int n, int t, const double *A, const double *P, double *C) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < t; k++)
            for (int j = 0; j < NR; j++) C[i * n + j] += A[i * n + k] * P[k * NR + j];
}

int main(int argc, char **argv) {
    int tiles[16], nt = 0;
    for (char *s = strtok(argv[1], ","); s && nt < 16; s = strtok(NULL, ",")) tiles[nt++] = atoi(s);
    int n = SIZE;
    double *A = calloc(n * n, sizeof *A), *B = calloc(n * n, sizeof *B), *C = calloc(n * n, sizeof *C);
    double *P = calloc(n * NR, sizeof *P);
    FILE *jf = fopen(argc > 2 ? argv[2] : "res_mm.jsonl", "w"), *tf = fopen("timing.dat", "w");
    fprintf(tf, "# tile seconds\n");
    for (int i = 0; i < nt; i++) {
        int t = tiles[i] < n ? tiles[i] : n;
        clock_t c0 = clock();
        pack_b(n, t, B, P);
        kernel_packed(n, t, A, P, C);
        double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
        fprintf(jf, "{\"n\": %d, \"kernel\": \"packed\", \"tile\": %d, \"seconds\": %.6f}\n", n, tiles[i], sec);
        fprintf(tf, "%d %.6f\n", tiles[i], sec);
    }
    fclose(jf);
    fclose(tf);
    printf("%d tiles timed\n", nt);
    return 0;
}
"""
TILES = "8,4,16"  # the run command's argv[1]: its first tile is the headline's (HEADLINE_TILE)
EXTRA = """
import pathlib
HEADLINE_TILE = 8  # the tile the headline reads from res_mm.jsonl: the first of ./mm's argv[1]
rows = [json.loads(line) for line in open("res_mm.jsonl") if line.strip()]
print("headline tile", HEADLINE_TILE, [r["seconds"] for r in rows if r["tile"] == HEADLINE_TILE])
pathlib.Path("notes.txt").write_text("These are notes on the run, prose and not a table.\\nSecond line.\\n")
pathlib.Path(".cache").mkdir(exist_ok=True)
pathlib.Path(".cache/fonts.jsonl").write_text('{"font": "x"}\\n')
"""


class KernelResponder(ExampleResponder):
    """The example's answers, each working one with the C kernel program built and run first."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            if f["path"] == "experiment.py" and "HEADLINE_TILE" not in f["content"]:
                f["content"] = "import json\n" + f["content"] + EXTRA
        answer["files"].append({"path": "mm.c", "content": MM_C, "encoding": "utf-8"})
        # the binary named apart from its source, its output file an argument (as relay s9 mm's)
        answer["build"] = {"language": "c", "compiler": "gcc", "commands": ["gcc -O2 -o mm_fast mm.c"]}
        answer["run"]["commands"] = [f"./mm_fast {TILES} res_mm.jsonl", *answer["run"]["commands"]]
        return json.dumps(answer)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(
        tmp_path_factory.mktemp("s10_hpc"),
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=0",
        responder=KernelResponder(buggy_nodes=()),
    )
    assert code == 0
    return run_dir


def _data_listing(text: str) -> str:
    m = re.search(r"\d+ data files? in the working directory, by relative path:\n((?:- .*\n)+)", text)
    assert m, text[-4000:]
    return m.group(1)


def test_a_plotting_call_lists_a_jsonl_and_a_text_table_but_no_prose_or_cache(run):
    """relay s9 mm 023: the plotting call's data files left out the run's raw ``res_big_a.jsonl``
    (no ``.jsonl`` suffix was data). A ``.jsonl`` is outlined as its records (how many, each
    record's keys), a numeric text table is listed with its size and first line; a prose ``.txt``
    and any file under a hidden folder are not data."""
    checked = 0
    for rec in prompt_records(run):
        if rec.get("phase") != "phase5_plot":
            continue
        ws = RunPaths(run).node(rec["node_id"]).workspace
        if not (ws / "res_mm.jsonl").is_file():
            continue
        listing = _data_listing(record_text(rec))
        records = [
            json.loads(line) for line in (ws / "res_mm.jsonl").read_text().splitlines() if line.strip()
        ]
        jsonl = next(line for line in listing.splitlines() if line.startswith("- res_mm.jsonl "))
        assert f"({(ws / 'res_mm.jsonl').stat().st_size} bytes)" in jsonl, jsonl
        assert f"one JSON record a line, {len(records)} lines" in jsonl, jsonl
        assert all(f'"{k}"' in jsonl for k in records[0]), jsonl
        table = (ws / "timing.dat").read_text().splitlines()
        dat = next(line for line in listing.splitlines() if line.startswith("- timing.dat "))
        assert f"({(ws / 'timing.dat').stat().st_size} bytes)" in dat and table[0] in dat, dat
        assert f"{len(table)} lines" in dat, dat
        assert (ws / "notes.txt").is_file() and (ws / ".cache" / "fonts.jsonl").is_file()
        assert "notes.txt" not in listing and "fonts.jsonl" not in listing, listing
        checked += 1
    assert checked, "no plotting call of a node that wrote res_mm.jsonl"


def _parent_answer(run: Path, rec: dict) -> dict:
    return _parent(run, rec)[1]


def _parent(run: Path, rec: dict) -> tuple[str, dict]:
    """The node a proposal grows (named just before its parameter lines) and its code answer."""
    text = record_text(rec)
    ids = re.findall(r"\bn\d{4}\b", text[text.index("Parameters its code exposes") - 3000 :])
    for nid in dict.fromkeys(ids):
        path = RunPaths(run).node(nid).root / "code_answer.json"
        if path.is_file():
            return nid, json.loads(path.read_text())
    raise AssertionError("no parent code answer found")


def test_a_tunable_says_what_else_it_changes(run):
    """relay s9 mm 010, 011, 015: ``#define NR 16``, used by the packed kernel every packed
    condition runs, and ``HEADLINE_TILE``, set again as the first tile of mm.c's ``argv[4]``, were
    offered as one-line tunables. The parameter lines now name the functions a compile-time
    constant reaches, and both places of a value set twice."""
    tunes = [r for r in prompt_records(run) if r["phase"] == "ideas" and r["label"].startswith("tune")]
    assert tunes
    for rec in tunes:
        text = record_text(rec)
        lines = re.findall(r"^- .*$", text[text.index("Parameters its code exposes") :], re.M)
        answer = _parent_answer(run, rec)
        files = {f["path"]: f["content"] for f in answer["files"]}
        c = files["mm.c"]
        # the oracle: each function definition's body (up to the next unindented "}")
        bodies = re.findall(r"^\w[^\n]*?(\w+)\(([^)]*)\)\s*\{\n(.*?)^\}", c, re.M | re.S)
        for name, value in re.findall(r"^#define (\w+) (\S+)$", c, re.M):
            users = [f for f, params, body in bodies if re.search(rf"\b{name}\b", params + body)]
            line = next(ln for ln in lines if ln.startswith(f"- {name} = {value} [mm.c]"))
            if users and users != ["main"]:
                assert f"compile-time, used in {', '.join(users)}" in line, line
                assert "changes every condition" in line, line
            else:
                assert "compile-time" not in line, line
        # a value set in two places: the Python constant and the first of ./mm's argument
        tile = re.search(r"^HEADLINE_TILE = (\d+)", files["experiment.py"], re.M).group(1)
        mm = next(c.split() for c in answer["run"]["commands"] if c.startswith("./mm_fast "))
        k, arg = next((k, a) for k, a in enumerate(mm[1:], 1) if a.split(",")[0] == tile)
        head = next(ln for ln in lines if ln.startswith(f"- HEADLINE_TILE = {tile} "))
        assert (
            f"{tile} is set again as argv[{k}] of ./mm_fast (the first of {arg}): change both together"
            in head
        )
        argv = next(ln for ln in lines if ln.startswith(f"- argv[{k}] (command-line argument) [mm.c]"))
        assert f"its value {tile} is also HEADLINE_TILE in experiment.py" in argv, argv
        # an argument every run passes a file name is where the program writes, no setting
        files_at = [f"argv[{j}]" for j, a in enumerate(mm[1:], 1) if re.search(r"\.[A-Za-z]\w*$", a)]
        assert files_at and not any(
            ln.startswith(f"- {a} (command-line argument) [mm.c]") for a in files_at for ln in lines
        )
        # no other constant is said to be set twice unless its value is the same
        for ln in lines:
            if "is set again as" in ln and not ln.startswith("- HEADLINE_TILE"):
                assert re.match(rf"- \w+ = {tile} ", ln), ln


def test_a_research_proposal_gets_each_run_lines_time_and_the_limit(run):
    """relay s9 mm 020, 021: a stage-3 proposal added an out-of-L3 size (n=4096) with no word on
    what it costs — the per-command limit was only in the node prompts, and the parent's measured
    times nowhere. Each run line now carries the wall time it took in the parent's run
    (run.json), under the limit of the run's configuration."""
    import yaml

    research = [r for r in prompt_records(run) if r["phase"] == "ideas" and r["label"].startswith("research")]
    assert research
    limit = yaml.safe_load((run / "config.resolved.yaml").read_text())["exec"]["timeout"]
    for rec in research:
        text = record_text(rec)
        head = re.search(r"How it is built and run \((.*)\):\n((?:- .*\n)+)", text)
        assert head and f"of at most {int(limit)} s a command may run" in head.group(1), text[-3000:]
        nid, answer = _parent(run, rec)
        outputs = json.loads((RunPaths(run).node(nid).root / "run.json").read_text())["outputs"]
        took = {o["command"]: o["duration_s"] for o in outputs}
        for cmd in answer["run"]["commands"]:
            assert f"- run: {cmd} (took {took[cmd]:.3g} s)\n" in head.group(2), head.group(2)


class BenchmarkResponder(KernelResponder):
    """The kernel program's answers with the headline a benchmark's (a speed-up, not an accuracy)."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        for f in answer["files"]:
            f["content"] = f["content"].replace('"name": "val_accuracy"', '"name": "speedup_n1024"')
        return json.dumps(answer)


@pytest.fixture(scope="module")
def mm_run(tmp_path_factory) -> Path:
    """A stage-1-only scripted run of the blocked matrix multiplication idea (examples/)."""
    from pipeline_support import ScriptedBackend, execute, run_args, setup_run

    args = run_args(
        tmp_path_factory.mktemp("s10_mm"),
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
    )
    args.idea = str(Path(__file__).resolve().parents[1] / "examples" / "blocked_matmul" / "idea.md")
    run, resources = setup_run(args)
    execute(run, resources=resources, backend=ScriptedBackend(BenchmarkResponder(buggy_nodes=())))
    return run.dir


def _size(b: float) -> str:
    return f"{b / 2**20:.3g} MiB" if b >= 2**20 else f"{b / 2**10:.3g} KiB"


def test_the_machine_facts_set_the_ideas_matrix_sizes_against_the_caches(mm_run):
    """relay s9 mm 001: the idea's n=1024 (3 x 8 MiB = 24 MiB) fit the 320 MiB L3 while its
    hypothesis is about matrices too large for the last-level cache; the prompt gave the L3 and
    the sizes far apart. The environment now says, per size the idea names, the three double
    matrices' working set and the first data cache that holds it (or that none does)."""
    idea = (mm_run / "idea.md").read_text() if (mm_run / "idea.md").is_file() else ""
    idea = idea or json.loads((mm_run / "idea.json").read_text()).get("experiments", "")
    env = json.loads(RunPaths(mm_run).environment.read_text())
    caches = ((env.get("sandbox") or {}).get("cpu") or {}).get("caches") or (env.get("cpu") or {}).get(
        "caches"
    )
    if not caches:
        pytest.skip("this machine reports no caches")
    data = sorted((c["bytes"], name) for name, c in caches.items() if not name.endswith("i"))
    sizes = sorted(
        {int(x) for m in re.findall(r"\bn\s*=\s*([\d, and]+\d)", idea) for x in re.findall(r"\d+", m)}
    )
    assert sizes, idea
    records = prompt_records(mm_run)
    system = [
        m["content"]
        for r in records
        if r.get("phase") == "phase2"
        for m in r["messages"]
        if m["role"] == "system"
    ]
    # the calls judging a benchmark's results get the machine too (a review, a figure critique)
    judges = [record_text(r) for r in records if r.get("phase") in ("review", "phase5_vlm")]
    judged = [t for t in judges if "The machine the experiments ran on" in t]
    assert system and judged
    for text in [system[0], *judged]:
        _check_working_sets(text, sizes, data)


def _check_working_sets(text: str, sizes: list[int], data: list[tuple[int, str]]) -> None:
    line = next(ln for ln in text.splitlines() if ln.startswith("- Working sets of the idea's sizes"))
    for n in sizes:
        total = 3 * 8 * n * n
        holder = next((f"within {name} ({_size(b)})" for b, name in data if b >= total), "memory-bound")
        assert f"n={n}: {_size(8 * n * n)} a matrix, {_size(total)} for three — " in line, line
        part = line.split(f"n={n}: ")[1].split(";")[0]
        assert holder in part, (n, part)


def test_a_text_table_is_judged_and_outlined_from_a_bounded_read(tmp_path):
    """A C program's ``.dat`` may be binary (NUL bytes) or a table far larger than a prompt needs:
    whether it is a table is read from its first bytes, and its lines are counted only up to
    ``TABLE_COUNT_BYTES`` (the first line is always shown)."""
    from ai_scientist.base import nodedata
    from ai_scientist.phases.plots import data_files

    (tmp_path / "raw.dat").write_bytes(b"\x00\x01\x02\n" * 100)
    row = "1024 0.125 17.1\n"
    (tmp_path / "big.dat").write_text(
        "n seconds gflops\n" + row * (nodedata.TABLE_COUNT_BYTES // len(row) + 1)
    )
    (tmp_path / "small.txt").write_text("n seconds\n" + row * 3)
    listed = {f["file"]: f for f in data_files(tmp_path)}
    assert "raw.dat" not in listed, listed
    assert listed["big.dat"]["first_line"] == "n seconds gflops" and "lines" not in listed["big.dat"]
    assert listed["small.txt"]["lines"] == len((tmp_path / "small.txt").read_text().splitlines())
