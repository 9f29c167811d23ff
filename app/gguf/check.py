"""Fast structural validation of a local GGUF file before llama.cpp sees it.

llama.cpp only says "failed to load" (or aborts the process on some malformed vocabularies);
this names the actual problem (wrong magic, truncated download, unreadable header, broken
vocabulary) so a person knows what to do. It reads the header only (``reader``).
``check_local_pair`` adds what ``check-pair`` checks: a head or an assistant is no target, a
head drafts only for the target it was made for, and the draft/target vocabulary rule
(``compat``). The engine host runs it before every load (the chat, the Lab, the benchmark,
the server) and the window before it unloads the pair that works, so a pair llama.cpp would
crash on is named in ``check-pair``'s words instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.errors import ModelLoadError
from app.gguf.block_heads import block_head_damage
from app.gguf.compat import IncompatiblePairError, first_mismatch
from app.gguf.draft_heads import assistant_damage, eagle3_damage, feature_head_mismatch
from app.gguf.facts import SelfDrafting, head_mismatch, self_drafting, vocab_info
from app.gguf.fields import header_str
from app.gguf.head_tensors import d2t_id_damage
from app.gguf.reader import (
    GGUF_MAGIC,
    TOKENS_KEY,
    FileSource,
    GGUFFormatError,
    GGUFHeader,
    GGUFTruncatedError,
    read_local_header,
)


def not_a_target(method: SelfDrafting) -> str | None:
    """``check-pair``'s words for a head or an assistant given as the target; None for a
    model that can answer by itself."""
    if not method.is_head:
        return None
    article = "an" if method.name[0].lower() in "aeiou" else "a"
    return (
        f"not a target: {article} {method.name} drafts for another model and cannot answer "
        "by itself"
    )


def head_damage(header: GGUFHeader) -> str | None:
    """What a head's or an assistant's header lacks that llama.cpp needs (a tensor, a key, a
    size it asserts on), in words; None for a whole one and for every other model."""
    drafting = self_drafting(header)
    if drafting.block is not None:
        return block_head_damage(header, drafting.block)
    if drafting.method == "eagle3":
        return eagle3_damage(header)
    if drafting.method == "assistant":
        return assistant_damage(header, header_str(header, "general.architecture", ""))
    return None


def _damaged_what(header: GGUFHeader) -> str:
    """The kind of draft a damaged header declares: "block drafter", "EAGLE-3 head"..."""
    drafting = self_drafting(header)
    if drafting.block is not None:
        return "block drafter"
    if drafting.method == "assistant":
        return f"assistant draft for {drafting.target_arch}"
    return drafting.name


def pair_mismatch(target: GGUFHeader, draft: GGUFHeader) -> str | None:
    """``check-pair``'s words for why ``draft`` cannot draft for ``target``: a damaged block
    drafter, a head or an assistant made for another target, then the vocabulary rule; None
    when it can."""
    damage = head_damage(draft)
    if damage is not None:
        return f"the head is damaged: {damage}"
    return (
        head_mismatch(target, self_drafting(draft))
        or feature_head_mismatch(target, draft)
        or first_mismatch(vocab_info(target), vocab_info(draft))
    )


def check_local_pair(target: Path, draft: Path | None) -> None:
    """Refuse, from the headers (and a reduced-vocabulary map's ids), a pair llama.cpp would
    refuse, abort or crash on: each file as ``validate_gguf_file`` checks it, a head as the
    target (``not_a_target``), and the
    draft against the target (``pair_mismatch``: a head made for another target, a
    vocabulary that differs). ``draft`` is the draft model, None when none is loaded (n-gram
    or MTP drafting). Raises ``ModelLoadError`` or ``compat.IncompatiblePairError``."""
    target_header = validate_gguf_file(target)
    problem = not_a_target(self_drafting(target_header))
    if problem is not None:
        raise ModelLoadError(
            f"{target.name} is {problem}; choose it as the draft of the target it was made for"
        )
    if draft is None:
        return
    draft_header = validate_gguf_file(draft)
    mismatch = pair_mismatch(target_header, draft_header)
    if mismatch is not None:
        error = IncompatiblePairError(f"{draft.name} cannot draft for {target.name}: {mismatch}")
        error.mismatch = mismatch
        if self_drafting(draft_header).is_head:
            error.advice = "Choose the draft made for this target."
        raise error


def validate_gguf_file(path: Path) -> GGUFHeader:
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"not a file: {path}")
    size = path.stat().st_size
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path.name} is not a GGUF file (it starts with {magic!r}, expected b'GGUF'). "
            "Choose a .gguf model file."
        )
    try:
        header = read_local_header(path)
        # llama.cpp aborts the process on absurd block or next-token counts and on some
        # damaged block drafters: refuse them here
        damage = head_damage(header)
    except GGUFTruncatedError as exc:
        raise ModelLoadError(
            f"{path.name} is truncated inside its GGUF header ({exc}). The download was "
            "probably interrupted; download it again."
        ) from exc
    except GGUFFormatError as exc:
        raise ModelLoadError(
            f"{path.name} has a malformed GGUF header ({exc}). The file is broken or was "
            "written by a faulty converter; get it again or from another source."
        ) from exc
    if damage is not None:
        raise _damaged(path, header, damage)
    tokens = header.get(TOKENS_KEY)
    if isinstance(tokens, tuple) and not all(isinstance(t, str) for t in tokens):
        raise ModelLoadError(
            f"{path.name} has a malformed vocabulary: {TOKENS_KEY} is not an array of texts."
        )
    _check_vocabulary(path, tokens if isinstance(tokens, tuple) else None)
    needed = header.data_offset + max((t.offset + t.n_bytes for t in header.tensors), default=0)
    if needed > size:
        raise ModelLoadError(
            f"{path.name} is truncated: its tensors need {needed:,} bytes but the file has "
            f"{size:,}. The download was probably interrupted; download it again."
        )
    damage = d2t_id_damage(FileSource(path), header)  # an EAGLE-3 head's map, a block drafter's
    if damage is not None:
        raise _damaged(path, header, damage)
    return header


def _damaged(path: Path, header: GGUFHeader, damage: str) -> ModelLoadError:
    return ModelLoadError(
        f"{path.name} is a damaged {_damaged_what(header)}: {damage}. Get it again or from "
        "another source."
    )


def _check_vocabulary(path: Path, tokens: Sequence[str] | None) -> None:
    """Catch vocabularies that would make llama.cpp abort the whole process on load."""
    if not tokens or isinstance(tokens, str):
        raise ModelLoadError(f"{path.name} has no tokenizer vocabulary; it cannot generate text.")
    if len(set(tokens)) != len(tokens):
        seen: set[str] = set()
        duplicate = next(t for t in tokens if t in seen or seen.add(t))  # type: ignore[func-returns-value]
        raise ModelLoadError(
            f"{path.name} has a broken vocabulary: token {duplicate!r} appears twice."
        )
