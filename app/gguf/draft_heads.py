"""What an EAGLE-3 head's and a Gemma 4 assistant's headers must say for llama.cpp to load
and draft with them, checked before llama.cpp sees them.

The keys, tensors and assertions are the vendored llama.cpp's: src/models/eagle3.cpp (one
decoder layer; it embeds and scores with its target's weights where it has none of its own,
and reads three of the target's layers, each ``eagle3.target_hidden_size`` wide) and
src/models/gemma4-assistant.cpp with src/llama-model.cpp (every block a next-token block that
attends through its target's cache, a sliding-window one among them, reading the target's
hidden rows ``embedding_length_out`` wide). A header llama.cpp would abort the process on, or
refuse with only "failed to load", is named here in words.
"""

from __future__ import annotations

from gguf.constants import GGUFValueType

from app.gguf.fields import UINT32_MAX, header_strict_bool, header_uint32, stored_as
from app.gguf.head_tensors import (
    D2T,
    d2t_damage,
    dims_text,
    key_value_widths,
    missing_tensors,
    row_count,
    tensors_by_name,
    vocab_rows,
)
from app.gguf.reader import GGUFFormatError, GGUFHeader

EAGLE3_LAYER_TENSORS = (
    "attn_norm",
    "attn_norm_2",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_norm",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
)
EAGLE3_READS = 3  # target layers, side by side, into ``fc``
# llama-model-loader.cpp get_arr into an array of integers: these item types only
PATTERN_ITEM_TYPES = (GGUFValueType.BOOL, GGUFValueType.INT32, GGUFValueType.UINT32)


def _head_widths(header: GGUFHeader, arch: str, suffix: str = "") -> str | None:
    """Keys and values of one width (``key_length`` and ``value_length``, with ``suffix``)."""
    n_embd = header_uint32(header, f"{arch}.embedding_length", 0, high=1 << 20)
    return key_value_widths(header, arch, n_embd, suffix)


def eagle3_damage(header: GGUFHeader) -> str | None:
    """What an EAGLE-3 head lacks that llama.cpp needs to load or draft with it, in words;
    None when nothing. Raises ``GGUFFormatError`` on a key stored with a type llama.cpp does
    not read."""
    a = "eagle3"
    for key, what in (
        (f"{a}.target_hidden_size", "the width of the target layers it reads"),
        (f"{a}.attention.layer_norm_rms_epsilon", "its norms' epsilon"),
    ):
        if key not in header.metadata:
            return f"it names no {key} ({what}), which llama.cpp requires"
    target_width = header_uint32(header, f"{a}.target_hidden_size", 0, low=1, high=1 << 20)
    blocks = header_uint32(header, f"{a}.block_count", 0, high=UINT32_MAX)
    if blocks != 1:
        return (
            f"{a}.block_count = {blocks:,}: an EAGLE-3 head has exactly one decoder layer "
            "(llama.cpp aborts the process on any other count)"
        )
    widths = _head_widths(header, a)
    if widths is not None:
        return f"{widths}, and aborts the process otherwise"
    header_strict_bool(header, f"{a}.norm_before_residual", False)
    norm_before_fc = header_strict_bool(header, f"{a}.norm_before_fc", False)
    tensors = tensors_by_name(header)
    needed = ["fc.weight", "output_norm.weight"]
    needed += ["enc.output_norm.weight"] if norm_before_fc else []
    needed += [f"blk.0.{name}.weight" for name in EAGLE3_LAYER_TENSORS]
    problem = missing_tensors(needed, tensors)
    if problem is not None:
        return problem
    n_embd = header_uint32(header, f"{a}.embedding_length", 0, high=1 << 20)
    fc, fused = tensors["fc.weight"], EAGLE3_READS * target_width
    if n_embd and fc.shape[:2] != (fused, n_embd):
        return (
            f"fc.weight is {dims_text(fc.shape)}, but the head reads {EAGLE3_READS} target layers "
            f"of {target_width:,} ({a}.target_hidden_size) into its width of {n_embd:,}: it "
            f"should be {dims_text((fused, n_embd))}"
        )
    output = tensors.get("output.weight")
    return d2t_damage(tensors.get(D2T), row_count(output) if output is not None else 0)


def assistant_damage(header: GGUFHeader, arch: str) -> str | None:
    """What a Gemma 4 assistant lacks that llama.cpp needs to load or draft with it, in
    words; None when nothing. Raises ``GGUFFormatError`` on a key stored with a type llama.cpp
    does not read."""
    width = header_uint32(header, f"{arch}.embedding_length", 0, high=1 << 20)
    out_key = f"{arch}.embedding_length_out"
    width_out = header_uint32(header, out_key, 0, high=1 << 20)
    if not width_out or width_out == width:
        return (
            f"{out_key} should name its target's width, which differs from the assistant's own "
            f"({width:,}); {'it is the same' if width_out else 'the header names none'}"
        )
    blocks = header_uint32(header, f"{arch}.block_count", 0)
    nextn_key = f"{arch}.nextn_predict_layers"
    nextn = header_uint32(header, nextn_key, 0)
    if nextn != blocks:
        return (
            f"{nextn_key} = {nextn:,}, but every one of an assistant's {blocks:,} blocks is a "
            "next-token block: it should be the block count"
        )
    problem = _window_pattern_damage(header, arch)
    if problem is not None:
        return problem
    for suffix in ("", "_swa"):
        widths = _head_widths(header, arch, suffix)
        if widths is not None:
            return widths
    return None


def _window_pattern_damage(header: GGUFHeader, arch: str) -> str | None:
    key = f"{arch}.attention.sliding_window_pattern"
    pattern = header.get(key)
    if pattern is None:
        return f"it names no {key} (which of its blocks attend in a sliding window)"
    if not isinstance(pattern, tuple) or header.item_types.get(key) not in PATTERN_ITEM_TYPES:
        raise GGUFFormatError(
            f"{header.source}: {key} should be an array of bools (or of INT32 or UINT32 "
            f"numbers), found {stored_as(header, key)}; llama.cpp reads no other type and "
            "would refuse the file"
        )
    if not any(pattern):
        return (
            f"{key} has no sliding-window block, but an assistant attends through its "
            "target's sliding-window cache with at least one (llama.cpp aborts the process "
            "otherwise)"
        )
    return None


def feature_head_mismatch(target: GGUFHeader, draft: GGUFHeader) -> str | None:
    """Why an EAGLE-3 head or an assistant cannot draft for ``target`` from its widths, in
    words; None when it can, and for every other draft. llama.cpp aborts the process on a
    head that embeds or scores with a target of another width, and the engine refuses an
    assistant that reads hidden rows of another width."""
    arch, target_arch = (str(h.get("general.architecture", "")) for h in (draft, target))
    target_width = header_uint32(target, f"{target_arch}.embedding_length", 0, high=1 << 20)
    if not target_width:
        return None
    if arch == "eagle3":
        reads = header_uint32(draft, "eagle3.target_hidden_size", 0, high=1 << 20)
        if reads and reads != target_width:
            return (
                f"the head reads target layers {reads:,} wide (eagle3.target_hidden_size), "
                f"but the target is {target_width:,} wide: it was trained for another model"
            )
        width = header_uint32(draft, "eagle3.embedding_length", 0, high=1 << 20)
        tensors = tensors_by_name(draft)
        borrows = [
            what
            for name, what in (
                ("token_embd.weight", "token embedding"),
                ("output.weight", "output"),
            )
            if name not in tensors
        ]
        if borrows and width != target_width:
            return (
                f"the head is {width:,} wide and borrows its target's "
                f"{' and '.join(borrows)}, but the target is {target_width:,} wide: it was "
                "trained for another model"
            )
        d2t = tensors.get(D2T)
        if d2t is not None and "output.weight" not in tensors:
            _, rows = vocab_rows(target)
            if rows and rows != d2t.shape[0]:
                return (
                    f"the head has no output of its own and borrows the target's, which scores "
                    f"{rows:,} tokens, but its reduced-vocabulary map (d2t) has "
                    f"{d2t.shape[0]:,}: it was made for another target"
                )
    elif arch.endswith("-assistant"):
        reads = header_uint32(draft, f"{arch}.embedding_length_out", 0, high=1 << 20)
        if reads and reads != target_width:
            return (
                f"the assistant reads hidden rows {reads:,} wide ({arch}.embedding_length_out),"
                f" but the target is {target_width:,} wide: it was made for another model"
            )
    return None
