"""A head or an assistant used wrongly is named before llama.cpp sees it, in ``check-pair``'s
words, on every load: the CLI's generate, bench, lab run and serve (each a real engine child
behind ``EngineHost``), and the engine host itself, which keeps the pair it had. Before, an
assistant for gemma4 drafting for a llama target crashed the engine (SIGSEGV, "The file is
damaged or not supported") and a head as the target read "probably out of memory"."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import DraftSource, ModelSpec
from app.engine.process.host import EngineHost, LoadRequest
from app.errors import ModelLoadError
from app.gguf.compat import IncompatiblePairError
from tests.processes import run_app

CRASH_WORDS = ("died", "SIGSEGV", "damaged", "out of memory", "context")


def _check_pair(*files: Path) -> str:
    """``check-pair``'s verdict line, the words every load must use."""
    done, _ = run_app(["check-pair", *map(str, files)], timeout_s=120)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def _load_args(command: str, target: Path, draft: Path | None, tmp_path: Path) -> list[str]:
    source = ["--draft", str(draft)] if draft is not None else ["--ngram"]
    common = ["--target", str(target), *source, "--threads", "1"]
    if command == "generate":
        return ["generate", *common, "--max-tokens", "4", "hello"]
    if command == "bench":
        prompts = tmp_path / "p.jsonl"
        prompts.write_text('{"id": "a", "prompt": "hi"}\n')
        return ["bench", *common, "--prompts", str(prompts), "--json", str(tmp_path / "o.json")]
    if command == "lab run":
        out = str(tmp_path / "lab.jsonl")
        return ["lab", "run", *common, "--suite", "chat", "--max-tokens", "4", "--out", out]
    return ["serve", *common, "--port", "0"]


@pytest.mark.parametrize("command", ["generate", "bench", "lab run", "serve"])
def test_an_assistant_for_another_architecture_is_named_by_every_cli_load(
    misused_heads: dict[str, Path], tmp_path: Path, command: str
) -> None:
    verdict = _check_pair(misused_heads["llama"], misused_heads["assistant"])
    assert verdict == "incompatible: an assistant for gemma4 models cannot draft for a llama model"
    args = _load_args(command, misused_heads["llama"], misused_heads["assistant"], tmp_path)
    done, _ = run_app(args, timeout_s=180)
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error == (
        "error: gemma4-assistant.gguf cannot draft for llama.gguf: "
        + verdict.removeprefix("incompatible: ")
    )
    assert not any(word in done.stderr for word in CRASH_WORDS), done.stderr


@pytest.mark.parametrize(
    ("head", "command"), [("assistant", "generate"), ("eagle3", "generate"), ("eagle3", "serve")]
)
def test_a_head_as_the_target_is_named_not_out_of_memory(
    misused_heads: dict[str, Path], tmp_path: Path, head: str, command: str
) -> None:
    verdict = _check_pair(misused_heads[head])
    said = verdict.split(";")[0]  # "not a target: an EAGLE-3 head drafts for another model…"
    assert said.startswith("not a target: an ") and "cannot answer by itself" in said
    done, _ = run_app(_load_args(command, misused_heads[head], None, tmp_path), timeout_s=180)
    assert done.returncode == 2, done.stderr
    assert f"error: {misused_heads[head].name} is {said}; choose it as the draft" in done.stderr
    assert not any(word in done.stderr for word in CRASH_WORDS), done.stderr


def test_the_engine_host_refuses_before_the_engine_process_and_keeps_its_pair(
    misused_heads: dict[str, Path], tiny_pair: tuple[Path, Path]
) -> None:
    def spec(path: Path) -> ModelSpec:
        return ModelSpec(str(path), n_ctx=512, n_threads=1)

    host = EngineHost()
    try:
        info = host.load(LoadRequest(spec(tiny_pair[0]), spec(tiny_pair[1])))
        engine = host.pid
        with pytest.raises(IncompatiblePairError) as wrong_target:
            host.load(LoadRequest(spec(misused_heads["llama"]), spec(misused_heads["assistant"])))
        assert wrong_target.value.mismatch == (
            "an assistant for gemma4 models cannot draft for a llama model"
        )
        with pytest.raises(ModelLoadError, match="not a target: an EAGLE-3 head drafts"):
            host.load(LoadRequest(spec(misused_heads["eagle3"]), None, DraftSource.NGRAM))
        with pytest.raises(ModelLoadError, match="not a target: an assistant draft for gemma4"):
            host.load(LoadRequest(spec(misused_heads["assistant"]), None, DraftSource.MTP))
        # the engine process never saw them: the same process answers with the pair it had
        assert host.alive and host.pid == engine and host.info == info
        assert host.tokenize("hello")
    finally:
        host.close()
