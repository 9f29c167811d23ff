"""The GGUF header says how a model drafts (its own MTP layers, an assistant, an EAGLE-3 /
DFlash head) and absurd next-token counts or layer ids are refused before any load."""

from __future__ import annotations

import argparse
import math
import struct
from pathlib import Path

import pytest

from app.errors import ModelLoadError
from app.gguf.block_heads import BlockDrafting
from app.gguf.check import validate_gguf_file
from app.gguf.draft_heads import EAGLE3_LAYER_TENSORS
from app.gguf.facts import NEXTN_KEY, SelfDrafting, model_facts, self_drafting
from app.gguf.reader import GGUFFormatError, read_local_header
from tests.ggufs import (
    GGUF_BOOL,
    GGUF_I32,
    GGUF_STRING,
    GGUF_U32,
    enc_str,
    kv_array,
    kv_string,
    kv_tokens,
    kv_u32,
    raw_gguf,
    spm_tokens,
    tensor_entry,
)
from tests.hub.fake_hub import FakeHub, FakeRepo

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def kv_i32(key: str, value: int) -> bytes:
    return enc_str(key) + struct.pack("<Ii", GGUF_I32, value)


def kv_bool(key: str, value: bool) -> bytes:
    return enc_str(key) + struct.pack("<I?", GGUF_BOOL, value)


def kv_u32s(key: str, values: list[int]) -> bytes:
    return kv_array(key, GGUF_U32, len(values), b"".join(struct.pack("<I", v) for v in values))


def header_file(tmp_path: Path, arch: str, *extra: bytes, block_count: int = 2) -> Path:
    kvs = [
        kv_string("general.architecture", arch),
        kv_string("general.name", "raw"),
        kv_u32(f"{arch}.block_count", block_count),
        kv_u32(f"{arch}.embedding_length", 64),
        kv_u32(f"{arch}.attention.head_count", 4),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
        *extra,
    ]
    path = tmp_path / f"{arch}.gguf"
    path.write_bytes(raw_gguf(kvs))
    return path


def nextn(arch: str) -> str:
    return NEXTN_KEY.format(arch=arch)


def whole_assistant(tmp_path: Path) -> Path:
    """A Gemma 4 assistant header with the keys llama.cpp needs to load it: its target's
    width, every block a next-token block, one sliding-window block."""
    arch = "gemma4-assistant"
    return header_file(
        tmp_path,
        arch,
        kv_u32(f"{arch}.embedding_length_out", 128),
        kv_u32(nextn(arch), 2),
        kv_array(f"{arch}.attention.sliding_window_pattern", GGUF_BOOL, 2, b"\x01\x00"),
    )


def whole_eagle3(tmp_path: Path, target_layers: list[int]) -> Path:
    """An EAGLE-3 head for a 64-wide target reading ``target_layers``: its one decoder layer's
    tensors (F32, their data in the file), the keys llama.cpp needs to load it."""
    shapes = {"fc.weight": (3 * 64, 64), "output_norm.weight": (64,)}
    for name in EAGLE3_LAYER_TENSORS:
        shapes[f"blk.0.{name}.weight"] = (64,) if "norm" in name else (64, 64)
    tensors, offset = [], 0
    for name, shape in shapes.items():
        tensors.append(tensor_entry(name, shape, 0, offset))
        offset += -(-4 * math.prod(shape) // 32) * 32
    kvs = [
        kv_string("general.architecture", "eagle3"),
        kv_string("general.name", "raw"),
        kv_u32("eagle3.block_count", 1),
        kv_u32("eagle3.embedding_length", 64),
        kv_u32("eagle3.attention.head_count", 4),
        kv_u32("eagle3.target_hidden_size", 64),
        enc_str("eagle3.attention.layer_norm_rms_epsilon") + struct.pack("<If", 6, 1e-6),
        kv_u32s("eagle3.target_layers", target_layers),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
    ]
    path = tmp_path / "eagle3.gguf"
    path.write_bytes(raw_gguf(kvs, tensors, data=bytes(offset)))
    return path


def test_mtp_layers_are_seen_in_the_header(tmp_path: Path) -> None:
    path = header_file(tmp_path, "qwen35", kv_u32(nextn("qwen35"), 1))
    facts = model_facts(read_local_header(path))
    assert facts.drafting == SelfDrafting("mtp", 1)
    assert facts.drafting.label == "drafts for itself (MTP, 1 head)"
    three = header_file(tmp_path, "step35", kv_u32(nextn("step35"), 3), block_count=47)
    assert model_facts(read_local_header(three)).drafting.label == (
        "drafts for itself (MTP, 3 heads)"
    )


def test_a_plain_model_and_a_zero_count_draft_nothing(tmp_path: Path) -> None:
    plain = model_facts(read_local_header(header_file(tmp_path, "llama"))).drafting
    assert plain == SelfDrafting("") and plain.label == ""
    zero = header_file(tmp_path, "qwen35", kv_u32(nextn("qwen35"), 0))
    assert self_drafting(read_local_header(zero)).method == ""


def test_assistant_and_head_architectures_are_named(tmp_path: Path) -> None:
    assistant = self_drafting(read_local_header(header_file(tmp_path, "gemma4-assistant")))
    assert assistant.method == "assistant"
    assert "assistant" in assistant.label
    eagle = header_file(tmp_path, "eagle3", kv_u32s("eagle3.target_layers", [2, 14, 27]))
    facts = model_facts(read_local_header(eagle))
    assert facts.drafting == SelfDrafting("eagle3", 0, (2, 14, 27))
    assert facts.drafting.label == "EAGLE-3 head"
    dflash = header_file(tmp_path, "dflash", kv_u32s("dflash.target_layers", [1, 5, 9, 13]))
    # no block size, mask token or tensors named: llama.cpp's defaults (a 16-token DFlash block)
    # borrowing its target's token embedding and output
    tokens = len(spm_tokens(8))
    block = BlockDrafting(
        "DFlash", 16, True, False, -1, 64, vocab_size=tokens, own_embeddings=False
    )
    assert self_drafting(read_local_header(dflash)) == SelfDrafting(
        "dflash", 0, (1, 5, 9, 13), block=block
    )


ABSURD = {
    "more heads than blocks": (kv_u32(nextn("qwen35"), 3), "more than the 2 blocks"),
    # the vendored llama.cpp asserts (aborting the process) on two heads for qwen35
    "two heads where llama.cpp runs one": (kv_u32(nextn("qwen35"), 2), "exactly one"),
    # llama.cpp reads the count as a UINT32 and fails the load on any other stored type
    "negative": (kv_i32(nextn("qwen35"), -1), "should be stored as UINT32.*found INT32 -1"),
    "huge": (kv_u32(nextn("qwen35"), 0xFFFF_FFFF), "out of range"),
    "text": (kv_string(nextn("qwen35"), "1"), "should be stored as UINT32.*found the text"),
    "bool": (kv_bool(nextn("qwen35"), True), "should be stored as UINT32.*found BOOL"),
    "array": (kv_u32s(nextn("qwen35"), [1]), "should be stored as UINT32.*found a UINT32 array"),
}


@pytest.mark.parametrize("case", sorted(ABSURD))
def test_absurd_next_token_counts_are_refused_by_name(tmp_path: Path, case: str) -> None:
    kv, message = ABSURD[case]
    path = header_file(tmp_path, "qwen35", kv)
    header = read_local_header(path)
    with pytest.raises(GGUFFormatError, match=message) as caught:
        model_facts(header)
    assert "qwen35.nextn_predict_layers" in str(caught.value)
    assert path.name in str(caught.value)


HEAD_ABSURD = {
    "missing": ("eagle3", None, "found nothing"),
    "two layers for eagle3": ("eagle3", [3, 9], "exactly 3 target layers"),
    "layer id past any model": ("dflash", [1, 9999], "from 0 to 511"),
    "empty": ("dflash", [], "a UINT32 array of 0 items"),
    "text": ("eagle3", "2,14,27", "the text"),
}


@pytest.mark.parametrize("case", sorted(HEAD_ABSURD))
def test_absurd_head_target_layers_are_refused(tmp_path: Path, case: str) -> None:
    arch, layers, message = HEAD_ABSURD[case]
    key = f"{arch}.target_layers"
    if layers is None:
        extra: tuple[bytes, ...] = ()
    elif isinstance(layers, str):
        extra = (kv_string(key, layers),)
    else:
        extra = (kv_u32s(key, layers),)
    header = read_local_header(header_file(tmp_path, arch, *extra))
    with pytest.raises(GGUFFormatError, match=message) as caught:
        self_drafting(header)
    assert key in str(caught.value)


def test_a_local_file_with_absurd_heads_is_refused_before_any_load(tmp_path: Path) -> None:
    # llama.cpp asserts n_layer_nextn <= block_count and aborts the whole process
    path = header_file(tmp_path, "qwen35", kv_u32(nextn("qwen35"), 5))
    with pytest.raises(ModelLoadError, match=r"nextn_predict_layers = 5 is more than the 2"):
        validate_gguf_file(path)


def test_string_arrays_are_not_layer_ids(tmp_path: Path) -> None:
    layers = kv_array("eagle3.target_layers", GGUF_STRING, 3, b"".join(enc_str(s) for s in "abc"))
    header = read_local_header(header_file(tmp_path, "eagle3", layers))
    with pytest.raises(GGUFFormatError, match="eagle3.target_layers"):
        self_drafting(header)


def _check_pair(target: Path | str, draft: Path | str | None) -> int:
    from app.cli.hub import cmd_check_pair

    return cmd_check_pair(
        argparse.Namespace(target=str(target), draft=None if draft is None else str(draft))
    )


def test_check_pair_names_the_drafting_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = header_file(tmp_path, "qwen35", kv_u32(nextn("qwen35"), 1))
    draft = header_file(tmp_path, "llama")
    assert _check_pair(target, draft) == 0
    assert capsys.readouterr().out.splitlines() == [
        "target: MTP, 1 head",
        "draft: plain model",
        "compatible",
    ]
    (tmp_path / "bad").mkdir()
    absurd = header_file(tmp_path / "bad", "qwen35", kv_u32(nextn("qwen35"), 7))
    assert _check_pair(absurd, draft) == 2
    assert "qwen35.nextn_predict_layers = 7 is more than the 2 blocks" in capsys.readouterr().err


def test_check_pair_with_a_target_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mtp = header_file(tmp_path, "step35", kv_u32(nextn("step35"), 2), block_count=5)
    assert _check_pair(mtp, None) == 0
    assert capsys.readouterr().out.splitlines() == [
        "target: MTP, 2 heads",
        "drafts for itself: no draft model needed",
    ]
    assert _check_pair(header_file(tmp_path, "llama"), None) == 0
    assert capsys.readouterr().out.splitlines()[0] == "target: plain model"


def test_check_pair_explains_a_head_given_as_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assistant = whole_assistant(tmp_path)
    assert _check_pair(assistant, None) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "target: assistant draft for gemma4"
    assert out[1].startswith("not a target: an assistant draft for gemma4 drafts for another")
    eagle = whole_eagle3(tmp_path, [2, 14, 27])
    assert _check_pair(eagle, header_file(tmp_path, "llama")) == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        "target: EAGLE-3 head",
        "draft: plain model",
    ]


def test_check_pair_refuses_a_head_trained_for_another_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """llama.cpp aborts when an EAGLE-3 head reads a layer its target lacks: check-pair says so
    from the two headers; an assistant for another architecture is refused likewise."""
    (tmp_path / "t").mkdir()
    target = header_file(tmp_path / "t", "llama", block_count=16)
    deep = whole_eagle3(tmp_path, [2, 14, 27])
    assert _check_pair(target, deep) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        "incompatible: the head reads target layers [2, 14, 27], but the target has 16: "
        "it was trained for a deeper model"
    )
    (tmp_path / "fits").mkdir()
    fits = whole_eagle3(tmp_path / "fits", [2, 8, 15])
    assert _check_pair(target, fits) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "compatible"
    assistant = whole_assistant(tmp_path)
    assert _check_pair(target, assistant) == 1
    assert "an assistant for gemma4 models cannot draft for a llama model" in (
        capsys.readouterr().out
    )


def test_check_pair_reads_hub_headers_by_range(
    tmp_path: Path, fake_hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a Hub (here the fake one on 127.0.0.1), as the catalog's entries are checked."""
    target = header_file(tmp_path, "qwen35", kv_u32(nextn("qwen35"), 1))
    fake_hub.add(FakeRepo("acme/Self-MTP-GGUF", {"self-Q8_0.gguf": target.read_bytes()}))
    assert _check_pair("acme/Self-MTP-GGUF:self-Q8_0.gguf", None) == 0
    assert capsys.readouterr().out.splitlines()[0] == "target: MTP, 1 head"
    assert any(e.range for e in fake_hub.requests_for("self-Q8_0.gguf"))
