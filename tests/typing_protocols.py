"""Every implementation satisfies its protocol: checked by mypy (scripts/lint.sh), never run.

A structural protocol is only compared with a class where a value of that class is used as the
protocol; some implementations are picked by name at run time (a backend registry, a config
string), so nothing else would tell when one drifts from its protocol. Each function below
returns its arguments as the protocol type: mypy fails on the line of the one that no longer fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ai_scientist.context.tokens import BPECounter, CallableCounter, EstimateCounter, TokenCounter
    from ai_scientist.execution.apptainer_backend import ApptainerExecutor
    from ai_scientist.execution.base import Executor
    from ai_scientist.execution.bwrap_backend import BwrapExecutor
    from ai_scientist.execution.docker_backend import DockerExecutor
    from ai_scientist.execution.slurm_backend import SlurmExecutor
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.llm.backend import Backend
    from ai_scientist.llm.client import LLMClient
    from ai_scientist.llm.local_backend import LocalBackend
    from ai_scientist.llm.openai_backend import OpenAIBackend
    from ai_scientist.llm.replay_backend import ReplayBackend
    from ai_scientist.llm.scripted_backend import ScriptedBackend
    from ai_scientist.memory.embed import Embedder, OpenAIEmbedder, WordLlamaEmbedder
    from ai_scientist.phases.base import LLM, PromptBuilder
    from ai_scientist.phases.prompts import PromptAdapter
    from ai_scientist.runloop.replay import ReplayRunner
    from ai_scientist.treesearch.policies.base import SearchPolicy
    from ai_scientist.treesearch.policies.bfts import BFTSPolicy
    from ai_scientist.treesearch.policies.greedy import GreedyPolicy
    from ai_scientist.treesearch.policies.mcts import MCTSPolicy


def llm_backends(a: OpenAIBackend, b: LocalBackend, c: ReplayBackend, d: ScriptedBackend) -> list[Backend]:
    return [a, b, c, d]


def executors(
    a: SubprocessExecutor,
    b: BwrapExecutor,
    c: DockerExecutor,
    d: ApptainerExecutor,
    e: SlurmExecutor,
    f: ReplayRunner,
) -> list[Executor]:
    return [a, b, c, d, e, f]


def search_policies(a: GreedyPolicy, b: BFTSPolicy, c: MCTSPolicy) -> list[SearchPolicy]:
    return [a, b, c]


def token_counters(a: BPECounter, b: CallableCounter, c: EstimateCounter) -> list[TokenCounter]:
    return [a, b, c]


def embedders(a: WordLlamaEmbedder, b: OpenAIEmbedder) -> list[Embedder]:
    return [a, b]


def phase_services(client: LLMClient, prompts: PromptAdapter) -> tuple[LLM, PromptBuilder]:
    return client, prompts
