"""How a model file on this computer drafts, read from its header once per file version.

The window, the pair bar and the Lab ask this of the current target (may it draft for itself
with its next-token layers?) whenever a pair loads; the header is read again only when the
file changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path

from app.engine.config import DraftSource
from app.gguf.facts import LLAMA_MAX_LAYERS, SelfDrafting, self_drafting
from app.gguf.fields import header_int, header_str
from app.gguf.reader import TOKENS_KEY, GGUFFormatError, read_local_header


@lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int) -> SelfDrafting:
    return self_drafting(read_local_header(path))


def _drafting_or_why(path: str | Path) -> SelfDrafting | str:
    """The file's drafting method, or why its header cannot be read."""
    try:
        stat = Path(path).stat()
        return _read(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, GGUFFormatError) as exc:
        return str(exc)


def local_drafting(path: str | Path) -> SelfDrafting | None:
    """The file's drafting method; None when it cannot be read as a GGUF."""
    drafting = _drafting_or_why(path)
    return None if isinstance(drafting, str) else drafting


def self_drafting_problem(path: str | Path) -> str | None:
    """Why the model at ``path`` cannot draft for itself with next-token (MTP) layers, in
    words; None when it can."""
    drafting = _drafting_or_why(path)
    name = Path(path).name
    if isinstance(drafting, str):
        # the reader's words say what is wrong (a count stored with a type llama.cpp would
        # refuse, a header cut short): without them only "cannot be read" was left
        return f"{name} cannot be read as a GGUF model: {drafting}"
    if drafting.method == "mtp":
        return None
    return (
        f"{name} has no next-token (MTP) layers ({drafting.name}), so it cannot draft for "
        "itself: choose a draft model or n-gram drafting"
    )


class DrafterKind(str, Enum):
    """Who drafts for the target: what the guard's advice and the pair's name depend on."""

    DRAFT_MODEL = "draft model"  # a separate, smaller model
    LOOKUP = "lookup"  # prompt lookup (n-gram): no model
    MTP = "mtp"  # the target's own next-token (MTP) heads
    ASSISTANT = "assistant"  # an assistant made for its target (Gemma 4)
    HEAD = "head"  # an EAGLE-3 or DFlash head reading the target's hidden states


@dataclass(frozen=True)
class PairDrafting:
    """How a loaded pair drafts, from its source and its files' headers."""

    kind: DrafterKind
    method: str  # the method in a few words: "draft model", "MTP, 1 head", "EAGLE-3 head"
    # a draft model with the target's architecture and vocabulary (the headers say so)
    same_family: bool = False
    same_model: bool = False  # ... and the target's layers and width (its size)

    @property
    def drafter(self) -> str:
        """What drafts, as a sentence's subject: "the draft model", "the target's MTP heads"."""
        return DRAFTER_NOUNS[self.kind]

    @property
    def probed(self) -> str:
        """ "the draft model is probed", "the target's own MTP heads are probed"."""
        return f"{self.drafter} {'are' if self.kind is DrafterKind.MTP else 'is'} probed"


DRAFTER_NOUNS = {
    DrafterKind.DRAFT_MODEL: "the draft model",
    DrafterKind.LOOKUP: "prompt lookup",
    DrafterKind.MTP: "the target's own MTP heads",
    DrafterKind.ASSISTANT: "the assistant draft",
    DrafterKind.HEAD: "the draft head",
}
LOOKUP_METHOD = "n-gram (prompt lookup)"


@lru_cache(maxsize=64)
def _family(path: str, size: int, mtime_ns: int) -> tuple[str, tuple[str, ...], int, int]:
    header = read_local_header(path)
    arch = header_str(header, "general.architecture", "")
    tokens = header.get(TOKENS_KEY, ())
    shape = (
        header_int(header, f"{arch}.block_count", 0, low=0, high=LLAMA_MAX_LAYERS),
        header_int(header, f"{arch}.embedding_length", 0, low=0),
    )
    return arch, tokens if isinstance(tokens, tuple) else (), *shape


def _family_of(path: str) -> tuple[str, tuple[str, ...], int, int] | None:
    try:
        stat = Path(path).stat()
        return _family(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, GGUFFormatError):
        return None


def pair_drafting(target: str | None, draft: str | None, source: DraftSource) -> PairDrafting:
    """The pair's drafting method: the one place that names it (message footers, saved
    conversations, the pair bar, the guard's banner and the CLI all ask here)."""
    if source is DraftSource.NGRAM or (source is DraftSource.MODEL and not draft):
        return PairDrafting(DrafterKind.LOOKUP, LOOKUP_METHOD)
    if source is DraftSource.MTP:
        own = local_drafting(target) if target else None
        method = own.name if own is not None and own.method == "mtp" else "MTP"
        return PairDrafting(DrafterKind.MTP, method)
    assert draft is not None
    drafting = local_drafting(draft)
    if drafting is not None and drafting.method == "assistant":
        return PairDrafting(DrafterKind.ASSISTANT, drafting.name)
    if drafting is not None and drafting.is_head:
        return PairDrafting(DrafterKind.HEAD, drafting.name)
    ours = _family_of(target) if target else None
    theirs = _family_of(draft)
    same_family = (
        ours is not None and theirs is not None and bool(ours[0]) and ours[:2] == theirs[:2]
    )
    same_model = same_family and ours is not None and theirs is not None and ours == theirs
    return PairDrafting(DrafterKind.DRAFT_MODEL, "draft model", same_family, same_model)


def pair_words(target: str | None, draft: str | None, source: DraftSource) -> str:
    """A pair in a few words, its method named: "t.gguf + d.gguf (draft model)",
    "qwen35-mtp.gguf + its own heads (MTP, 1 head)", "t.gguf + n-gram (prompt lookup)"."""
    name = Path(target).name if target else "—"
    drafting = pair_drafting(target, draft, source)
    if drafting.kind is DrafterKind.LOOKUP:
        return f"{name} + {LOOKUP_METHOD}"
    if drafting.kind is DrafterKind.MTP:
        return f"{name} + its own heads ({drafting.method})"
    return f"{name} + {Path(draft or '').name} ({drafting.method})"
