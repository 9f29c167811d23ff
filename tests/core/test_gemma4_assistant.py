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

import pytest

from app.devtools.test_models.synthetic_gemma4 import write_tiny_gemma4, write_tiny_gemma4_assistant
from app.gguf.check import validate_gguf_file
from app.gguf.facts import SelfDrafting, model_facts

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
