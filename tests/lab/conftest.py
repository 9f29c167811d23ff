"""Lab fixtures: planted good and bad pairs on a looping synthetic target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.looping import MID, SMALL, write_looping_llama


@pytest.fixture(scope="session")
def looping_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 50 MB looping target, a tiny draft that always agrees with it and one that never does."""
    folder = tmp_path_factory.mktemp("looping")
    return {
        "target": write_looping_llama(folder / "target.gguf", shape=MID, perm_seed=5),
        "agrees": write_looping_llama(
            folder / "agrees.gguf", shape=SMALL, perm_seed=5, weight_seed=3
        ),
        "disagrees": write_looping_llama(
            folder / "disagrees.gguf", shape=SMALL, perm_seed=6, weight_seed=3
        ),
    }
