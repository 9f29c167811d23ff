"""Wizard fixtures: a fake Hub holding a tiny target, its draft and a stranger."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_llama
from tests.ggufs import write_gguf
from tests.hub.fake_hub import FakeHub, FakeRepo
from tests.wizard.helpers import DRAFT, STRANGER, TARGET


@pytest.fixture
def tiny_hub(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    target = write_tiny_llama(tmp_path / "t.gguf", seed=0).read_bytes()
    draft = write_tiny_llama(tmp_path / "d.gguf", seed=1, noise_from=0, noise=0.02).read_bytes()
    stranger = write_gguf(tmp_path / "s.gguf").read_bytes()
    fake_hub.add(
        FakeRepo(TARGET, {"tiny-1b-F32.gguf": target, "tiny-1b-Q8_0.gguf": target}, downloads=100)
    )
    fake_hub.add(FakeRepo(DRAFT, {"tiny-0.1b-F32.gguf": draft}, downloads=50))
    fake_hub.add(FakeRepo(STRANGER, {"tiny-0.05b-F32.gguf": stranger}, downloads=5))
    return fake_hub
