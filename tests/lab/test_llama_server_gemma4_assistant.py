"""llama.cpp's own ``llama-server -md ASSISTANT --spec-type draft-mtp`` serving the tiny
synthetic Gemma 4 target with its assistant: the tokens it answers greedily are the target's
own (as ``app.devtools.assistant_probe`` decodes them, one token at a time), and it drafts
through the assistant, rejections included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.devtools.test_models.synthetic_gemma4 import write_tiny_gemma4, write_tiny_gemma4_assistant
from tests.lab.llama_server import llama_server as start_llama_server

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gemma4")
    target = write_tiny_gemma4(folder / "gemma4.gguf")
    return target, write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf", target)


@pytest.fixture(scope="module")
def server(pair: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with start_llama_server(*pair, log, spec_type="draft-mtp") as url:
        yield url


def complete(url: str, prompt: list[int], n_predict: int) -> dict[str, Any]:
    body = {
        "prompt": prompt,
        "n_predict": n_predict,
        "temperature": 0.0,
        "samplers": ["top_k"],
        "top_k": 1,
        "return_tokens": True,
        "cache_prompt": False,
    }
    request = urllib.request.Request(
        f"{url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        result: dict[str, Any] = json.load(answer)
    return result


def target_only(pair: tuple[Path, Path], prompt: list[int], n_tokens: int) -> list[int]:
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.assistant_probe", *map(str, pair)]
        + ["--greedy", str(n_tokens), "--prompt", ",".join(map(str, prompt))],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    tokens: list[int] = json.loads(done.stdout.strip().splitlines()[-1])["target_only"]
    return tokens


@pytest.mark.parametrize("prompt", [[1, 260, 270, 280], [1, 300, 310, 320, 330, 301]])
def test_llama_server_drafts_with_the_assistant_and_answers_the_target_tokens(
    pair: tuple[Path, Path], server: str, prompt: list[int]
) -> None:
    answer = complete(server, prompt, 200)
    tokens = answer["tokens"]
    # the server stops at end-of-sequence, which it reports as the last token
    assert len(tokens) >= 150, answer["stop_type"]
    assert tokens == target_only(pair, prompt, 200)[: len(tokens)]
    timings = answer["timings"]
    assert timings["draft_n_accepted"] >= 30, timings
    assert timings["draft_n"] - timings["draft_n_accepted"] >= 30, timings
