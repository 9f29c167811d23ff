"""The GPU check's parts that run without a GPU: what ``prepare`` packs, the models it writes
at a chosen shape, and SpecDeck against llama-server on one model (a CPU build here, the
same code the device runs with every layer on the GPU)."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

import gguf
import pytest

from app.devtools.gpu_check.prepare import (
    DONOR_TOKENIZER,
    distribution_files,
    needed_by_build,
    pack_python,
)
from app.devtools.test_models.synthetic import TinyShape, write_tiny_llama, write_tiny_qwen35


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("CMakeLists.txt", True),
        ("ggml/src/ggml-cuda/mmq.cu", True),
        ("ggml/src/ggml-cuda/template-instances/mmq-instance-q4_k.cu", True),
        ("ggml/src/ggml-cpu/ggml-cpu.c", True),
        ("ggml/src/ggml.c", True),
        ("ggml/src/ggml-vulkan/ggml-vulkan.cpp", False),
        ("ggml/src/ggml-metal/ggml-metal.m", False),
        ("tools/server/server-context.cpp", True),
        ("tools/server/tests/unit/test_basic.py", False),
        ("tools/mtmd/clip.cpp", True),
        ("tools/mtmd/test-2.mp3", False),
        ("tools/ui/ui.cpp.in", True),
        ("tools/ui/src/app.html", False),
        ("scripts/ui-assets.cmake", True),
        ("scripts/sync_vendor.py", False),
        ("docs/build.md", False),
        ("models/ggml-vocab-llama-spm.gguf", False),
        ("tests/test-backend-ops.cpp", False),
        ("examples/simple/simple.cpp", False),
        ("convert_hf_to_gguf.py", False),
    ],
)
def test_the_pack_keeps_what_a_cuda_server_build_reads(path: str, kept: bool) -> None:
    assert needed_by_build(PurePosixPath(path)) is kept


def test_llama_cpp_travels_without_its_compiled_libraries() -> None:
    inside = [name for _, name in distribution_files("llama_cpp_python")]
    assert "llama_cpp/llama_cpp.py" in inside
    assert any(name.endswith(".dist-info/METADATA") for name in inside)  # version() reads it
    assert not [name for name in inside if ".so" in name or "/lib/" in name]


def _header(path: Path) -> dict[str, int]:
    fields = gguf.GGUFReader(str(path)).fields
    keys = ("embedding_length", "block_count", "feed_forward_length")
    keys += ("attention.head_count", "attention.head_count_kv")
    return {k.rpartition(".")[2]: int(fields[f"llama.{k}"].parts[-1][0]) for k in keys}


def test_the_carried_donor_tokenizer_makes_a_pair_at_the_chosen_shape(tmp_path: Path) -> None:
    from app.devtools.test_models.synthetic import write_vocab_donor_pair

    donor = write_tiny_llama(tmp_path / "donor.gguf")
    pack_python(tmp_path / "python.tar.gz", donor)
    with tarfile.open(tmp_path / "python.tar.gz") as archive:
        archive.extract(DONOR_TOKENIZER, tmp_path / "unpacked", filter="data")
    carried = tmp_path / "unpacked" / DONOR_TOKENIZER
    assert gguf.GGUFReader(str(carried)).tensors == []  # the tokenizer without the weights
    shape = TinyShape(n_embd=16, n_layer=3, n_head=2, n_head_kv=1, n_ff=24, n_ctx=256)
    target, draft = write_vocab_donor_pair(
        carried, tmp_path / "t.gguf", tmp_path / "d.gguf", scale=3, small_shape=shape
    )
    assert _header(draft) == {
        "embedding_length": 16,
        "block_count": 3,
        "head_count": 2,
        "head_count_kv": 1,
        "feed_forward_length": 24,
    }
    assert _header(target) == {
        "embedding_length": 48,
        "block_count": 3,
        "head_count": 6,
        "head_count_kv": 3,
        "feed_forward_length": 72,
    }
    tokens = gguf.GGUFReader(str(target)).fields["tokenizer.ggml.tokens"]
    assert len(tokens.data) == len(gguf.GGUFReader(str(donor)).fields["tokenizer.ggml.tokens"].data)


def test_specdeck_and_llama_server_answer_the_mtp_model_alike(tmp_path: Path) -> None:
    from app.devtools.gpu_check.check import versus_server
    from app.devtools.reference import llama_cpp_tool

    model = write_tiny_qwen35(tmp_path / "mtp.gguf", branch_scale=0.3)
    report = versus_server(llama_cpp_tool("llama-server"), model, None, 3, 24, 1, 1)
    assert report["identical_to_server"]
    assert report["identical_to_target_only"]
    assert report["tokens"] > 0
    assert report["specdeck_vs_server"] > 0 and report["server_speedup"] > 0
    # the split of a step, beside the server's whole steps
    assert report["specdeck_steps"] > 0 and report["specdeck_verify_ms_per_step"] > 0
    assert report["specdeck_draft_ms_per_step"] > 0 and report["specdeck_host_ms_per_step"] > 0
    assert report["server_ms_per_step"] > 0 and report["server_target_only_ms_per_step"] > 0
    assert report["specdeck_target_only_ms_per_step"] > 0


def test_the_pass_phase_prices_each_size_in_a_fresh_process_and_says_where_the_chain_runs(
    tmp_path: Path,
) -> None:
    """On this CPU build the sampler chain stays on the host: the phase says why and times
    no chained passes; every size has its first three runs and two medians."""
    from app.devtools.gpu_check import pass_shapes

    model = write_tiny_llama(tmp_path / "target.gguf")
    figures = pass_shapes.measure(model, 256, 1)
    assert figures["sampler_chain"].startswith("host")
    assert "after_a_single_pass_with_chain" not in figures
    table = pass_shapes.summary(figures)
    assert sorted(table, key=int) == [str(n) for n in pass_shapes.PASS_SIZES]
    for row in table.values():
        assert len(row["first_uses"]) == pass_shapes.FIRST_USES
        assert all(ms > 0 for ms in (*row["first_uses"], row["repeated"], row["between_singles"]))
