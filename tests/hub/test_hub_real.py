"""Range-read compatibility on the real PyPI-shipped GGUFs, checked against llama.cpp itself.

The models come from ``app.models.shipped`` (cached under ~/.cache/specdeck); the test is
skipped when they are not there yet rather than downloading hundreds of megabytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.compat import first_mismatch
from app.models.gguf_header import model_facts, vocab_info
from app.models.hub import read_remote_header
from tests.hub.fake_hub import FakeHub, FakeRepo

pytestmark = pytest.mark.real

CACHE = Path.home() / ".cache" / "specdeck" / "models"
SMOL = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_F16 = CACHE / "SmolLM2-135M-Instruct.Q4_1.F16.gguf"
QWEN = CACHE / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


@pytest.fixture
def real_hub(fake_hub: FakeHub) -> FakeHub:
    missing = [p.name for p in (SMOL, SMOL_F16, QWEN) if not p.is_file()]
    if missing:
        pytest.skip(f"real models not cached yet: {', '.join(missing)}")
    fake_hub.add(
        FakeRepo(
            "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {SMOL.name: SMOL, SMOL_F16.name: SMOL_F16}
        )
    )
    fake_hub.add(FakeRepo("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", {QWEN.name: QWEN}))
    return fake_hub


def test_real_headers_over_http(real_hub: FakeHub) -> None:
    smol_repo, qwen_repo = (
        "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    )
    smol = read_remote_header(smol_repo, SMOL.name)
    smol_f16 = read_remote_header(smol_repo, SMOL_F16.name)
    qwen = read_remote_header(qwen_repo, QWEN.name)
    facts = model_facts(qwen)
    assert (facts.architecture, facts.quantization, facts.n_layer) == ("qwen2", "Q4_K_M", 24)
    assert model_facts(smol).vocab_size == 49152
    assert first_mismatch(vocab_info(smol_f16), vocab_info(smol)) is None
    assert first_mismatch(vocab_info(qwen), vocab_info(smol)) is not None
    fetched = sum(
        int(e.range.split("-")[1]) - int(e.range.split("=")[1].split("-")[0]) + 1
        for e in real_hub.log
        if e.range and QWEN.name in e.path
    )
    assert fetched < 16 << 20  # a few MiB of a 491 MB file


@pytest.mark.parametrize("path", [SMOL, QWEN], ids=["smollm2", "qwen"])
def test_header_vocab_matches_llama_cpp(path: Path) -> None:
    backend = pytest.importorskip("app.engine.llama_backend")
    from app.engine.config import ModelSpec
    from app.models.gguf_header import read_local_header

    if not path.is_file():
        pytest.skip(f"{path.name} not cached yet")
    from_header = vocab_info(read_local_header(path))
    model = backend.LlamaModel(ModelSpec(str(path), n_gpu_layers=0))
    try:
        loaded = model.vocab_info()
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
