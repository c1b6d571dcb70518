"""The run-directory layout has one owner, ``ai_scientist/base/paths.py``.

* a real (scripted) run with reporting writes no file the paths object does not name: every file at
  the run root and in each ``nodes/<id>/`` is one of its paths, and every file of a node's
  ``prompt_logs/`` and ``exec/`` is a numbered file (free-form folders such as ``workspace/`` belong
  to the code that writes them);
* the run-directory block of the README names exactly the files and folders the paths object has;
* outside ``base/paths.py`` no module joins a layout name onto a path by hand (``/ "nodes"``);
* numbered files: concurrent allocation (threads and processes) never gives one number twice;
  names of both older slug rules (and the recorded fixture run) are still read, in number order;
  the slug rule holds for any text (hypothesis).
"""

from __future__ import annotations

import ast
import multiprocessing
import re
import threading
from pathlib import Path

import pytest
from ai_scientist_testing.bench_support import recorded_run
from hypothesis import given
from hypothesis import strategies as st
from pipeline_support import ROOT, start_run

from ai_scientist.base.paths import (
    NODE_FILES,
    SLUG_MAX_CHARS,
    NodePaths,
    RunPaths,
    claim_numbered,
    file_number,
    node_of_workspace,
    numbered_files,
    numbered_name,
    slug,
)

FIXTURE = recorded_run()  # tests/fixtures/run_<commit>, scripts/record_fixture.sh


def _properties(cls: type, obj: object) -> dict[str, Path]:
    """Every path a paths class names (its properties), evaluated on ``obj``."""
    return {name: getattr(obj, name) for name, v in vars(cls).items() if isinstance(v, property)}


def _named(run: Path) -> tuple[set[Path], set[Path], set[Path]]:
    """(files named by the paths object, folders of numbered files, other folders it names)."""
    paths = RunPaths(run)
    named = {p for p in _properties(RunPaths, paths).values()}
    numbered = {paths.figures_exec}
    for nid in paths.node_ids():
        node = paths.node(nid)
        named |= {p for k, p in _properties(NodePaths, node).items() if k != "id"}
        named |= {node.file(name) for name in NODE_FILES}
        numbered |= {node.prompt_logs, node.exec}
    folders = {p for p in named if p.is_dir()}
    return named - folders, numbered, folders - numbered


def _unaccounted(run: Path) -> list[str]:
    """Files of ``run`` that are neither a path the paths object names, a numbered record (or the
    ``.md`` rendering of one) in a numbered folder, nor inside a free-form folder it names."""
    files, numbered, folders = _named(run)
    paths = RunPaths(run)
    structured = {paths.nodes} | {paths.node(n).root for n in paths.node_ids()}
    free = folders - structured
    bad = []
    for f in sorted(p for p in run.rglob("*") if not p.is_dir()):
        if f in files or f.with_name(re.sub(r"-(wal|shm|journal)$", "", f.name)) in files:
            continue  # a named file, or SQLite's own side file of one (memory.sqlite-wal)
        if f.parent in numbered:
            if file_number(f) is not None or (f.suffix == ".md" and file_number(f.with_suffix(".json"))):
                continue
        elif any(folder in f.parents for folder in free):
            continue  # inside a free-form folder the paths object names (workspace/, env/, paper/, ...)
        bad.append(str(f.relative_to(run)))
    return bad


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("paths")
    code, run_dir, _ = start_run(tmp, "report.enabled=true", "agent.num_workers=2")
    assert code == 0, code
    return run_dir


def test_every_file_a_run_writes_is_named_by_the_paths_object(reported_run: Path):
    assert _unaccounted(reported_run) == []
    paths = RunPaths(reported_run)
    # the check above is not vacuous: the run really wrote the layout's main files
    for p in (paths.config, paths.journal, paths.events, paths.state, paths.cost, paths.environment,
              paths.review, paths.tree_html, paths.figures_json):  # fmt: skip
        assert p.is_file(), p
    nodes = [paths.node(n) for n in paths.node_ids()]
    assert len(nodes) >= 5
    assert all(n.node_json.is_file() for n in nodes if n.id != "run")
    assert any(n.prompt_log_files() for n in nodes) and any(n.exec_files() for n in nodes)


def test_a_file_written_by_hand_is_caught(reported_run: Path, tmp_path: Path):
    # the same check on a copy that has a file nobody named: it is reported
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reported_run, copy, symlinks=True)
    node = RunPaths(copy).node(RunPaths(copy).node_ids()[0])
    (node.root / "notes.json").write_text("{}")
    (copy / "extra.txt").write_text("x")
    assert _unaccounted(copy) == sorted(["extra.txt", str((node.root / "notes.json").relative_to(copy))])


def _readme_layout() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## The run directory", 1)[1].split("```", 2)[1]
    names = set()
    for line in block.strip().splitlines()[1:]:  # after experiments/<run_id>/; a comment follows "#"
        for token in line.split("#", 1)[0].split():
            names.update(part for part in token.split("/") if part and "<" not in part)
    return names


def test_readme_run_directory_names_what_the_paths_object_names(tmp_path: Path):
    paths = RunPaths(tmp_path)
    node = paths.node("n0001")
    run_level = {p.name for p in _properties(RunPaths, paths).values() if p.parent == paths.root}
    node_level = {p.name for k, p in _properties(NodePaths, node).items() if k != "id"} | set(NODE_FILES)
    documented = _readme_layout()
    # every name of the README block is one the paths object has (the NNN_<phase> pattern aside)
    assert documented - run_level - node_level - {"nodes", "NNN_"} == set()
    # and the README shows every run-level and node-level name
    assert run_level - documented == set()
    assert node_level - documented == set()


# ---------------------------------------------------------------- one owner ----

PATHS_MODULE = ROOT / "ai_scientist" / "base" / "paths.py"


def _layout_names() -> set[str]:
    """The names the paths object gives to files and folders (derived from it, not listed here)."""
    paths = RunPaths("/r")
    node = paths.node("x")
    names = {p.name for p in _properties(RunPaths, paths).values()}
    names |= {p.name for k, p in _properties(NodePaths, node).items() if k != "id"} | set(NODE_FILES)
    return names


def _hand_joins(source: str) -> list[tuple[int, str]]:
    """String constants joined onto a path: ``x / "name"``, ``"name" / x``, ``Path(x, "name")``,
    ``x.joinpath("name")`` and ``os.path.join(x, "name")``."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        parts: list[ast.expr] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = [node.left, node.right]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("Path", "PurePath", "joinpath", "join") and (name != "join" or len(node.args) > 1):
                parts = list(node.args[1:] if name in ("Path", "PurePath", "join") else node.args)
        hits += [
            (node.lineno, p.value) for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)
        ]
    return hits


# Names inside folders the paths object leaves to their writers, which happen to equal a layout
# name: the LaTeX build folder (``paper.tex``, ``paper.pdf``, ``paper/figures/``), the experiment's
# own ``workspace/metrics.json`` (the metrics contract of phase 4), the link to the run's resources
# that a sandbox puts in a workspace, the plot step's records (written relative to the figures
# workspace it is handed), the ideation log folder's citation cache, and the bench's own folders
# (a task's idea.md, the bench directory's resources/, a baseline's scratch workspace/ and resources/).
ELSEWHERE = {
    ("benchsuite/task.py", "idea.md"),
    ("benchsuite/runner.py", "resources"),
    ("benchsuite/baseline.py", "resources"),
    ("benchsuite/baseline.py", "workspace"),
    ("reporting/writeup.py", "figures"),
    ("reporting/writeup.py", "paper.tex"),
    ("reporting/latex.py", "paper.pdf"),
    ("phases/experiment.py", "metrics.json"),
    ("execution/subprocess_backend.py", "resources"),
    ("execution/bwrap_backend.py", "resources"),
    ("execution/docker_backend.py", "resources"),
    ("reporting/aggregate.py", "exec"),
    ("cli/ideate.py", "s2_cache"),
}


def test_no_module_but_paths_joins_a_layout_name_by_hand():
    names = _layout_names()
    found = []
    for py in sorted((ROOT / "ai_scientist").rglob("*.py")):
        if py == PATHS_MODULE:
            continue
        rel = py.relative_to(ROOT / "ai_scientist").as_posix()
        for line, value in _hand_joins(py.read_text(encoding="utf-8")):
            if value in names and (rel, value) not in ELSEWHERE:
                found.append(f"{rel}:{line}: / {value!r}")
    assert found == [], "use ai_scientist.base.paths (RunPaths / NodePaths) instead:\n" + "\n".join(found)


def test_the_hand_join_scan_sees_a_join():
    assert _hand_joins('p = run_dir / "nodes" / nid\nq = "a" + "b"') == [(1, "nodes")]
    assert _hand_joins('Path(d, "nodes")\nd.joinpath("exec")\nos.path.join(d, "cost.json")') == [
        (1, "nodes"),
        (2, "exec"),
        (3, "cost.json"),
    ]
    assert _hand_joins('", ".join(names)\nPath("nodes")') == []  # a str.join, a path's first part


# ------------------------------------------------------------------ numbering ----


def test_concurrent_threads_never_share_a_number(tmp_path: Path):
    folder = tmp_path / "prompt_logs"
    threads, per_thread = 8, 40
    claimed: list[tuple[int, Path]] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker(k: int) -> None:
        start.wait()
        for i in range(per_thread):
            got = claim_numbered(folder, f"phase{k}", f"label {i}")
            with lock:
                claimed.append(got)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    numbers = [n for n, _ in claimed]
    assert sorted(numbers) == list(range(1, threads * per_thread + 1))
    assert all(file_number(p) == n and p.exists() for n, p in claimed)
    assert numbered_files(folder) == [p for _, p in sorted(claimed)]


def _claim_many(folder: str, k: int, count: int, out: multiprocessing.Queue) -> None:
    out.put([claim_numbered(folder, "exec", f"p{k}")[0] for _ in range(count)])


def test_concurrent_processes_never_share_a_number(tmp_path: Path):
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_many, args=(str(tmp_path), k, 25, out)) for k in range(4)]
    for p in procs:
        p.start()
    numbers = [n for _ in procs for n in out.get(timeout=60)]
    for p in procs:
        p.join(timeout=60)
    assert sorted(numbers) == list(range(1, 101))


def test_next_number_follows_the_highest_and_passes_999(tmp_path: Path):
    (tmp_path / "003_phase0_plan.json").write_text("{}")  # 001 and 002 removed: never reused
    assert claim_numbered(tmp_path, "a", "b")[0] == 4
    (tmp_path / "999_phase2_code.json").write_text("{}")
    n1, p1 = claim_numbered(tmp_path, "review", "x")
    n2, p2 = claim_numbered(
        tmp_path, "vlm", "y"
    )  # another label: a 3-digit glob missed 1000 and gave it twice
    assert (n1, n2) == (1000, 1001) and p1.name == "1000_review_x.json"
    assert [file_number(p) for p in numbered_files(tmp_path)] == [3, 4, 999, 1000, 1001]


def _old_exec_name(n: int, phase: str, label: str) -> str:
    """The name ``phases/execution.py`` gave command records before base/paths.py."""
    safe = re.compile(r"[^A-Za-z0-9_.-]+")
    return f"{n:03d}_{safe.sub('-', phase)}_{safe.sub('-', label)[:30]}.json"


def _old_promptlog_name(n: int, phase: str, label: str) -> str:
    """The name ``promptlog/record.py`` gave prompt logs before base/paths.py."""
    safe = re.compile(r"[^A-Za-z0-9_.-]+")

    def s(text: str) -> str:
        return safe.sub("-", text).strip("-")[:40] or "call"

    return f"{n:03d}_{s(phase)}_{s(label)}.json"


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80)


@given(TEXT)
def test_slug_rule(text: str):
    s = slug(text)
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", s)
    assert 1 <= len(s) <= SLUG_MAX_CHARS
    assert not s.startswith("-") and not s.endswith("-")
    assert slug(s) == s  # a slug is its own slug
    if re.fullmatch(r"[A-Za-z0-9_.]+", text) and len(text) <= SLUG_MAX_CHARS:
        assert s == text  # plain names (phase0, run1, exec_review) are kept as they are


@given(st.integers(min_value=1, max_value=99_999), TEXT, TEXT)
def test_numbered_names_read_back(n: int, phase: str, label: str):
    name = numbered_name(n, phase, label)
    assert "/" not in name and name not in (".", "..")
    assert file_number(name) == n
    # the names of both older rules are read too (replay and `logs` of older runs)
    assert file_number(_old_exec_name(n, phase, label)) == n
    assert file_number(_old_promptlog_name(n, phase, label)) == n
    # the prompt-log rule is the one kept: its names do not change
    assert name == _old_promptlog_name(n, phase, label)


def test_the_recorded_fixture_run_reads_as_before():
    """The run recorded before this module: the same prompt logs, in the same order as the old glob."""
    paths = RunPaths(FIXTURE)
    old = sorted(FIXTURE.glob("nodes/*/prompt_logs/[0-9][0-9][0-9]_*.json"))
    assert old and paths.prompt_log_files() == old
    for nid in paths.node_ids():
        old_exec = sorted((FIXTURE / "nodes" / nid / "exec").glob("[0-9][0-9][0-9]_*.json"))
        assert paths.node(nid).exec_files() == old_exec


def test_node_ids_and_workspaces(tmp_path: Path):
    paths = RunPaths(tmp_path)
    assert node_of_workspace(paths.node("n0007").workspace) == (paths, "n0007")
    assert node_of_workspace(tmp_path / "figures") is None
    for bad in ("", ".", "..", "a/b", "..\\x"):
        with pytest.raises(ValueError, match="not a node id"):
            paths.node(bad)
    with pytest.raises(ValueError, match="not a node file"):
        paths.node("n1").file("notes.json")
