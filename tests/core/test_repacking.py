"""The weight-repacking decision: a crashing probe child turns repacking off, never the parent."""

from __future__ import annotations

import ctypes
import json
import os

import gguf
import pytest

from app.devtools.test_models.gguf_writing import rewrite_gguf
from app.devtools.test_models.synthetic import write_tiny_llama
from app.engine.config import ModelSpec
from app.engine.llama import repacking
from app.engine.llama.backend import LlamaModel
from app.gguf.check import validate_gguf_file

AMX_CPU = {"avx512f", "amx_tile", "amx_int8"}


def _segfault(_work: str) -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV, as llama.cpp's AMX kernel does


def _abort(_work: str) -> None:
    os.abort()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDECK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    return tmp_path / repacking.CACHE_FILE


@pytest.mark.parametrize("child", [_segfault, _abort])
def test_a_crashing_child_is_a_verdict_not_a_crash(child):
    survived, reason = repacking.run_probe(child, timeout_s=60)
    assert survived is False
    assert "crashed a child process (signal" in reason


def test_crash_on_an_amx_cpu_chooses_the_fallback_and_caches_it(cache):
    verdict = repacking.decide(
        probe=lambda: repacking.run_probe(_segfault, timeout_s=60),
        cpu_flags=lambda: AMX_CPU,
        machine="x86_64",
    )
    assert verdict.enabled is False
    assert verdict.source == "probe"
    stored = json.loads(cache.read_text())
    assert [entry["enabled"] for entry in stored.values()] == [False]

    def must_not_probe() -> tuple[bool, str]:
        raise AssertionError("a cached verdict must not probe again")

    again = repacking.decide(probe=must_not_probe, cpu_flags=lambda: AMX_CPU, machine="x86_64")
    assert (again.enabled, again.source) == (False, "cache")


def test_the_real_probe_child_runs_a_repacked_matrix_product(cache):
    survived, reason = repacking.run_probe()
    # on a CPU whose AMX kernels are broken this is exactly the crash the probe exists for
    if not survived:
        assert "signal" in reason
    verdict = repacking.decide(
        probe=lambda: (survived, reason), cpu_flags=lambda: AMX_CPU, machine="x86_64"
    )
    assert verdict.enabled is survived


def test_no_amx_means_no_probe(cache):
    def must_not_probe() -> tuple[bool, str]:
        raise AssertionError("no AMX: nothing to probe")

    verdict = repacking.decide(probe=must_not_probe, cpu_flags=lambda: {"avx2"}, machine="x86_64")
    assert (verdict.enabled, verdict.source) == (True, "no AMX")
    arm = repacking.decide(probe=must_not_probe, cpu_flags=lambda: None, machine="arm64")
    assert arm.enabled is True


def test_environment_beats_setting_beats_probe(cache, monkeypatch):
    def must_not_probe() -> tuple[bool, str]:
        raise AssertionError("a forced choice must not probe")

    off = repacking.decide("off", probe=must_not_probe, cpu_flags=lambda: AMX_CPU)
    assert (off.enabled, off.source) == (False, "setting")
    monkeypatch.setenv(repacking.ENV_VAR, "on")
    on = repacking.decide("off", probe=must_not_probe, cpu_flags=lambda: AMX_CPU)
    assert (on.enabled, on.source) == (True, f"${repacking.ENV_VAR}")


def test_a_hostile_cache_file_is_ignored(cache):
    cache.write_text('{"x": [1, 2], "' + "y" * 10 + '": {"enabled": "yes"}}')
    verdict = repacking.decide(
        probe=lambda: (True, "probed"), cpu_flags=lambda: AMX_CPU, machine="x86_64"
    )
    assert (verdict.enabled, verdict.source) == (True, "probe")
    cache.write_text("[" * 100_000)
    assert (
        repacking.decide(
            probe=lambda: (False, "probed"), cpu_flags=lambda: AMX_CPU, machine="x86_64"
        ).enabled
        is False
    )


def test_the_model_loads_with_the_chosen_setting(tmp_path):
    path = write_tiny_llama(tmp_path / "tiny.gguf")
    model = LlamaModel(ModelSpec(str(path), n_ctx=128, repack="off"))
    try:
        assert model.repacking.enabled is False
        assert "forced off by setting" in model.repacking.describe()
    finally:
        model.close()


def _no_machine_verdict(*_args: object, **_kwargs: object) -> repacking.RepackVerdict:
    raise AssertionError("a model with no AMX weight types must not ask for the machine's verdict")


F32, F16 = 0, 1
SPLIT_COUNT = gguf.Keys.Split.LLM_KV_SPLIT_COUNT


@pytest.mark.fast
def test_a_model_without_amx_weight_types_needs_no_verdict(monkeypatch):
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    monkeypatch.setattr(repacking, "repacking_enabled", _no_machine_verdict)
    verdict = repacking.repacking_for("auto", {F32, F16})
    assert (verdict.enabled, verdict.source) == (True, "no AMX weights")


@pytest.mark.fast
def test_a_model_with_an_amx_weight_type_gets_the_machine_verdict(monkeypatch):
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    machine = repacking.RepackVerdict(False, "cache", "probed earlier")
    monkeypatch.setattr(repacking, "repacking_enabled", lambda _setting="auto": machine)
    q4_k = min(repacking.AMX_WEIGHT_TYPES - {F32, F16})
    assert repacking.repacking_for("auto", {F32, q4_k}) is machine


@pytest.mark.fast
def test_the_environment_and_the_setting_still_decide_for_an_f32_model(monkeypatch):
    monkeypatch.setattr(repacking, "repacking_enabled", _no_machine_verdict)
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    assert repacking.repacking_for("off", {F32}).enabled is False
    monkeypatch.setenv(repacking.ENV_VAR, "off")
    assert repacking.repacking_for("on", {F32}).source == f"${repacking.ENV_VAR}"


@pytest.mark.fast
def test_an_f32_model_loads_on_an_amx_machine_without_the_probe(tmp_path, monkeypatch):
    """The tiny synthetic model is all F32: it loads with no probe child (the fast tier
    refuses any process), where it once waited for one on a CPU with AMX."""
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    monkeypatch.setattr(repacking, "repacking_enabled", _no_machine_verdict)
    model = LlamaModel(ModelSpec(str(write_tiny_llama(tmp_path / "tiny.gguf")), n_ctx=128))
    try:
        assert model.repacking.source == "no AMX weights"
    finally:
        model.close()


@pytest.mark.fast
def test_a_part_of_a_split_model_asks_for_the_machine_verdict(tmp_path, monkeypatch):
    """The first part of a split model can hold F32 norms alone (or no tensor) while a later
    part holds Q4_K matrices: its own tensors do not say the model has no AMX weights."""
    whole = write_tiny_llama(tmp_path / "tiny.gguf")
    assert repacking.weights_in(validate_gguf_file(whole)) == {F32}
    parts = (2, gguf.GGUFValueType.UINT16, None)
    first = rewrite_gguf(whole, tmp_path / "tiny-00001-of-00002.gguf", keys={SPLIT_COUNT: parts})
    assert repacking.weights_in(validate_gguf_file(first)) is None
    monkeypatch.delenv(repacking.ENV_VAR, raising=False)
    machine = repacking.RepackVerdict(False, "cache", "probed earlier")
    monkeypatch.setattr(repacking, "repacking_enabled", lambda _setting="auto": machine)
    assert repacking.repacking_for("auto", None) is machine
    assert repacking.repacking_for("auto", set()) is machine
