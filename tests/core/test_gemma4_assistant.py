"""A tiny synthetic ``gemma4`` target and its ``gemma4-assistant``, loaded by the real llama.cpp,
the assistant drafting from the target's hidden state over the target's own KV cache.

llama.cpp runs in a child process (``app.devtools.assistant_probe``) under a time bound, never
in the test process: a native abort must fail one test, not end the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from app.devtools.test_models.gguf_writing import rewrite_gguf
from app.devtools.test_models.synthetic_gemma4 import (
    TinyGemma4AssistantShape,
    write_tiny_gemma4,
    write_tiny_gemma4_assistant,
)
from app.gguf.check import check_local_pair, validate_gguf_file
from app.gguf.facts import SelfDrafting, model_facts
from tests.refusals import pair_check_refusal

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["1,300,310,320,330,301", "1,290,291", "1,275,280,285,270,299,300,301,302,303"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gemma4")
    target = write_tiny_gemma4(folder / "gemma4.gguf")
    return target, write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf", target)


def probe(target: Path, assistant: Path, *args: str, timeout_s: float = 120) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.assistant_probe", str(target), str(assistant), *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"probe exited {done.returncode}:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_the_headers_say_target_and_assistant(pair: tuple[Path, Path]) -> None:
    target, assistant = (model_facts(validate_gguf_file(p)) for p in pair)
    assert target.architecture == "gemma4"
    assert target.drafting == SelfDrafting("")
    assert assistant.architecture == "gemma4-assistant"
    # every block of an assistant is a next-token block
    assert assistant.drafting == SelfDrafting("assistant", assistant.n_layer, target_arch="gemma4")
    assert "assistant" in assistant.drafting.label
    assert assistant.vocab_size == target.vocab_size


def test_llama_cpp_loads_both_and_the_assistant_drafts_over_the_target_cache(
    pair: tuple[Path, Path],
) -> None:
    report = probe(*pair)
    assert report["target_loaded"] is True
    assert report["assistant_loaded"] is True
    assert report["same_vocab"] is True
    # the assistant is narrower than its target but reads and writes rows of the target's width
    assert report["assistant_n_embd"] < report["target_n_embd"]
    assert report["assistant_n_embd_inp"] == report["target_n_embd_out"]
    assert report["assistant_n_embd_out"] == report["target_n_embd_out"]
    assert report["assistant_n_layer_nextn"] == 2
    assert report["memory_shared_with_target"] is True
    assert report["target_hidden_finite"] is True
    assert report["draft_hidden_finite"] is True
    assert report["draft_reads_the_hidden_state"] is True
    assert report["draft_reads_the_target_cache"] is True


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_assistant_speculation_is_token_identical_with_rejections(
    pair: tuple[Path, Path], prompt: str
) -> None:
    report = probe(*pair, "--greedy", "200", "--prompt", prompt, "--n-draft", "3")
    assert len(report["tokens"]) == 200
    assert report["tokens"] == report["target_only"], report["first_difference"]
    assert report["identical"] is True
    assert report["memory_shared_with_target"] is True
    # both paths taken many times: accepted drafts, and rejected ones removed from the
    # target's cache (which the assistant reads)
    assert report["accepted"] >= 40
    assert report["drafted"] - report["accepted"] >= 40
    assert report["rollbacks_ok"] is True
    first, second, third = report["acceptance_at"]
    assert 0.3 < first < 0.95
    assert first > second > third  # a later draft stands only if the earlier ones did


def test_identical_past_the_sliding_window_cache_size(pair: tuple[Path, Path]) -> None:
    # the target's sliding-window cache holds 256 cells (a 32-token window padded): 480 tokens
    # make it reuse cells between verifications and rollbacks
    report = probe(*pair, "--greedy", "480", "--prompt", PROMPTS[0], "--n-draft", "4")
    assert report["identical"] is True, report["first_difference"]
    assert report["drafted"] - report["accepted"] >= 100
    assert report["rollbacks_ok"] is True


# Assistants a faulty converter could write, or made for another target: each one llama.cpp
# aborts the process on or refuses with only "failed to load", named in words first
V = gguf.GGUFValueType
A = "gemma4-assistant"
HOSTILE: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "its own width as the target's": (
        {f"{A}.embedding_length_out": (32, V.UINT32, None)},
        {},
        f"{A}.embedding_length_out should name its target's width, which differs from the "
        "assistant's own (32); it is the same",
    ),
    "no next-token blocks": (
        {f"{A}.nextn_predict_layers": None},
        {},
        f"{A}.nextn_predict_layers = 0, but every one of an assistant's 2 blocks is a next-token "
        "block",
    ),
    "fewer next-token blocks than blocks": (
        {f"{A}.nextn_predict_layers": (1, V.UINT32, None)},
        {},
        f"{A}.nextn_predict_layers = 1, but every one of an assistant's 2 blocks",
    ),
    "keys and values of two widths": (
        {f"{A}.attention.value_length": (16, V.UINT32, None)},
        {},
        f"its keys are 32 wide and its values 16 ({A}.attention.key_length and value_length)",
    ),
    "no window pattern": (
        {f"{A}.attention.sliding_window_pattern": None},
        {},
        f"it names no {A}.attention.sliding_window_pattern",
    ),
    "a window pattern of UINT8": (
        {f"{A}.attention.sliding_window_pattern": ([1, 0], V.ARRAY, V.UINT8)},
        {},
        f"{A}.attention.sliding_window_pattern should be an array of bools (or of INT32 or "
        "UINT32 numbers), found a UINT8 array of 2 items",
    ),
    "its block count as INT32": (
        {f"{A}.nextn_predict_layers": (2, V.INT32, None)},
        {},
        f"{A}.nextn_predict_layers should be stored as UINT32",
    ),
    "hidden rows of another width": (
        {f"{A}.embedding_length_out": (48, V.UINT32, None)},
        {
            "nextn.pre_projection.weight": np.zeros((32, 96), np.float32),
            "nextn.post_projection.weight": np.zeros((48, 32), np.float32),
        },
        f"the assistant reads hidden rows 48 wide ({A}.embedding_length_out), but the target "
        "is 64 wide",
    ),
}


@pytest.mark.fast
def test_the_tiny_pair_passes_the_pair_check(pair: tuple[Path, Path]) -> None:
    check_local_pair(*pair)


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_an_assistant_llama_cpp_would_refuse_is_refused_in_words(
    pair: tuple[Path, Path], tmp_path: Path, case: str
) -> None:
    keys, tensors, words = HOSTILE[case]
    target, assistant = pair
    hostile = rewrite_gguf(assistant, tmp_path / "hostile.gguf", keys=keys, tensors=tensors)
    said = pair_check_refusal(target, hostile)
    assert words in said
    assert "hostile.gguf" in said


@pytest.mark.fast
def test_an_assistant_without_a_sliding_window_block_is_refused_not_aborted_on(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """llama.cpp asserts (``is_swa_any``) and takes the process down."""
    full = TinyGemma4AssistantShape(swa_layers=(False, False))
    hostile = write_tiny_gemma4_assistant(tmp_path / "full.gguf", pair[0], shape=full)
    said = pair_check_refusal(pair[0], hostile)
    assert f"{A}.attention.sliding_window_pattern has no sliding-window block" in said
