"""Fixtures for Hub tests: a fake Hub on 127.0.0.1 and an isolated huggingface_hub setup.

Registered once by ``tests/conftest.py``: the hub, wizard and window tests all use them.
huggingface_hub reads ``HF_ENDPOINT`` and its token paths at import time, so the
fixture patches the resolved constants rather than the environment.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub.hf_api
import pytest
from huggingface_hub import constants

from tests.ggufs import spm_tokens, write_gguf
from tests.hub.fake_hub import FakeHub, FakeRepo


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    hub = FakeHub().start()
    hf_home = tmp_path / "hf_home"
    hf_home.mkdir()
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    # what hf_hub_url builds file addresses from, derived from the endpoint at import too
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        hub.url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    # login() validates through the module-level HfApi created at import time
    monkeypatch.setattr(huggingface_hub.hf_api.api, "endpoint", hub.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "specdeck"))
    # the wizard also lists the model cache: the real one's models are not this test's
    monkeypatch.setenv("SPECDECK_MODEL_CACHE", str(tmp_path / "model-cache"))
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture(scope="session")
def gguf_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Synthetic GGUFs: a target family, a compatible draft and an incompatible one."""
    root = tmp_path_factory.mktemp("ggufs")
    pad = 600_000
    files = {
        "big-Q8_0.gguf": write_gguf(
            root / "a.gguf", name="big", n_layer=4, n_embd=128, file_type=7, padding_bytes=pad * 2
        ),
        "big-Q4_K_M.gguf": write_gguf(
            root / "b.gguf", name="big", n_layer=4, n_embd=128, file_type=15, padding_bytes=pad
        ),
        "small-Q8_0.gguf": write_gguf(
            root / "c.gguf", name="small", n_layer=2, tokens=spm_tokens(n_extra=64), file_type=7
        ),
        "other-Q8_0.gguf": write_gguf(
            root / "d.gguf",
            name="other",
            n_layer=2,
            tokens=spm_tokens(tweak={300: "\u2581different"}),
            file_type=7,
        ),
    }
    return {name: path.read_bytes() for name, path in files.items()}


@pytest.fixture
def populated_hub(fake_hub: FakeHub, gguf_bytes: dict[str, bytes]) -> FakeHub:
    fake_hub.add(
        FakeRepo(
            "acme/Big-GGUF",
            {
                "big-Q8_0.gguf": gguf_bytes["big-Q8_0.gguf"],
                "big-Q4_K_M.gguf": gguf_bytes["big-Q4_K_M.gguf"],
                "README.md": b"# big\n",
            },
            downloads=500,
        )
    )
    fake_hub.add(
        FakeRepo(
            "acme/Small-GGUF", {"small-Q8_0.gguf": gguf_bytes["small-Q8_0.gguf"]}, downloads=900
        )
    )
    fake_hub.add(
        FakeRepo(
            "other/Other-GGUF", {"other-Q8_0.gguf": gguf_bytes["other-Q8_0.gguf"]}, downloads=10
        )
    )
    fake_hub.add(
        FakeRepo(
            "acme/Gated-GGUF",
            {"small-Q8_0.gguf": gguf_bytes["small-Q8_0.gguf"]},
            token="hf_valid_test_token",
        )
    )
    return fake_hub


@pytest.fixture
def closed_port() -> str:
    """A Hub address where nothing listens any more: connection refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
