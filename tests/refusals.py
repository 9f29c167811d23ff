"""What SpecDeck's check before a load says of a pair it refuses, for the header tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ModelLoadError
from app.gguf.check import check_local_pair
from app.gguf.compat import IncompatiblePairError


def pair_check_refusal(target: Path, head: Path) -> str:
    """The words ``check_local_pair`` refuses ``head`` beside ``target`` with (the test fails
    where it passes the pair)."""
    with pytest.raises((ModelLoadError, IncompatiblePairError)) as refused:
        check_local_pair(target, head)
    return str(refused.value)
