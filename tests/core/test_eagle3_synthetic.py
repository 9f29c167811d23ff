"""A tiny synthetic EAGLE-3 head for a tiny llama target, run through the real llama.cpp: the
head's encoder fed the target's layer inputs, its decoder drafting, the target verifying.

llama.cpp runs in child processes (``app.devtools.eagle3_probe``, and llama-server through
``app.devtools.eagle3_reference``) under time bounds, never in the test process."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.devtools.test_models.synthetic_eagle3 import (
    EAGLE3_TARGET_LAYERS,
    EAGLE3_TARGET_SHAPE,
    write_tiny_eagle3,
    write_tiny_eagle3_pair,
)
from app.engine.llama.extensions import eagle3_functions
from app.errors import ModelLoadError
from app.gguf.check import validate_gguf_file
from app.gguf.facts import SelfDrafting, model_facts

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ("1,300,310,320,330,301", "1,290,291", "1,275,280,285,270,299,300,301,302,303")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_eagle3_pair(tmp_path_factory.mktemp("eagle3"))


def run_module(module: str, *args: str, timeout_s: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{module} exited {done.returncode}:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_the_header_says_eagle3_head_with_its_target_layers(pair: tuple[Path, Path]) -> None:
    target, head = pair
    facts = model_facts(validate_gguf_file(head))
    assert facts.architecture == "eagle3"
    assert facts.drafting == SelfDrafting("eagle3", 0, EAGLE3_TARGET_LAYERS)
    assert facts.drafting.label == "EAGLE-3 head"
    target_facts = model_facts(validate_gguf_file(target))
    assert target_facts.architecture == "llama"
    assert target_facts.drafting == SelfDrafting("")
    assert target_facts.n_layer == EAGLE3_TARGET_SHAPE.n_layer
    assert max(EAGLE3_TARGET_LAYERS) < target_facts.n_layer  # all layer inputs, no nextn rows
    assert facts.n_embd == target_facts.n_embd
    assert facts.vocab_size == target_facts.vocab_size  # the head carries its target's vocab


def test_the_writer_refuses_layers_the_target_has_not(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"three of the target's layers 0\.\.3"):
        write_tiny_eagle3(tmp_path / "bad.gguf", pair[0], target_layers=(1, 2, 4))


def test_a_build_without_the_functions_is_named_in_the_error() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    with pytest.raises(ModelLoadError, match=r"does not export llama_set_embeddings_layer_inp"):
        eagle3_functions(libc)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_eagle3_speculation_is_token_identical_with_rejections(
    pair: tuple[Path, Path], prompt: str
) -> None:
    target, head = pair
    report = run_module(
        "app.devtools.eagle3_probe",
        str(target),
        str(head),
        "--greedy",
        "240",
        "--prompt",
        prompt,
        "--n-max",
        "3",
        timeout_s=180,
    )
    # llama.cpp loaded both and reports the head's target layers through the bindings
    assert report["loaded"] is True
    assert report["head_has_encoder"] is True
    assert report["target_layers"] == list(EAGLE3_TARGET_LAYERS)
    assert len(report["tokens"]) == 240
    assert report["tokens"] == report["target_only"]
    assert report["identical"] is True
    # accepted drafts and rejected ones (rolled back in the target) both many times, and
    # chained drafts (the head's own pre-norm row fed back) accepted too
    assert report["accepted"] >= 20
    assert report["drafted"] - report["accepted"] >= 20
    first, second, _third = report["acceptance_per_position"]
    assert 0.0 < first < 1.0
    assert 0.0 < second < first


def test_llama_servers_own_eagle3_drafts_and_accepts_the_same(pair: tuple[Path, Path]) -> None:
    """llama.cpp's ``llama-server --spec-type draft-eagle3 -md HEAD`` (built from the vendored
    sources) answers with the probe's tokens and drafts and accepts exactly as many: the probe
    drives the head as llama.cpp does."""
    target, head = pair
    report = run_module(
        "app.devtools.eagle3_reference",
        str(target),
        str(head),
        "--tokens",
        "200",
        "--draft-max",
        "3",
        "--prompts",
        ";".join(PROMPTS),
        timeout_s=600,
    )
    assert len(report["prompts"]) == len(PROMPTS)
    for row in report["prompts"]:
        assert row["server_equals_target_only"] is True
        assert row["server_equals_probe"] is True
        assert row["probe_identical"] is True
        assert row["server_drafted"] == row["probe_drafted"] > 0
        assert row["server_accepted"] == row["probe_accepted"] > 0
