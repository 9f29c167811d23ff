"""Memory fit of a pair and the preselected quantization."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.llama.hardware import Device, Hardware, detect_hardware
from app.gguf.facts import ModelFacts, model_facts
from app.gguf.reader import read_local_header
from app.models.fit import (
    MARGIN_FIXED,
    FitLabel,
    assess,
    best_fit,
    estimate_pair,
    model_memory,
)
from tests.ggufs import write_gguf

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

GIB = 1 << 30


def facts(
    n_layer: int = 32,
    n_head: int = 32,
    n_head_kv: int = 8,
    n_embd: int = 4096,
    vocab: int = 128_256,
) -> ModelFacts:
    head_dim = n_embd // n_head
    return ModelFacts(
        "llama",
        "m",
        n_layer,
        n_head,
        n_head_kv,
        n_embd,
        head_dim,
        head_dim,
        131_072,
        15,
        "Q4_K_M",
        0,
        0,
        vocab,
    )


def gpu(free_gib: float, index: int = 0, free: int | None = None) -> Device:
    free = int(free_gib * GIB) if free is None else free
    return Device(f"CUDA{index}", f"GPU {index}", "GPU", free, 24 * GIB)


def test_kv_cache_formula() -> None:
    llama8b = facts()
    # 32 layers x 8 kv heads x (128 + 128) x 8192 positions x 2 bytes = 1 GiB
    assert model_memory(llama8b, 0, 8192, "f16").kv == GIB
    assert model_memory(llama8b, 0, 8192, "q8_0").kv == GIB * 17 // 32
    with pytest.raises(ValueError, match="unknown KV cache type"):
        model_memory(llama8b, 0, 8192, "q3")


def test_labels_against_gpu_and_ram() -> None:
    est = estimate_pair(facts(), int(4.6 * GIB), facts(16, 32, 8, 2048), int(1.3 * GIB), 8192)
    assert 7 * GIB < est.needed < 9 * GIB
    big = Hardware("CUDA", (gpu(20),), 64 * GIB, 32 * GIB, 8)
    assert assess(est, big).label is FitLabel.FITS
    exact = Hardware("CUDA", (gpu(0, free=est.needed + MARGIN_FIXED // 2),), 64 * GIB, 0, 8)
    assert assess(est, exact).label is FitLabel.TIGHT
    spill = Hardware("CUDA", (gpu(6),), 64 * GIB, 32 * GIB, 8)
    result = assess(est, spill)
    assert result.label is FitLabel.TIGHT and result.where == "GPU + RAM"
    assert "CPU" in result.message
    tiny = Hardware("CPU", (), 8 * GIB, 4 * GIB, 8)
    result = assess(est, tiny)
    assert result.label is FitLabel.NO_FIT and "smaller quantization" in result.message


def test_layers_split_across_gpus_by_free_memory() -> None:
    est = estimate_pair(facts(), 4 * GIB, None, 0, 4096)
    two = Hardware("CUDA", (gpu(12, 0), gpu(4, 1)), 64 * GIB, 32 * GIB, 8)
    result = assess(est, two)
    assert result.label is FitLabel.FITS
    (_, first), (_, second) = result.per_device
    assert first == pytest.approx(3 * second, rel=0.01)


def test_best_fit_prefers_recommended_then_quality() -> None:
    hw = Hardware("CUDA", (gpu(8),), 32 * GIB, 16 * GIB, 8)
    options = []
    for quant, size in (("Q8_0", 8.1), ("Q6_K", 6.3), ("Q4_K_M", 4.6), ("Q2_K", 3.0)):
        options.append((quant, assess(estimate_pair(facts(), int(size * GIB), None, 0, 4096), hw)))
    labels = {q: r.label for q, r in options}
    assert labels["Q8_0"] is not FitLabel.FITS and labels["Q4_K_M"] is FitLabel.FITS
    expected = "Q6_K" if labels["Q6_K"] is FitLabel.FITS else "Q4_K_M"
    assert best_fit(options) == expected
    assert best_fit(options, preferred="Q4_K_M") == "Q4_K_M"
    nothing = [("Q8_0", assess(estimate_pair(facts(), 80 * GIB, None, 0, 4096), hw))]
    assert best_fit(nothing) is None


def test_estimate_from_a_real_header(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", n_layer=2, n_embd=64, n_head=4, n_head_kv=2)
    f = model_facts(read_local_header(path))
    mem = model_memory(f, path.stat().st_size, 1024, "f16")
    assert mem.kv == 2 * 2 * 32 * 1024 * 2
    assert mem.weights == path.stat().st_size and mem.compute > 0


def test_memory_is_known_on_windows_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once 0 bytes of RAM on Windows (no /proc, no sysctl): every quantization "did not
    fit". The platform is faked; the memory comes from psutil wherever it runs."""
    import os
    import platform
    import sys

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    monkeypatch.delattr(os, "sysconf", raising=False)
    hw = detect_hardware()
    assert hw.ram_total > 1 << 30 and 0 < hw.ram_free <= hw.ram_total


def test_detect_hardware_runs_here() -> None:
    hw = detect_hardware()
    assert hw.ram_total > 0 and 0 < hw.ram_free <= hw.ram_total
    assert hw.backend in ("CUDA", "Metal", "CPU")


def test_context_beyond_the_trained_length_does_not_fit() -> None:
    from dataclasses import replace

    trained = replace(facts(), context_length=32_768)
    roomy = Hardware("CPU", (), 512 * GIB, 512 * GIB, 8)
    within = assess(estimate_pair(trained, 4 * GIB, None, 0, 32_768), roomy)
    assert within.label is FitLabel.FITS
    beyond = assess(estimate_pair(trained, 4 * GIB, None, 0, 262_144), roomy)
    assert beyond.label is FitLabel.NO_FIT
    assert "262,144" in beyond.message and "32,768" in beyond.message
    # The shorter of the two trained lengths bounds a pair.
    draft = replace(facts(n_layer=4), context_length=8_192)
    pair = assess(estimate_pair(trained, 4 * GIB, draft, GIB, 16_384), roomy)
    assert pair.label is FitLabel.NO_FIT and "8,192" in pair.message


def test_every_known_quantization_has_a_place_in_both_orders() -> None:
    import re

    from app.models.fit import DRAFT_SPEED_ORDER, QUALITY_ORDER, draft_speed_rank, quality_rank
    from app.models.hub import quant_from_filename

    names = [
        "Q4_1",
        "Q5_1",
        "Q4_0",
        "Q8_0",
        "Q6_K",
        "Q2_K",
        "IQ1_S",
        "IQ1_M",
        "IQ2_XXS",
        "IQ3_XXS",
        "IQ4_NL",
        "IQ4_XS",
        "TQ1_0",
        "TQ2_0",
        "MXFP4",
        "Q3_K_XL",
        "Q4_K_L",
        "Q5_K_S",
        "Q6_K_L",
        "BF16",
        "F16",
        "F32",
    ]
    for name in names:
        assert quant_from_filename(f"model-{name}.gguf") == name
        assert quality_rank(name) < len(QUALITY_ORDER), name
        assert draft_speed_rank(name) < len(DRAFT_SPEED_ORDER), name
    assert sorted(QUALITY_ORDER) == sorted(DRAFT_SPEED_ORDER)
    assert all(re.fullmatch(r"[A-Z0-9_]+", q) for q in QUALITY_ORDER)
    # A draft prefers the cheapest 4-bit file, then more bits; below 4 bits only after that.
    assert (
        draft_speed_rank("Q4_1")
        < draft_speed_rank("Q8_0")
        < draft_speed_rank("Q2_K")
        < draft_speed_rank("F16")
    )
