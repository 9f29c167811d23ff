"""The names of a split GGUF's parts: ``NAME-00001-of-00003.gguf``, as llama.cpp's gguf-split
writes them and as llama.cpp looks for the parts after the first."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPLIT_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitName:
    stem: str  # the name without "-00001-of-00003.gguf"
    index: int  # 1-based, as in the name
    count: int


def split_name(name: str) -> SplitName | None:
    """``name`` (a file name or a path) read as one part of a split GGUF, or None."""
    match = _SPLIT_RE.search(name)
    if match is None:
        return None
    return SplitName(name[: match.start()], int(match.group(1)), int(match.group(2)))


def unsplit(name: str) -> str:
    """``name`` without its part suffix: the same for every part of one model."""
    split = split_name(name)
    return name if split is None else split.stem


def part_names(name: str) -> list[str]:
    """All parts of the model ``name`` belongs to, first to last; ``[name]`` if it is not split.

    Only the part number changes, so the parts are spelt as ``name`` is.
    """
    match = _SPLIT_RE.search(name)
    if match is None:
        return [name]
    head, tail = name[: match.start(1)], name[match.end(1) :]
    return [f"{head}{i:05d}{tail}" for i in range(1, int(match.group(2)) + 1)]
