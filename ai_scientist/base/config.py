"""Typed, strict schema of ``bfts_config.yaml``.

Every key is declared here with its type, range and default; unknown keys are
errors. ``load_config`` turns any problem (unreadable file, bad YAML, unknown
key, wrong type, out-of-range value, bad ``--set``) into a :class:`ConfigError`
whose message names the dotted key path, so the CLI can exit 2 without a
traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .userfiles import load_yaml, read_user_text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# ---------------------------------------------------------------- agent ----


class RoleConfig(_Strict):
    """Model settings for one LLM role; ``model: null`` means ``llm.model``."""

    model: str | None = None
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(2048, ge=16, le=200_000)


class StagesConfig(_Strict):
    stage1_max_iters: int = Field(6, ge=1)
    stage2_max_iters: int = Field(3, ge=0)
    stage3_max_iters: int = Field(3, ge=0)
    stage4_max_iters: int = Field(3, ge=0)
    stage2_good_nodes: int = Field(2, ge=1)
    stage3_patience: int = Field(3, ge=1)


class SearchKnobs(_Strict):
    num_drafts: int = Field(2, ge=1)
    debug_prob: float = Field(0.5, ge=0.0, le=1.0)
    max_debug_depth: int = Field(3, ge=0)


class MultiSeedConfig(_Strict):
    num_seeds: int = Field(2, ge=1, le=100)
    # before a stage hands on its best: up to this many runners-up whose metric is within seed noise
    # of it are re-run over the same seeds and the best mean wins (0: off); each costs num_seeds
    # runs of existing code, no LLM call (docs/pipeline.md, "Selection that survives seed noise")
    rerank_candidates: int = Field(2, ge=0, le=20)
    # within noise: |difference| <= noise_z * sigma * sqrt(2), sigma estimated from seed re-runs
    noise_z: float = Field(2.0, gt=0.0, le=10.0)
    # at a stage's end, up to this many good nodes whose finding is in metrics their parent did
    # not report (a condition added beside an unchanged headline) are re-run over the same seeds
    # too, best-ranked first (0: off); each costs num_seeds runs of existing code, no LLM call
    finding_reruns: int = Field(1, ge=0, le=20)


class PlotsConfig(_Strict):
    """A working node's own plots: LLM-written plotting code run in the sandbox, then a VLM critique."""

    enabled: bool = True
    max_figures: int = Field(4, ge=1, le=12)  # figures kept per node (more are rejected, named)
    critique: bool = True  # the vlm_feedback model critiques the figures (skipped when it has no vision)


ROLE_DESCRIPTION_MAX_CHARS = 4000  # a persona paragraph, not a document: it is in every node prompt


class AgentConfig(_Strict):
    num_workers: int = Field(1, ge=1, le=64)
    # free: a worker that finishes takes the next node at once; batch: the old batch-synchronous
    # loop (a batch waits for its slowest node), kept as the benchmark baseline (docs/pipeline.md)
    scheduler: Literal["free", "batch"] = "free"
    seed: int = 0
    # the persona at the head of every node prompt's system message; null = prompt/core/system.j2's
    role_description: str | None = None
    debug_reuses_parent_plan: bool = True
    # fewer calls per node: a child plans inside its code answer (phases/plan.py), the execution
    # review also parses the metrics when the experiment wrote no metrics.json (phases/pipeline.py)
    merge_calls: bool = True
    llm_tie_break: bool = False
    # children (improve, debug, tune, ablate) may answer phase 2 with edits against their parent's
    # files, drafts against the seed code, instead of whole files (phases/edits.py); whole files
    # stay possible; off: every answer gives whole files
    code_edits: bool = True
    # answers chosen from what exists (phases/schemas.py): dependencies from the packages and tools
    # the sandbox probe found (new ones, with a reason, only with exec.network), the build's language
    # and compiler from the probed toolchains, run commands from the node's files; an enum in the
    # schema (llama.cpp grammar / server JSON schema) and checked on return otherwise
    constrain_answers: bool = True
    # the execution review's is_bug makes a node buggy (true), or is advice only (false: the verdict
    # is kept in review.json and the event review_advisory, and a run that exited 0 with valid
    # metrics stays good) — for a model too weak to judge a run (the bundled example's 135M model)
    trust_review: bool = True
    # approval gates (runloop/steering.py): the run stops with exit code 5 at each named point until
    # `ai-scientist steer RUN approve` (or the serve page) passes it; stage_end: before each next
    # stage, reporting: before plots and paper
    gates: list[Literal["stage_end", "reporting"]] = []
    stages: StagesConfig = StagesConfig()
    search: SearchKnobs = SearchKnobs()
    multi_seed_eval: MultiSeedConfig = MultiSeedConfig()
    plots: PlotsConfig = PlotsConfig()
    code: RoleConfig = RoleConfig(temperature=0.7, max_tokens=4096)
    feedback: RoleConfig = RoleConfig(temperature=0.2)
    vlm_feedback: RoleConfig = RoleConfig(temperature=0.2)
    summary: RoleConfig = RoleConfig(temperature=0.2)
    select_node: RoleConfig = RoleConfig(temperature=0.2)
    plotting: RoleConfig = RoleConfig(temperature=0.3, max_tokens=4096)
    writeup: RoleConfig = RoleConfig(temperature=0.5, max_tokens=4096)
    citation: RoleConfig = RoleConfig(temperature=0.2)
    review: RoleConfig = RoleConfig(temperature=0.5)
    ideation: RoleConfig = RoleConfig(temperature=0.7, max_tokens=4096)

    @field_validator("role_description", mode="before")
    @classmethod
    def _persona_text(cls, v: Any) -> Any:
        # "You are X: you do Y" unquoted is a YAML mapping; say so instead of "not a string"
        if isinstance(v, dict):
            raise ValueError(
                "must be text, got a mapping (an unquoted ': ' makes one): quote it, e.g. "
                "--set 'agent.role_description=\"You are ...: ...\"', or use a YAML block scalar (|)"
            )
        return v

    @field_validator("role_description")
    @classmethod
    def _persona(cls, v: str | None) -> str | None:
        # outer whitespace is dropped (a YAML block scalar ends in a newline), so the text stored in
        # config.resolved.yaml is byte for byte the one every prompt carries
        if v is None:
            return None
        v = v.strip()
        if not v:
            raise ValueError("must be non-empty text (leave it out, or null, for the built-in persona)")
        if len(v) > ROLE_DESCRIPTION_MAX_CHARS:
            raise ValueError(
                f"{len(v):,} characters, at most {ROLE_DESCRIPTION_MAX_CHARS:,} "
                "(it is sent in every node prompt; keep it to a paragraph)"
            )
        return v


ROLES = (
    "code",
    "feedback",
    "vlm_feedback",
    "summary",
    "select_node",
    "plotting",
    "writeup",
    "citation",
    "review",
    "ideation",
)


# ----------------------------------------------------------------- exec ----


class SlurmConfig(_Strict):
    """``exec.backend: slurm``: each command is a Slurm job (see docs/execution.md, "Slurm")."""

    partition: str | None = None  # sbatch --partition; null = the cluster's default
    account: str | None = None  # sbatch --account
    qos: str | None = None  # sbatch --qos
    shared_dir: str | None = None  # job directories, on storage the compute nodes see; null = <run>/slurm
    gres: str | None = None  # sbatch --gres, e.g. "gpu:1"
    cpus: int | None = Field(None, ge=1)  # --cpus-per-task; null = ceil(exec.cpus)
    mem_mb: int | None = Field(None, ge=16)  # --mem; null = exec.memory_mb
    time_margin_s: float = Field(60.0, ge=0)  # --time = exec timeout + this margin (whole minutes)
    sandbox: Literal["subprocess", "bwrap", "apptainer"] = "subprocess"  # inner sandbox on the node
    python: str | None = None  # interpreter with ai_scientist on the nodes; null = the orchestrator's
    # true: --export=NONE, slurmd runs the user's login shell for every job (its environment);
    # false: --export=ALL from a few of the orchestrator's variables (no login shell per job)
    login_env: bool = False
    poll_interval_s: float = Field(1.0, gt=0, le=300)  # one squeue per interval for all jobs
    lost_grace_s: float = Field(10.0, ge=0)  # an ended job's exit file may lag on shared storage
    extra_args: list[str] = Field(default_factory=list)  # more sbatch options, e.g. ["--constraint=cpu"]
    # MPI: the most ranks a code answer may ask for (run.ntasks -> --ntasks, one node); 1 = none
    max_ntasks: int = Field(1, ge=1, le=1024)
    # starts each run line ntasks times inside the job's allocation; "{ntasks}" is replaced
    mpi_launcher: list[str] = Field(default_factory=lambda: ["mpirun", "-n", "{ntasks}"], min_length=1)


class ExecConfig(_Strict):
    backend: Literal["auto", "subprocess", "bwrap", "docker", "apptainer", "slurm"] = "auto"
    timeout: float = Field(600.0, gt=0, le=7 * 24 * 3600)
    phase1_max_steps: int = Field(6, ge=0, le=100)
    log_prompts: bool = True
    memory_mb: int = Field(4096, ge=64)
    cpus: float = Field(1.0, gt=0)
    pids_limit: int = Field(256, ge=8)
    max_output_bytes: int = Field(1_000_000, ge=1024)
    network: bool = False
    gpus: list[int] = Field(default_factory=list)
    max_files: int = Field(200, ge=1)
    max_file_bytes: int = Field(5_000_000, ge=1)
    docker_image: str = "ai-scientist-sandbox:latest"
    docker_reuse_container: bool = True
    apptainer_binary: str = "apptainer"
    apptainer_image: str | None = None
    python: str = "/usr/bin/python3"
    # a backend that cannot isolate generated code here (e.g. subprocess as non-root) refuses
    # to start unless this is true (docs/execution.md, "Security")
    allow_unsafe_sandbox: bool = False
    # local backends: commands are forked by a small server process, not the (large)
    # orchestrator (docs/execution.md, "The fork server"); false forks them in-process
    fork_server: bool = True
    slurm: SlurmConfig = SlurmConfig()


# --------------------------------------------------------------- memory ----


class EmbeddingConfig(_Strict):
    backend: Literal["wordllama", "openai", "none"] = "wordllama"
    model: str | None = None


class MemoryConfig(_Strict):
    enabled: bool = True
    core_max_chars: int = Field(2000, ge=100)
    recall_max_events: int = Field(20, ge=1)
    retrieval_k: int = Field(5, ge=1, le=100)
    memory_budget_chars: int = Field(6000, ge=200)
    archival_snippet_budget_chars: int = Field(1500, ge=100)
    max_memory_read_rounds: int = Field(2, ge=0, le=10)
    embedding: EmbeddingConfig = EmbeddingConfig()


# ------------------------------------------------------------------ llm ----


class PriceConfig(_Strict):
    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)
    # prompt tokens the server served from its prefix cache; null: the input price (no discount)
    cached_per_mtok: float | None = Field(None, ge=0)


class LLMConfig(_Strict):
    backend: Literal["auto", "openai", "local", "replay"] = "auto"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    # the packaged GGUF of the local backend (llm/local_models.py); local_model_path, when set, wins
    local_model: Literal["smollm2", "gemma3-270m"] = "smollm2"
    local_model_path: str | None = None
    local_n_ctx: int = Field(8192, ge=512)
    local_threads: int | None = Field(None, ge=1)
    timeout_s: float = Field(120.0, gt=0)
    max_attempts: int = Field(4, ge=1, le=20)
    backoff_base_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    structured_output: Literal["auto", "json_schema", "prompt"] = "auto"
    replay_dir: str | None = None
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    max_cost_usd: float | None = Field(None, gt=0)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not v.replace("_", "").isalnum():
            raise ValueError(f"must be an environment variable name, got {v!r}")
        return v


# -------------------------------------------------------------- context ----


# the names of context.policies.LAYER_POLICIES (the base layer cannot import context;
# tests/test_context_policies.py checks the two lists are the same)
LAYER_POLICY_NAMES = (
    "head",
    "head_rows",
    "head_sentences",
    "head_tail",
    "history_prune",
    "json_preview",
    "none",
    "rank_rows",
    "strip_reasoning",
    "tail",
    "whole_items",
)


class LayerBudget(_Strict):
    priority: int | None = None
    min_tokens: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    policy: str | None = None  # one of LAYER_POLICY_NAMES

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, v: str | None) -> str | None:
        if v is not None and v not in LAYER_POLICY_NAMES:
            raise ValueError(f"unknown layer policy {v!r}; one of {', '.join(LAYER_POLICY_NAMES)}")
        return v


class ContextPolicies(_Strict):
    tail_window_chars: int = Field(24000, ge=100)
    json_preview_threshold_chars: int = Field(5000, ge=200)
    json_preview_list_head: int = Field(2, ge=0)
    json_preview_string_cap: int = Field(500, ge=20)
    history_keep_turns: int = Field(8, ge=1)
    strip_reasoning: bool = True


class ContextConfig(_Strict):
    # "auto": from the called model's context window and budget_policy (docs/context.md, Budgets);
    # a number is a hard cap on every prompt
    max_prompt_tokens: Literal["auto"] | Annotated[int, Field(ge=256)] = "auto"
    budget_policy: Literal["economy", "balanced", "full"] = "balanced"
    reserved_output_tokens: int = Field(1024, ge=16)
    model_context_window: int | None = Field(None, ge=512)
    # the answer limit of the roles that write whole programs or papers (code, plotting, writeup)
    # when their model's window is large: max(role max_tokens, min(this, window / 8)) for a role
    # whose max_tokens is at least 4096; 0 keeps every role at its max_tokens (docs/context.md)
    long_answer_tokens: int = Field(16384, ge=0, le=200_000)
    # the environment block: "auto" — full for compiled / parallel / benchmark ideas, compact for a
    # pure-Python one (context/kinds.py needs_machine_details); "full" / "compact" force it
    environment_detail: Literal["auto", "full", "compact"] = "auto"
    layers: dict[str, LayerBudget] = Field(default_factory=dict)
    policies: ContextPolicies = ContextPolicies()


# --------------------------------------------------------------- search ----


class MCTSConfig(_Strict):
    exploration_c: float = Field(1.4, ge=0)
    gamma: float = Field(0.85, gt=0, le=1)
    max_expand: int = Field(3, ge=1)
    tree_nums: int = Field(2, ge=1)
    final_choice: Literal["consensus", "score", "random"] = "consensus"


class SearchConfig(_Strict):
    policy: Literal["bfts", "greedy", "mcts"] = "bfts"
    mcts: MCTSConfig = MCTSConfig()


# --------------------------------------------------------------- report ----


LiteratureSource = Literal["semantic_scholar", "openalex", "crossref", "arxiv"]
LITERATURE_SOURCES: list[LiteratureSource] = ["semantic_scholar", "openalex", "crossref", "arxiv"]


class CitationConfig(_Strict):
    """The literature sources (ai_scientist/literature, docs/literature.md): tried in order after
    the user's library (``report.references``); keys are read from the variables named here."""

    enabled: bool = True
    sources: list[LiteratureSource] = Field(default_factory=lambda: list(LITERATURE_SOURCES))
    api_key_env: str = "S2_API_KEY"  # Semantic Scholar
    openalex_key_env: str = "OPENALEX_API_KEY"
    crossref_key_env: str = "CROSSREF_PLUS_API_TOKEN"
    contact_email_env: str = "AI_SCIENTIST_CONTACT_EMAIL"  # OpenAlex's and Crossref's polite pool
    max_results: int = Field(5, ge=1, le=50)
    rounds: int = Field(3, ge=1, le=20)
    timeout_s: float = Field(10.0, gt=0, le=120)  # one request; a timeout skips the source for the run
    max_attempts: int = Field(3, ge=1, le=10)  # per request, on HTTP 429 / 5xx
    max_wait_s: float = Field(30.0, ge=0, le=600)  # a longer Retry-After skips the source instead
    budget: int = Field(200, ge=1, le=100_000)  # requests per source per run
    # a source's API at another address (an institute's mirror or proxy); {} = the public APIs
    base_urls: dict[LiteratureSource, str] = Field(default_factory=dict)

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"each source at most once, got {v}")
        return v


def _references(v: list[str]) -> list[str]:
    """Each path exists (a .bib, a PDF or a folder of them); kept absolute, as a run resumes elsewhere."""
    out = []
    for given in v:
        p = Path(given).expanduser()
        if not p.exists():
            raise ValueError(f"{given}: no such file or folder")
        if p.is_file() and p.suffix.lower() not in (".bib", ".pdf"):
            raise ValueError(f"{given}: not a .bib file, a PDF or a folder of them")
        if p.is_dir() and not any(x.suffix.lower() in (".bib", ".pdf") for x in p.rglob("*")):
            raise ValueError(f"{given}: the folder holds no .bib file and no PDF")
        out.append(str(p.resolve()))
    return out


class IdeationConfig(_Strict):
    """``ai-scientist ideate``'s literature: null = the report's (report.citations.sources,
    report.references)."""

    sources: list[LiteratureSource] | None = None
    references: list[str] | None = None

    @field_validator("references")
    @classmethod
    def _check_refs(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _references(v)


class ReviewConfig(_Strict):
    """Few-shot examples for the reviewers (see reporting/fewshot.py)."""

    fewshot_dir: str | None = None
    fewshot_max_examples: int = Field(1, ge=0, le=10)
    fewshot_max_tokens: int = Field(6000, ge=0, le=200_000)


PAGE_LIMITS = {"workshop": 4, "conference": 8}


class ReportConfig(_Strict):
    @model_validator(mode="before")
    @classmethod
    def _template_page_limit(cls, data: Any) -> Any:
        # page_limit null (the default) is the template's; an explicit report.page_limit wins
        if isinstance(data, dict) and data.get("page_limit") is None:
            data = {**data, "page_limit": PAGE_LIMITS.get(data.get("template", "workshop"), 4)}
        return data

    enabled: bool = True
    # who writes the paper: the writer model (model), the pipeline from the run's records (facts),
    # or auto: facts when the writer's backend is the embedded local model, model otherwise
    writer: Literal["auto", "model", "facts"] = "auto"
    template: Literal["workshop", "conference"] = "workshop"
    max_figures: int = Field(6, ge=1, le=50)
    plot_reflection_rounds: int = Field(2, ge=0, le=10)
    # when no model-written figure survives: the pipeline draws its own (best metric per stage, the
    # best node's saved series) in the sandbox, marked "source": "standard" in figures/figures.json
    standard_figures: bool = True
    page_limit: Literal[4, 8] | None = None  # never None after validation: see _template_page_limit
    compile_fix_rounds: int = Field(3, ge=0, le=10)
    writeup_reflections: int = Field(1, ge=0, le=10)
    num_reviews: int = Field(2, ge=0, le=10)
    num_reflections: int = Field(1, ge=0, le=5)
    citations: CitationConfig = CitationConfig()
    # the user's own papers: .bib files, PDFs, folders of them (`run --references`); searched first
    references: list[str] = Field(default_factory=list)
    review: ReviewConfig = ReviewConfig()

    @field_validator("references")
    @classmethod
    def _check_refs(cls, v: list[str]) -> list[str]:
        return _references(v)


class GraderConfig(_Strict):
    """A grader out of the generated code's reach (``run --grader DIR``, an idea's ``grader``)."""

    dir: str | None = None  # the grader's directory (absolute once the run is made); null = none
    # a self-reported value further than tolerance * max(1, |graded|) from the graded one is a mismatch
    tolerance: float = Field(0.01, ge=0)
    timeout: float = Field(600.0, gt=0, le=7 * 24 * 3600)  # seconds one grading may take


# --------------------------------------------------------------- submit ----


class SubmitConfig(_Strict):
    """``ai-scientist submit``: the orchestrator itself as a Slurm batch job (docs/execution.md,
    "Running the whole pipeline as a batch job"). ``--time`` / ``--partition`` / ``--sbatch-arg`` win."""

    time: str = "04:00:00"  # the job's --time (Slurm's formats: MM, HH:MM:SS, D-HH:MM:SS, ...)
    partition: str | None = None  # --partition; null = the cluster's default
    # --cpus-per-task / --mem; null = 1 CPU / 4096 MB, + the experiments' when they run in the job
    cpus: int | None = Field(None, ge=1)
    mem_mb: int | None = Field(None, ge=256)
    warning_s: int = Field(300, ge=1, le=65535)  # --signal=B:USR1@this: the stop starts this long before
    max_resubmits: int = Field(10, ge=0, le=1000)  # continuations after time limits, per `submit`
    continue_with: Literal["resubmit", "requeue"] = "resubmit"  # a new job (afterany) or scontrol requeue
    experiment_jobs: Literal["leave", "cancel"] = "leave"  # exec.backend slurm: jobs in flight at the stop
    python: str | None = None  # interpreter with ai_scientist on the nodes; null = exec.slurm.python or ours
    extra_args: list[str] = Field(default_factory=list)  # more sbatch options, e.g. ["--account=proj"]


# ----------------------------------------------------------------- root ----


class Config(_Strict):
    agent: AgentConfig = AgentConfig()
    exec: ExecConfig = ExecConfig()
    memory: MemoryConfig = MemoryConfig()
    llm: LLMConfig = LLMConfig()
    context: ContextConfig = ContextConfig()
    search: SearchConfig = SearchConfig()
    report: ReportConfig = ReportConfig()
    ideation: IdeationConfig = IdeationConfig()
    grader: GraderConfig = GraderConfig()
    submit: SubmitConfig = SubmitConfig()

    def role(self, name: str) -> RoleConfig:
        """The settings of one LLM role (``code``, ``feedback``, ...)."""
        if name not in ROLES:
            raise KeyError(f"unknown LLM role {name!r}; known: {', '.join(ROLES)}")
        return getattr(self.agent, name)

    def model_for(self, role: str) -> str:
        return self.role(role).model or self.llm.model


# -------------------------------------------------------------- loading ----


def _describe(err: Mapping[str, Any]) -> str:
    path = ".".join(str(p) for p in err["loc"]) or "<root>"
    kind = err["type"]
    got = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"{path}: unknown key (check spelling; see bfts_config.yaml for the keys)"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {
            "greater_than_equal": ">=",
            "greater_than": ">",
            "less_than_equal": "<=",
            "less_than": "<",
        }[kind]
        bound = next(iter(ctx.values()), "?")
        return f"{path}: must be {op} {bound}, got {got!r}"
    if kind == "literal_error":
        return f"{path}: must be one of {ctx.get('expected', '?')}, got {got!r}"
    msg = err.get("msg", kind)
    if isinstance(got, (dict, list)):
        return f"{path}: {msg}"
    shown = repr(got)
    if len(shown) > 120:  # a long text value: its start is enough to recognise it
        shown = f"{shown[:80]}... ({len(str(got)):,} characters)"
    return f"{path}: {msg}, got {shown}"


def validate(data: Any, source: str = "config") -> Config:
    """Validate a mapping into a :class:`Config`, or raise :class:`ConfigError`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e) for e in exc.errors()]
        raise ConfigError("\n".join(lines)) from None


def _coerce(text: str) -> Any:
    """Parse a ``--set`` value with YAML scalars rules (ints, floats, bools, null, lists)."""
    if text == "":
        return ""
    try:
        return load_yaml(text, "--set value")
    except ConfigError:
        return text


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """Apply one ``a.b.c=value`` override to raw config data in place."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected KEY.PATH=VALUE")
    key, _, value = assignment.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"--set {assignment!r}: empty key path")
    node: Any = data
    walked: list[str] = []
    for part in parts[:-1]:
        walked.append(part)
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"{'.'.join(walked)}: is a value, cannot set {key} inside it")
        node = nxt
    node[parts[-1]] = _coerce(value)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a config file; ``path=None`` means defaults only."""
    data: Any = {}
    if path is not None:
        p = Path(path)
        data = load_yaml(read_user_text(p, str(p), kind="config file"), str(p))
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of sections")
    for assignment in overrides or []:
        apply_override(data, assignment)
    return validate(data, str(path or "config"))


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML (what ``config.resolved.yaml`` holds)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def leaf_paths(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every dotted leaf key of the schema (used by the 'no unread key' test)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        path = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(leaf_paths(ann, path + "."))
        else:
            out.append(path)
    return out
