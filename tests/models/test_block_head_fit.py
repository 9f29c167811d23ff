"""Memory fit counts a block drafter (DFlash, DFlash2, DSpark) as the engine has llama.cpp
allocate it: the head's weights, its own context's cache at the target's context size, its
compute buffer and block outputs, and the target's layer inputs kept for it; checked against
what llama.cpp logs when the engine loads the tiny synthetic pairs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import app.engine.llama.runtime as runtime
from app.devtools.test_models.synthetic_dflash import (
    DFLASH_BLOCK_SIZE,
    DFLASH_TARGET_LAYERS,
    VARIANTS,
    write_dflash_target,
    write_tiny_dflash,
)
from app.engine.config import ModelSpec
from app.engine.engine import Engine
from app.gguf.facts import ModelFacts, model_facts
from app.gguf.reader import read_local_header
from app.models.fit import N_UBATCH, estimate_pair, gib, memory_text, model_memory
from tests.cores import THREADS

MIB = 1 << 20
KINDS = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("dflash-fit")
    target = write_dflash_target(folder / "target.gguf")
    made = {"target": target}
    for variant in VARIANTS:
        made[variant] = write_tiny_dflash(folder / f"{variant}.gguf", target, variant=variant)
    return made


def _facts(path: Path) -> ModelFacts:
    return model_facts(read_local_header(path))


@pytest.mark.fast
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_estimate_counts_the_heads_context_and_the_targets_layer_inputs(
    pair: dict[str, Path], variant: str
) -> None:
    target, head = _facts(pair["target"]), _facts(pair[variant])
    head_bytes = pair[variant].stat().st_size
    estimate = estimate_pair(target, 1 << 30, head, head_bytes, 4096, "q8_0")
    draft = estimate.draft
    assert draft is not None and draft.block_variant == KINDS[variant]
    assert draft.weights == head_bytes
    # the head's context is made with llama.cpp's defaults: an f16 cache whatever the pair's
    assert draft.kv == head.kv_bytes(4096, 2) == 2 * MIB  # 1 layer, 8 KV heads of 16 + 16
    plain = model_memory(head, head_bytes, 4096, "q8_0", snapshots=0)
    assert draft.kv > plain.kv
    # a batch of target features (2 layers of 64) comes into the head's graph
    assert draft.compute == plain.compute + 4 * N_UBATCH * len(DFLASH_TARGET_LAYERS) * 64
    # the block's logits, and next-token rows: DFlash2's selector fills one a batch position
    rows = N_UBATCH if variant == "dflash2" else DFLASH_BLOCK_SIZE
    assert draft.block_outputs == 4 * (DFLASH_BLOCK_SIZE * head.vocab_size + rows * 64)
    # each read layer's inputs, a batch long: in the target's graph and on the host
    assert draft.target_layer_inputs == 2 * 4 * N_UBATCH * 2 * 64
    assert draft.total == (
        draft.weights + draft.kv + draft.compute + draft.block_outputs + draft.target_layer_inputs
    )
    assert draft.total > plain.total
    assert estimate.needed == estimate.target.total + draft.total
    text = memory_text(estimate)
    assert f"{KINDS[variant]} context" in text and "layer inputs" in text
    # the target's own cache and compute are named apart from the head's context
    assert f"KV cache {gib(estimate.target.kv)}, compute {gib(estimate.target.compute)}" in text


@pytest.mark.fast
def test_a_plain_draft_model_is_not_a_block_context(pair: dict[str, Path]) -> None:
    target = _facts(pair["target"])
    estimate = estimate_pair(target, 1 << 20, target, 1 << 20, 1024)
    assert estimate.draft is not None and not estimate.draft.block_variant
    assert estimate.draft.block_context == 0
    assert "context" not in memory_text(estimate)


def _buffers(lines: list[str]) -> tuple[list[float], list[float]]:
    """(each KV cache's size, each compute reservation's size summed over its devices), in
    MiB, in the order llama.cpp logged them."""
    caches: list[float] = []
    reservations: list[float] = []
    for line in lines:
        if "sched_reserve: worst-case" in line:
            reservations.append(0.0)
        elif match := re.search(r"compute buffer size = +([\d.]+) MiB", line):
            reservations[-1] += float(match.group(1))
        elif match := re.search(r"llama_kv_cache: size = +([\d.]+) MiB", line):
            caches.append(float(match.group(1)))
    return caches, reservations


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_estimate_matches_what_llama_cpp_allocates(
    pair: dict[str, Path], variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp's own log while the engine loads the pair at 2048 tokens: the head's cache
    to its 0.01 MiB rounding; the target's compute buffer grows by the layer inputs' graph
    half, to the same rounding; the head's compute buffer is never more than the estimate,
    which is over by at most the attention scores that flash attention leaves out (the tiny
    vocabulary makes those the largest intermediate); the head's weights as mapped are at most
    its file, short by less than its header."""
    n_ctx = 2048
    target, head = _facts(pair["target"]), _facts(pair[variant])
    draft = estimate_pair(target, 0, head, pair[variant].stat().st_size, n_ctx).draft
    assert draft is not None
    lines: list[str] = []
    runtime.ensure_backend()
    monkeypatch.setattr(runtime, "_log_capture", lines)
    engine = Engine(
        ModelSpec(str(pair["target"]), n_ctx=n_ctx, n_threads=THREADS),
        ModelSpec(str(pair[variant]), n_ctx=n_ctx, n_threads=THREADS),
    )
    engine.close()
    monkeypatch.setattr(runtime, "_log_capture", None)
    caches, reservations = _buffers(lines)
    # the target's context, the head's, then the target's again once it hands out layer inputs
    assert len(caches) == 2 and len(reservations) == 3, lines
    assert abs(caches[1] - draft.kv / MIB) <= 0.01
    graph_half = draft.target_layer_inputs / 2 / MIB
    assert abs(reservations[2] - reservations[0] - graph_half) <= 0.01
    scores = 4 * N_UBATCH * head.n_head * n_ctx / MIB
    assert reservations[1] <= draft.compute / MIB <= reservations[1] + scores
    mapped = [
        float(m.group(1))
        for line in lines
        if (m := re.search(r"model buffer size = +([\d.]+) MiB", line))
    ]
    assert mapped[1] <= draft.weights / MIB <= mapped[1] + 0.5
