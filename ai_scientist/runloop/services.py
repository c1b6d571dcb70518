"""The edge of the pipeline: LLM client, sandbox, prompt assembly, memory, environment,
resources, reporting and progress, built once per run and passed to the orchestrator.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, atomic_write_text, read_json
from ..base.paths import RunPaths
from ..llm.call import CallContext, LLMResult

if TYPE_CHECKING:
    from ..base.logsetup import RunLog
    from ..base.run import Run
    from ..execution.base import Executor
    from ..execution.resources import ResourceIndex, ResourceSpec
    from ..llm.backend import Backend
    from ..llm.client import LLMClient
    from ..memory.store import MemoryStore
    from ..phases.node_memory import NodeMemory
    from ..phases.prompts import PromptAdapter
    from ..reporting.progress import Progress
    from ..treesearch.node import Node


@dataclass
class Services:
    run: Run
    llm: LLMClient
    executor: Executor
    prompts: PromptAdapter
    environment: dict[str, Any]
    environment_text: str
    resources_dir: Path | None = None
    resource_index: ResourceIndex | None = None
    memory_store: MemoryStore | None = None
    progress: Progress | None = None
    run_log: RunLog | None = None  # library log records of this run go to run.log
    _closers: list[Any] = field(default_factory=list)

    # ----------------------------------------------------------- LLM calls --
    def ask_run(
        self,
        prompt: str,
        values: dict[str, Any],
        *,
        phase: str,
        label: str,
        role: str,
        schema: dict | None,
        stage: int,
    ) -> LLMResult:
        """A run-level call (idea proposals, tie-breaks), logged under ``nodes/run/``."""
        full = {"task": self.run.idea.to_markdown(), **values, "response_schema": schema}
        messages, ledger = self.prompts.build(prompt, full, node_id="run", role=role)
        ctx = CallContext(node_id="run", stage=f"stage{stage}", phase=phase, label=label, ledger=ledger)
        return self.llm.complete(messages, role=role, ctx=ctx, schema=schema)

    # ------------------------------------------------------ per-node views --
    def resource_text(self, node: Node, parent: Node | None) -> str:
        if self.resource_index is None:
            return ""
        from ..execution.resources import render_resource_index

        # the task text decides which files' contents are shown (lexical overlap, deterministic)
        query = " ".join(x for x in (self.run.idea.to_markdown(), node.idea or "", node.summary or "") if x)
        # about a quarter of the prompt budget (4 chars per token); the packer may cut it further
        return render_resource_index(
            self.resource_index, relevant_to=query, budget_chars=self.prompts.budget_for("code").max_tokens
        )

    def node_memory(self, node: Node, parent: Node | None) -> NodeMemory | None:
        if self.memory_store is None:
            return None
        from ..phases.node_memory import NodeMemory

        return NodeMemory(self.memory_store, self.run, node, parent)

    def exec_env(self, node: Node, parent: Node | None, slot: int) -> dict[str, str]:
        """Per-node environment of experiment commands: seed, GPU pinning, inherited installs."""
        from ..execution.hpc_facts import modules_env
        from ..execution.lineage import inherit_install_state, install_env

        env = {"SEED": str(node.seed if node.seed is not None else self.run.cfg.agent.seed)}
        gpus = self.run.cfg.exec.gpus
        env["CUDA_VISIBLE_DEVICES"] = str(gpus[slot % len(gpus)]) if gpus else ""
        paths = RunPaths(self.run.dir)
        if parent is not None:
            inherit_install_state(paths.node(parent.id).root, paths.node(node.id).root)
        env.update(install_env(paths.node(node.id).root))
        env.update(modules_env(self.environment))  # BASH_ENV: `module` in every command line
        return env

    def write_state(self, node: Node) -> None:
        """``nodes/<id>/state.md``: the parent's state appended to or replaced by this node's."""
        from ..context.state import next_state

        parent_state = ""
        if node.parent_id:
            p = RunPaths(self.run.dir).node(node.parent_id).state_md
            parent_state = p.read_text(encoding="utf-8") if p.exists() else ""
        entry = node.summary if node.is_good else f"FAILED: {node.error or ''}"
        state, _ = next_state(parent_state, node.operation, f"[{node.id}] {entry}")  # op: on the node already
        paths = RunPaths(self.run.dir).node(node.id)
        atomic_write_text(paths.state_md, state, durable=False)
        atomic_write_json(paths.node_json, node.to_dict(), durable=False)

    # ---------------------------------------------------------- reporting --
    def run_reporting(self, from_phase: str | None = None) -> dict:
        from ..reporting.pipeline import run_reporting

        digest = ""
        if self.memory_store is not None:
            from ..memory.digest import digest_markdown

            best = self.run.state.get("stages") or {}
            last = [v["best"]["node_id"] for k, v in sorted(best.items()) if v and v.get("best")]
            # a node's memory branch id is its node id
            branch = last[-1] if last and last[-1] and self.memory_store.has_branch(last[-1]) else None
            digest = digest_markdown(self.memory_store, branch) if branch else ""
        return run_reporting(
            self.run.dir, self.run.cfg, self.llm, self.executor, memory_digest=digest, from_phase=from_phase
        )

    def write_view(self) -> Path:
        from ..reporting.viewer import write_view

        return write_view(self.run.dir, RunPaths(self.run.dir).tree_html)

    def progress_update(self, **fields: Any) -> None:
        if self.progress is None:
            return
        total = self.llm.cost.totals()
        self.progress.update(
            **fields,
            tokens=total.get("prompt_tokens", 0) + total.get("completion_tokens", 0),
            cost_usd=total.get("usd", 0.0),
        )

    def close(self, keep_jobs: bool = False) -> None:
        """Flush and close everything. ``keep_jobs``: a Slurm executor is left open, so its jobs in
        flight run on instead of being cancelled (``resume`` re-attaches to them)."""
        self.llm.cost.flush()
        executor = None if keep_jobs and self.executor.name == "slurm" else self.executor
        for closer in (self.progress, executor, self.memory_store, self.run_log):
            if closer is not None and hasattr(closer, "close"):
                try:
                    closer.close()
                except Exception as exc:  # closing must not hide the run's own outcome
                    self.run.event("close_failed", what=type(closer).__name__, error=repr(exc))


def _environment(run: Run, replay_from: Path | None) -> dict[str, Any]:
    from ..execution.environment import probe_environment

    path = RunPaths(run.dir).environment
    recorded = RunPaths(replay_from).environment if replay_from is not None else None
    if recorded is not None and recorded.exists():
        shutil.copyfile(recorded, path)
    env = read_json(path)
    if env is None:
        env = probe_environment(run.cfg)
        atomic_write_json(path, env)
        run.event("environment_probed", summary={k: env.get(k) for k in ("os", "cpu", "gpus") if k in env})
    return env


def _probe_sandbox(run: Run, env: dict[str, Any], executor: Executor) -> None:
    """Add what the sandbox really offers to the environment (probed inside it once per run and
    sandbox; ``environment.json`` keeps it for a resume)."""
    from ..execution.sandbox_probe import ensure_sandbox_facts

    if ensure_sandbox_facts(env, executor, run.cfg, run.dir):
        atomic_write_json(RunPaths(run.dir).environment, env)
        sb = env["sandbox"]
        tools = sorted(sb.get("tools") or {})
        run.event("sandbox_probed", backend=sb["backend"], ok=sb["ok"], error=sb.get("error"), tools=tools)


def build_services(
    run: Run,
    *,
    resources: ResourceSpec | None = None,
    backend: Backend | None = None,
    replay_from: Path | None = None,
) -> Services:
    """Everything the orchestrator needs, checked before the first token is spent."""
    from ..base.logsetup import RunLog
    from ..context.kinds import needs_machine_details
    from ..execution.environment import render_environment
    from ..llm.factory import make_client
    from ..phases.prompts import PromptAdapter

    cfg = run.cfg
    run_log = RunLog.start(run.dir, run.redactor)
    env = _environment(run, replay_from)
    executor = _executor(run, replay_from)
    if replay_from is None:  # a replay renders the recorded facts; it runs nothing
        _probe_sandbox(run, env, executor)
    index, res_dir = _resources(run, resources, executor)
    if replay_from is not None and backend is None:
        from ..llm.replay_backend import ReplayBackend

        backend = ReplayBackend(replay_from)
    llm = make_client(cfg, run.dir, run.redactor, backend=backend)
    prompts = PromptAdapter(cfg, llm)
    store = None
    if cfg.memory.enabled:
        from ..memory.store import MemoryStore

        store = MemoryStore.open_run(run.dir, cfg)
    from ..reporting.progress import Progress

    progress = Progress(usage=llm.cost.totals)  # tokens move during the report too
    llm.observer = progress  # calls in flight and retries show on the status line
    return Services(
        run=run,
        llm=llm,
        executor=executor,
        prompts=prompts,
        environment=env,
        # compact (no versions, no package names) when over a quarter of the prompt budget
        environment_text=render_environment(
            env,
            budget_chars=prompts.budget_for("code").max_tokens,
            # a pure-Python idea: no build tools, MPI, caches (context/kinds.py)
            # ... unless the run may start MPI ranks (exec.slurm.max_ntasks > 1): the model must
            # see the launcher and the rank limit to use them
            python_only=cfg.context.environment_detail == "compact"
            or (
                cfg.context.environment_detail == "auto"
                and not needs_machine_details(run.idea.to_markdown(), run.idea.code_file)
                and not (cfg.exec.backend == "slurm" and cfg.exec.slurm.max_ntasks > 1)
            ),
            idea=run.idea.to_markdown(),  # its matrix sizes against the caches (relay s9 mm 001)
        ),
        resources_dir=res_dir,
        resource_index=index,
        memory_store=store,
        progress=progress,
        run_log=run_log,
    )


def _executor(run: Run, replay_from: Path | None) -> Executor:
    if replay_from is not None:
        from .replay import ReplayRunner

        return ReplayRunner(replay_from)
    from ..execution import make_executor, resolve_backend

    name, reason = resolve_backend(run.cfg)
    run.event("sandbox_backend", backend=name, reason=reason)
    return make_executor(run.cfg, backend=name, resources_dir=RunPaths(run.dir).resources)


def _resources(
    run: Run, spec: ResourceSpec | None, executor: Executor
) -> tuple[ResourceIndex | None, Path | None]:
    from ..execution.resources import load_index, stage_resources

    res_dir = RunPaths(run.dir).resources
    if spec is not None:
        from ..execution.base import Limits

        index = stage_resources(spec, run.dir, executor=executor, limits=Limits.from_config(run.cfg.exec))
        run.event("resources_staged", items=len(getattr(index, "items", []) or []))
        return index, res_dir
    return load_index(run.dir), res_dir
