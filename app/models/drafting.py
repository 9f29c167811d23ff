"""How a model file on this computer drafts, read from its header once per file version.

The window, the pair bar and the Lab ask this of the current target (may it draft for itself
with its next-token layers?) whenever a pair loads; the header is read again only when the
file changes.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from app.gguf.header import GGUFFormatError, SelfDrafting, read_local_header, self_drafting


@lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int) -> SelfDrafting:
    return self_drafting(read_local_header(path))


def local_drafting(path: str | Path) -> SelfDrafting | None:
    """The file's drafting method; None when it cannot be read as a GGUF."""
    try:
        stat = Path(path).stat()
        return _read(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, GGUFFormatError):
        return None


def self_drafting_problem(path: str | Path) -> str | None:
    """Why the model at ``path`` cannot draft for itself with next-token (MTP) layers, in
    words; None when it can."""
    drafting = local_drafting(path)
    name = Path(path).name
    if drafting is None:
        return f"{name} cannot be read as a GGUF model"
    if drafting.method == "mtp":
        return None
    return (
        f"{name} has no next-token (MTP) layers ({drafting.name}), so it cannot draft for "
        "itself: choose a draft model or n-gram drafting"
    )
