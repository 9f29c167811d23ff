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

import gguf
import numpy as np
import pytest

from app.devtools.test_models.gguf_writing import rewrite_gguf
from app.devtools.test_models.synthetic import TinyShape
from app.devtools.test_models.synthetic_eagle3 import (
    EAGLE3_TARGET_LAYERS,
    EAGLE3_TARGET_SHAPE,
    write_eagle3_target,
    write_tiny_eagle3,
    write_tiny_eagle3_pair,
)
from app.engine.llama.extensions import eagle3_functions
from app.errors import ModelLoadError
from app.gguf.check import check_local_pair, validate_gguf_file
from app.gguf.facts import SelfDrafting, model_facts
from tests.refusals import pair_check_refusal

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


# EAGLE-3 heads a faulty converter could write, or heads made for another target: each one
# llama.cpp aborts the process on (GGML_ASSERT) or refuses with only "failed to load", named
# in words by the pre-load check (check-pair's and the engine's) first
V = gguf.GGUFValueType
F32 = np.float32
HOSTILE: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "two decoder layers": (
        {"eagle3.block_count": (2, V.UINT32, None)},
        {},
        "eagle3.block_count = 2: an EAGLE-3 head has exactly one decoder layer",
    ),
    "keys and values of two widths": (
        {
            "eagle3.attention.key_length": (16, V.UINT32, None),
            "eagle3.attention.value_length": (8, V.UINT32, None),
        },
        {"blk.0.attn_v.weight": np.zeros((32, 128), F32)},
        "its keys are 16 wide and its values 8 (eagle3.attention.key_length and value_length)",
    ),
    "a d2t of floats": (
        {},
        {"d2t": np.arange(343, dtype=F32)},
        "tensor d2t should hold INT64 token ids, found F32",
    ),
    "a d2t for another output": (
        {},
        {"d2t": np.arange(300, dtype=np.int64)},
        "tensor d2t maps 300 draft tokens, but the head's output scores 343",
    ),
    "a d2t of ids outside the vocabulary": (
        {},
        {"d2t": np.full(343, 10**9, dtype=np.int64)},
        "is a damaged EAGLE-3 head: tensor d2t maps draft token 0 to token 1,000,000,000, "
        "outside the vocabulary of 343 tokens",
    ),
    "a d2t for another borrowed output": (
        {},
        {"d2t": np.arange(300, dtype=np.int64), "output.weight": None},
        "the head has no output of its own and borrows the target's, which scores 343 tokens",
    ),
    "a norm before fc without its weights": (
        {"eagle3.norm_before_fc": (True, V.BOOL, None)},
        {},
        "tensor enc.output_norm.weight is missing",
    ),
    "no target width": (
        {"eagle3.target_hidden_size": None},
        {},
        "it names no eagle3.target_hidden_size (the width of the target layers it reads)",
    ),
    "no norm epsilon": (
        {"eagle3.attention.layer_norm_rms_epsilon": None},
        {},
        "it names no eagle3.attention.layer_norm_rms_epsilon",
    ),
    "reads narrower target layers": (
        {"eagle3.target_hidden_size": (32, V.UINT32, None)},
        {"fc.weight": np.zeros((64, 96), F32)},
        "the head reads target layers 32 wide (eagle3.target_hidden_size), but the target is 64",
    ),
    "a setting stored as an integer": (
        {"eagle3.norm_before_residual": (1, V.UINT8, None)},
        {},
        "eagle3.norm_before_residual should be stored as a GGUF bool (true or false), found "
        "UINT8 1",
    ),
    "its target width as INT32": (
        {"eagle3.target_hidden_size": (64, V.INT32, None)},
        {},
        "eagle3.target_hidden_size should be stored as UINT32 (an unsigned 32-bit integer), "
        "found INT32 64",
    ),
    "its layer count as INT32": (
        {"eagle3.block_count": (1, V.INT32, None)},
        {},
        "eagle3.block_count should be stored as UINT32",
    ),
}


@pytest.mark.fast
def test_the_tiny_pair_passes_the_pair_check(pair: tuple[Path, Path]) -> None:
    check_local_pair(*pair)


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_head_llama_cpp_would_abort_on_or_refuse_is_refused_in_words(
    pair: tuple[Path, Path], tmp_path: Path, case: str
) -> None:
    keys, tensors, words = HOSTILE[case]
    target, head = pair
    if case == "two decoder layers":  # a whole second layer: llama.cpp asserts, not refuses
        reader = gguf.GGUFReader(str(head))
        tensors = {
            t.name.replace("blk.0.", "blk.1."): np.array(t.data)
            for t in reader.tensors
            if t.name.startswith("blk.0.")
        }
    hostile = rewrite_gguf(head, tmp_path / "hostile.gguf", keys=keys, tensors=tensors)
    said = pair_check_refusal(target, hostile)
    assert words in said
    assert "hostile.gguf" in said


@pytest.mark.fast
def test_a_head_for_a_target_of_another_width_is_refused_in_words(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """It embeds with the target's token embedding: llama.cpp aborts the process on rows of
    another width."""
    narrow = write_eagle3_target(
        tmp_path / "narrow.gguf", shape=TinyShape(n_layer=4, n_embd=32, n_head=4, n_head_kv=2)
    )
    said = pair_check_refusal(narrow, pair[1])
    assert "the head reads target layers 64 wide (eagle3.target_hidden_size), but the " in said
    assert "target is 32 wide: it was trained for another model" in said
