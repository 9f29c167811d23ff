"""Tiny synthetic DFlash, DFlash2 and DSpark block drafters for a tiny llama target: real to
llama.cpp (they load and draft, in ``app.devtools.dflash_probe`` and in llama-server), and
seen for what they are from their headers, damaged ones refused in words before any load.

llama.cpp runs in child processes under time bounds, never in the test process."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from app.devtools.test_models.gguf_writing import FieldSpec
from app.devtools.test_models.synthetic_dflash import (
    DFLASH_BLOCK_SIZE,
    DFLASH_TARGET_LAYERS,
    DFLASH_TARGET_SHAPE,
    MASK_TOKEN,
    VARIANTS,
    write_dflash_target,
    write_tiny_dflash,
)
from app.engine.llama.extensions import dflash_functions
from app.errors import ModelLoadError
from app.files.paths import model_cache_dir
from app.gguf.check import check_local_pair, validate_gguf_file
from app.gguf.facts import model_facts
from tests.ggufs import kv_string, kv_tokens, kv_u32, raw_gguf, spm_tokens
from tests.processes import run_app
from tests.refusals import pair_check_refusal

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ("1,300,310,320,330,301", "1,290,291")
LLAMA_SERVER = (
    model_cache_dir() / "reference" / version("llama-cpp-python") / "build" / "bin" / "llama-server"
)
CRASH_WORDS = ("died", "SIGSEGV", "SIGABRT", "Aborted", "damaged or not supported")
KINDS = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The target ("target") and one head of each variant, by variant name."""
    folder = tmp_path_factory.mktemp("dflash")
    target = write_dflash_target(folder / "target.gguf")
    made = {"target": target}
    for variant in VARIANTS:
        made[variant] = write_tiny_dflash(folder / f"{variant}.gguf", target, variant=variant)
    return made


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


@pytest.mark.fast
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_header_says_which_block_drafter_for_which_target(
    heads: dict[str, Path], variant: str
) -> None:
    facts = model_facts(validate_gguf_file(heads[variant]))
    target = model_facts(validate_gguf_file(heads["target"]))
    drafting = facts.drafting
    assert facts.architecture == "dflash" and drafting.method == "dflash" and drafting.is_head
    assert drafting.target_layers == DFLASH_TARGET_LAYERS
    block = drafting.block
    assert block is not None
    assert block.variant == KINDS[variant]
    assert block.block_size == DFLASH_BLOCK_SIZE
    assert block.mask_token == MASK_TOKEN
    assert block.hidden_size == target.n_embd == DFLASH_TARGET_SHAPE.n_embd
    assert block.causal is False
    assert drafting.name == f"{KINDS[variant]} block drafter, {DFLASH_BLOCK_SIZE} tokens a block"
    assert block.selector_top_k == (4 if variant == "dflash2" else 0)
    assert block.confidence_head is (variant == "dspark")
    # DSpark drafts from its anchor's place too; the others leave it to the anchor
    assert block.max_draft == DFLASH_BLOCK_SIZE - (0 if variant == "dspark" else 1)
    assert facts.vocab_size == target.vocab_size  # the head carries its target's vocabulary


@pytest.mark.fast
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_fitting_head_passes_the_pair_check(heads: dict[str, Path], variant: str) -> None:
    """The engine drafts with it (tests/core/test_dflash_drafter.py): nothing is refused."""
    check_local_pair(heads["target"], heads[variant])


DAMAGED: dict[str, tuple[dict[str, Any], str]] = {
    "missing tensor": (
        {"drop_tensor": "fc.weight"},
        "is a damaged block drafter: tensor fc.weight is missing",
    ),
    "missing selector": (
        {"variant": "dflash2", "drop_tensor": "selector_successor.weight"},
        "tensor selector_successor.weight is missing",
    ),
    "target layer out of range": (
        {"target_layers": (1, 4)},
        "the head reads target layers [1, 4], but the target has 4: it was trained for a "
        "deeper model",
    ),
    "block size 0": ({"block_size": 0}, "dflash.block_size = 0; a block drafter's block holds"),
    "block size huge": (
        {"block_size": 1 << 30},
        "dflash.block_size = 1,073,741,824; a block drafter's block holds 2 to 1,024",
    ),
    "DSpark without a block size": (
        {"variant": "dspark", "block_size": None},
        "a DSpark head needs dflash.block_size",
    ),
    "mask token outside the vocabulary": (
        {"mask_token": 99_999},
        "tokenizer.ggml.mask_token_id = 99,999 is outside the vocabulary of",
    ),
    "no mask token": ({"mask_token": None}, "it names no mask token"),
}


def _damaged(heads: dict[str, Path], tmp_path: Path, case: str) -> Path:
    options, _ = DAMAGED[case]
    return write_tiny_dflash(tmp_path / "damaged.gguf", heads["target"], **options)


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_head_is_refused_in_words_before_any_load(
    heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    said = pair_check_refusal(heads["target"], _damaged(heads, tmp_path, case))
    assert DAMAGED[case][1] in said
    assert "damaged.gguf" in said


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_check_pair_names_a_damaged_head_and_lives(
    heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    head = _damaged(heads, tmp_path, case)
    done, _ = run_app(["check-pair", str(heads["target"]), str(head)], timeout_s=120)
    said = done.stdout + done.stderr
    assert done.returncode in (1, 2), said  # 1: incompatible, 2: the header is unreadable
    assert DAMAGED[case][1].split(": ")[-1] in said
    assert not any(word in said for word in CRASH_WORDS), said


def test_generate_with_a_damaged_head_says_so_and_lives(
    heads: dict[str, Path], tmp_path: Path
) -> None:
    head = _damaged(heads, tmp_path, "DSpark without a block size")  # llama.cpp asserts on it
    args = ["generate", "--target", str(heads["target"]), "--draft", str(head)]
    done, _ = run_app([*args, "--threads", "1", "--max-tokens", "4", "hello"], timeout_s=180)
    assert done.returncode == 2, done.stderr
    assert "a DSpark head needs dflash.block_size" in done.stderr
    assert not any(word in done.stderr for word in CRASH_WORDS), done.stderr


@pytest.mark.fast
def test_the_dflash_functions_resolve_in_the_installed_libllama() -> None:
    fn = dflash_functions()
    assert fn.model_dflash_selector_top_k is not None
    assert fn.set_embeddings_layer_inp is not None and fn.get_embeddings_nextn is not None


@pytest.mark.fast
def test_a_build_without_the_dflash_functions_is_named_in_the_error() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    with pytest.raises(ModelLoadError, match=r"does not export .*DFlash or DSpark heads"):
        dflash_functions(libc)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_heads_load_and_draft_in_llama_cpp_token_identical(
    heads: dict[str, Path], variant: str
) -> None:
    report = run_module(
        "app.devtools.dflash_probe",
        str(heads["target"]),
        str(heads[variant]),
        "--greedy",
        "200",
        "--prompt",
        PROMPTS[0],
        "--n-max",
        "4",
        timeout_s=240,
    )
    # llama.cpp loaded both and reports the head through the bindings and its metadata
    assert report["loaded"] is True
    assert report["target_layers"] == list(DFLASH_TARGET_LAYERS)
    assert report["block_size"] == DFLASH_BLOCK_SIZE
    assert report["mask_token"] == MASK_TOKEN
    assert report["selector_top_k"] == (4 if variant == "dflash2" else 0)
    assert report["dspark"] is (variant == "dspark")
    assert len(report["tokens"]) == 200
    assert report["identical"] is True
    # drafts accepted and rejected, many times each
    assert report["accepted"] >= 20
    assert report["drafted"] - report["accepted"] >= 20
    first, second, *_ = report["accepted_per_position"]
    assert first > 0
    if variant == "dspark":
        assert second > 0  # the Markov head chains the block past its first token


def test_a_head_that_borrows_the_targets_embeddings_loads_and_drafts(
    heads: dict[str, Path], tmp_path: Path
) -> None:
    """Most exports carry no embedding or output of their own: llama.cpp then reads the
    target's through the head context's ``ctx_other``."""
    head = write_tiny_dflash(tmp_path / "borrowing.gguf", heads["target"], borrowed_embeddings=True)
    report = run_module(
        "app.devtools.dflash_probe",
        str(heads["target"]),
        str(head),
        "--greedy",
        "60",
        "--n-max",
        "4",
        timeout_s=240,
    )
    assert report["loaded"] is True and report["identical"] is True
    assert report["drafted"] > 0


@pytest.mark.skipif(
    not LLAMA_SERVER.exists(),
    reason=f"llama-server is not built at {LLAMA_SERVER} (app.devtools.reference builds it)",
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_llama_server_drafts_with_the_heads_as_the_probe_does(
    heads: dict[str, Path], variant: str
) -> None:
    """llama.cpp's ``llama-server --spec-type draft-dflash|draft-dspark -md HEAD`` answers with
    the target-only tokens, drafting and accepting; the probe drafts and accepts as many."""
    report = run_module(
        "app.devtools.dflash_reference",
        str(heads["target"]),
        str(heads[variant]),
        "--tokens",
        "160",
        "--draft-max",
        "4",
        "--prompts",
        ";".join(PROMPTS),
        timeout_s=600,
    )
    assert report["spec_type"] == ("draft-dspark" if variant == "dspark" else "draft-dflash")
    assert len(report["prompts"]) == len(PROMPTS)
    for row in report["prompts"]:
        assert row["server_equals_target_only"] is True
        assert row["probe_identical"] is True
        assert row["server_drafted"] > 0 and row["server_accepted"] > 0
        assert row["server_equals_probe"] is True
        assert row["server_drafted"] == row["probe_drafted"]
        assert row["server_accepted"] == row["probe_accepted"]


# Heads a faulty converter could write, each refused in words before llama.cpp sees it; the
# options are those of ``write_tiny_dflash`` for a target vocabulary of ``n`` tokens.
V = gguf.GGUFValueType
HYPER_CONNECTIONS: dict[str, FieldSpec] = {  # DeepSeek-V4's DSpark layout, as llama.cpp reads it
    "dflash.hyper_connection.count": (4, V.UINT32, None),
    "dflash.attention.q_lora_rank": (16, V.UINT32, None),
    "dflash.attention.sliding_window": (128, V.UINT32, None),
    "dflash.expert_feed_forward_length": (64, V.UINT32, None),
    "dflash.expert_shared_count": (1, V.UINT32, None),
    "dflash.expert_weights_scale": (1.0, V.FLOAT32, None),
    "dflash.expert_weights_norm": (True, V.BOOL, None),
    "dflash.expert_gating_func": (4, V.UINT32, None),
    "dflash.swiglu_clamp_exp": (10.0, V.FLOAT32, None),
    "dflash.attention.output_group_count": (1, V.UINT32, None),
    "dflash.attention.output_lora_rank": (16, V.UINT32, None),
    "dflash.hyper_connection.sinkhorn_iterations": (3, V.UINT32, None),
    "dflash.hyper_connection.epsilon": (1e-6, V.FLOAT32, None),
    "dflash.attention.compress_ratios": ([0], V.ARRAY, V.UINT32),
}


def _hyper_connections(key: str, value: int) -> dict[str, Any]:
    return {"keys": HYPER_CONNECTIONS | {f"dflash.{key}": (value, V.UINT32, None)}}


def _d2t(ids: np.ndarray) -> dict[str, Any]:
    return {"tensors": {"d2t": ids}}


ABORTING: dict[str, tuple[Callable[[int], dict[str, Any]], str]] = {
    "hyper-connections without an output group": (
        lambda n: _hyper_connections("attention.output_group_count", 0),
        "dflash.attention.output_group_count = 0: the attention output needs at least one group",
    ),
    "hyper-connections without a sliding window": (
        lambda n: _hyper_connections("attention.sliding_window", 0),
        "dflash.attention.sliding_window = 0: a head with hyper-connections drafts in a sliding",
    ),
    "hyper-connections with another gating": (
        lambda n: _hyper_connections("expert_gating_func", 3),
        "dflash.expert_gating_func = 3, but llama.cpp drafts with a head with hyper-connections "
        "only with sqrt-softplus gating (4)",
    ),
    "keys and values of two widths": (
        lambda n: {
            "keys": {"dflash.attention.value_length": (8, V.UINT32, None)},
            "drop_tensor": "blk.0.attn_v.weight",
        },
        "its keys are 16 wide and its values 8 (dflash.attention.key_length and value_length)",
    ),
    "a d2t of floats": (
        lambda n: _d2t(np.arange(n, dtype=np.float32)),
        "tensor d2t should hold INT64 token ids, found F32",
    ),
    "a d2t table": (
        lambda n: _d2t(np.arange(n - n % 7, dtype=np.int64).reshape(7, -1)),
        "tensor d2t should be a list of token ids, found a",
    ),
    "a d2t for another output": (
        lambda n: _d2t(np.arange(n - 1, dtype=np.int64)),
        "but the head's output scores",
    ),
    "a d2t mapping outside the vocabulary": (
        lambda n: _d2t(np.arange(n, dtype=np.int64) + 10**9),
        "tensor d2t maps draft token 0 to token 1,000,000,000, outside the vocabulary of",
    ),
    "a borrowed output scoring another vocabulary": (
        lambda n: {"borrowed_embeddings": True, "extra_tokens": 5},
        "the head has no output of its own and borrows the target's, which scores",
    ),
    "a borrowed embedding without the mask token": (
        lambda n: {"borrowed_embeddings": True, "extra_tokens": 5, "mask_token": n + 4},
        "the head has no token embedding of its own and borrows the target's, which has",
    ),
}


def _target_vocab(heads: dict[str, Path]) -> int:
    return model_facts(validate_gguf_file(heads["target"])).vocab_size


def _refusal(heads: dict[str, Path], tmp_path: Path, options: dict[str, Any]) -> str:
    """What the engine's pre-load check says of a head written with ``options``."""
    head = write_tiny_dflash(tmp_path / "hostile.gguf", heads["target"], **options)
    said = pair_check_refusal(heads["target"], head)
    assert "hostile.gguf" in said
    return said


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(ABORTING))
def test_a_head_llama_cpp_would_abort_on_is_refused_in_words(
    heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    options, words = ABORTING[case]
    assert words in _refusal(heads, tmp_path, options(_target_vocab(heads)))


@pytest.mark.fast
@pytest.mark.parametrize(
    "key", ["dflash.sample_from_anchor", "dflash.has_confidence_head", "dflash.attention.causal"]
)
def test_a_setting_stored_as_an_integer_is_refused_not_read_as_true(
    heads: dict[str, Path], tmp_path: Path, key: str
) -> None:
    """llama.cpp takes these for true only when stored as the bool true (it compares their
    text with "true", or loads them strictly as bools): a UINT8 1 is not read as true."""
    said = _refusal(heads, tmp_path, {"variant": "dspark", "keys": {key: (1, V.UINT8, None)}})
    assert f"{key} should be stored as a GGUF bool (true or false), found UINT8 1" in said


STRICT_TYPES: dict[str, tuple[dict[str, Any], str]] = {
    "block size as INT32": (
        {"keys": {"dflash.block_size": (8, V.INT32, None)}},
        "dflash.block_size should be stored as UINT32 (an unsigned 32-bit integer), found INT32 8",
    ),
    "block size as UINT8": ({"keys": {"dflash.block_size": (8, V.UINT8, None)}}, "found UINT8 8"),
    "block size as UINT64": (
        {"keys": {"dflash.block_size": (8, V.UINT64, None)}},
        "found UINT64 8",
    ),
    "mask token as INT32": (
        {"keys": {"tokenizer.ggml.mask_token_id": (0, V.INT32, None)}},
        "tokenizer.ggml.mask_token_id should be stored as UINT32",
    ),
    "DFlash2 kernel as UINT64": (
        {"variant": "dflash2", "keys": {"dflash.conv_kernel_size": (2, V.UINT64, None)}},
        "dflash.conv_kernel_size should be stored as UINT32",
    ),
    "DFlash2 top-k as INT32": (
        {"variant": "dflash2", "keys": {"dflash.selector_top_k": (4, V.INT32, None)}},
        "dflash.selector_top_k should be stored as UINT32",
    ),
    "hyper-connections as text": (
        {"keys": {"dflash.hyper_connection.count": ("4", V.STRING, None)}},
        "dflash.hyper_connection.count should be stored as UINT32",
    ),
    "target layers as INT64": (
        {"keys": {"dflash.target_layers": ([1, 3], V.ARRAY, V.INT64)}},
        "dflash.target_layers should be an array of INT32 or UINT32 layer numbers, found an "
        "INT64 array of 2 items",
    ),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(STRICT_TYPES))
def test_a_key_llama_cpp_reads_with_one_type_is_refused_in_another(
    heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    options, words = STRICT_TYPES[case]
    assert words in _refusal(heads, tmp_path, options)


@pytest.mark.fast
def test_target_layers_stored_as_uint32_pass_as_llama_cpp_takes_them(
    heads: dict[str, Path], tmp_path: Path
) -> None:
    layers: FieldSpec = (list(DFLASH_TARGET_LAYERS), V.ARRAY, V.UINT32)
    head = write_tiny_dflash(
        tmp_path / "u32.gguf", heads["target"], keys={"dflash.target_layers": layers}
    )
    check_local_pair(heads["target"], head)


UNFIT: dict[str, tuple[dict[str, Any], str]] = {
    "no width": (
        {"keys": {"dflash.embedding_length": None}},
        "a DFlash head needs dflash.embedding_length, its width; the header names none",
    ),
    "no layer count": (
        {"keys": {"dflash.block_count": None}},
        "a DFlash head needs dflash.block_count, its layer count; the header names none",
    ),
    "fc for fewer target layers": (
        {"keys": {"dflash.target_layers": ([0, 1, 3], V.ARRAY, V.INT32)}},
        "fc.weight is 128 x 64, but the head reads 3 target layers (dflash.target_layers) of "
        "64: it should be 192 x 64",
    ),
    "DFlash2 groups that do not split the width": (
        {"variant": "dflash2", "keys": {"dflash.conv_group_size": (7, V.UINT32, None)}},
        "dflash.conv_group_size = 7 does not divide the head's width of 64",
    ),
    "DFlash2 top-k too large for the width": (
        {"variant": "dflash2", "keys": {"dflash.selector_top_k": (8, V.UINT32, None)}},
        "dflash.selector_top_k = 8 needs a head at least 72 wide (top-k x (top-k + 1)) for its "
        "selector; this one is 64",
    ),
    "layers declared and not written": (
        {"keys": {"dflash.block_count": (2, V.UINT32, None)}},
        "tensors blk.1.attn_norm.weight and 9 more are missing",
    ),
}


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(UNFIT))
def test_a_key_or_size_llama_cpp_checks_at_load_is_refused_in_words_before(
    heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    options, words = UNFIT[case]
    assert words in _refusal(heads, tmp_path, options)


def _check_pair(target: Path, draft: Path) -> int:
    from app.cli.hub import cmd_check_pair

    return cmd_check_pair(argparse.Namespace(target=str(target), draft=str(draft)))


@pytest.mark.fast
def test_check_pair_refuses_a_head_whose_tensor_data_is_cut_short(
    heads: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's check refuses it; check-pair uses the same check."""
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(heads["dflash"].read_bytes()[:-100])
    assert _check_pair(heads["target"], cut) == 2
    assert "cut.gguf is truncated: its tensors need" in capsys.readouterr().err


@pytest.mark.fast
def test_check_pair_words_an_error_met_while_comparing_the_pair(
    heads: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target key read only when the head is compared with it is refused like any other."""
    target = tmp_path / "odd-target.gguf"
    kvs = [
        kv_string("general.architecture", "llama"),
        kv_u32("llama.block_count", 4),
        kv_u32("llama.embedding_length", 64),
        kv_string("llama.attention.key_length", "wide"),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
    ]
    target.write_bytes(raw_gguf(kvs))
    assert _check_pair(target, heads["dflash"]) == 2
    said = capsys.readouterr().err
    assert "llama.attention.key_length should be an integer, found the text 'wide'" in said
