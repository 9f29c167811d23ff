"""Memory fit counts what drafting with the target's own next-token (MTP) layers costs: the
MTP context's cache and compute buffer, and a hybrid model's recurrent-state snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.engine.llama.hardware import Hardware
from app.gguf.facts import model_facts
from app.gguf.reader import read_local_header
from app.models.fit import (
    ROLLBACK_SNAPSHOTS,
    FitLabel,
    assess,
    estimate_pair,
    memory_text,
    model_memory,
)
from tests.ggufs import qwen36_27b_header

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

MIB = 1 << 20
GIB = 1 << 30


def test_qwen36_27b_caches_match_what_llama_cpp_allocates(tmp_path: Path) -> None:
    facts = model_facts(read_local_header(qwen36_27b_header(tmp_path / "q.gguf")))
    assert facts.drafting.name == "MTP, 1 head"
    # 16 of the 64 trunk layers are attention; the next-token block is cached only in the
    # MTP context (a 27B MTP user's log: "544.00 MiB (262144 cells, 1 layers), K (q8_0)")
    assert facts.attention_layers == 16
    assert model_memory(facts, 0, 262_144, "q8_0", mtp=True).mtp_kv == 544 * MIB
    assert model_memory(facts, 0, 262_144, "q8_0").kv == 16 * 544 * MIB
    # 48 gated delta-net layers, one state each: the "150 MiB recurrent state" users report
    assert 149 * MIB < facts.recurrent_state_bytes < 151 * MIB
    # the next-token layer's weights are counted from its own tensors (inside the file size)
    assert facts.mtp_weight_bytes == 10240 * 5120 // 32 * 34


def test_mtp_adds_its_context_and_snapshots_to_the_pair(tmp_path: Path) -> None:
    facts = model_facts(read_local_header(qwen36_27b_header(tmp_path / "q.gguf")))
    weights = 16 * GIB
    plain = estimate_pair(facts, weights, None, 0, 32_768, "f16")
    mtp = estimate_pair(facts, weights, None, 0, 32_768, "f16", mtp=True)
    assert not plain.mtp and mtp.mtp
    assert mtp.target.weights == plain.target.weights == weights  # the file holds the heads
    added = mtp.needed - plain.needed
    assert added == mtp.target.mtp_kv + mtp.target.mtp_compute
    assert mtp.target.mtp_kv == 32_768 * 4 * 512 * 2  # one layer, 4 KV heads of 256 + 256
    assert mtp.target.mtp_compute == mtp.target.compute  # llama.cpp #27282: its own buffer
    assert mtp.target.recurrent == facts.recurrent_state_bytes * (1 + ROLLBACK_SNAPSHOTS)
    text = memory_text(mtp)
    assert "MTP context" in text and "recurrent state" in text
    assert "MTP" not in memory_text(plain)


def test_mtp_can_tip_a_pair_out_of_memory(tmp_path: Path) -> None:
    facts = model_facts(read_local_header(qwen36_27b_header(tmp_path / "q.gguf")))
    weights = 16 * GIB
    plain = estimate_pair(facts, weights, None, 0, 131_072, "f16")
    mtp = estimate_pair(facts, weights, None, 0, 131_072, "f16", mtp=True)
    free = plain.with_margin + 64 * MIB  # just enough for the target alone
    hardware = Hardware("CPU", (), free, free, 8)
    assert assess(plain, hardware).label is FitLabel.FITS
    assert assess(mtp, hardware).label is not FitLabel.FITS


def test_a_model_without_heads_ignores_mtp(tmp_path: Path) -> None:
    facts = model_facts(read_local_header(qwen36_27b_header(tmp_path / "q.gguf", nextn=0)))
    assert facts.drafting.method == "" and facts.mtp_weight_bytes == 0
    a = estimate_pair(facts, GIB, None, 0, 4096)
    b = estimate_pair(facts, GIB, None, 0, 4096, mtp=True)
    assert a == b and not b.mtp


def test_the_tiny_synthetic_mtp_model(tmp_path: Path) -> None:
    path = write_tiny_qwen35(tmp_path / "tiny.gguf")
    facts = model_facts(read_local_header(path))
    # llama.cpp's own log for this file at 256 positions: "KV buffer size = 0.03 MiB
    # (256 cells, 1 layers)" and "RS buffer size = 0.02 MiB" (3 recurrent layers)
    assert facts.attention_layers == 1
    assert facts.kv_bytes(256, 2) == 32_768
    assert facts.recurrent_state_bytes == 16_896
    memory = model_memory(facts, path.stat().st_size, 256, mtp=True)
    assert memory.mtp_kv == facts.kv_bytes(256, 2)  # one next-token layer, same heads
    assert 0 < memory.mtp_weights < memory.weights


def test_fit_command_with_mtp(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from app.cli.hub import cmd_fit

    path = write_tiny_qwen35(tmp_path / "tiny.gguf")

    def fit(draft: str | None, mtp: bool) -> int:
        args = argparse.Namespace(target=str(path), draft=draft, ctx=512, kv_type="f16", mtp=mtp)
        return cmd_fit(args)

    assert fit(None, True) in (0, 1)
    out = capsys.readouterr().out
    assert "MTP, 1 head" in out and "MTP context: KV" in out
    assert fit(str(path), True) == 2
    assert "leave the draft out" in capsys.readouterr().err
    plain = qwen36_27b_header(tmp_path / "plain.gguf", nextn=0)
    args = argparse.Namespace(target=str(plain), draft=None, ctx=512, kv_type="f16", mtp=True)
    assert cmd_fit(args) == 2
    assert "has no next-token (MTP) layers (plain model)" in capsys.readouterr().err
