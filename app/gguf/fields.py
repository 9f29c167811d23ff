"""Typed access to a GGUF header's metadata: each value type- and range-checked, with
an error that names the file and the key.
"""

from __future__ import annotations

from gguf.constants import GGUFValueType

from app.gguf.reader import INT64_MAX, ArraySummary, GGUFFormatError, GGUFHeader, describe_value

UINT32_MAX = (1 << 32) - 1
LLAMA_MAX_LAYERS = 512  # llama-hparams.h: llama.cpp aborts on a block_count of 0 or above this


def header_int(
    header: GGUFHeader, key: str, default: int, *, low: int = 0, high: int = INT64_MAX
) -> int:
    """An integer metadata value, type- and range-checked; ``default`` when absent."""
    value = header.get(key)
    if value is None:
        return default
    if type(value) is not int:
        raise GGUFFormatError(
            f"{header.source}: {key} should be an integer, found {describe_value(value)}"
        )
    if not low <= value <= high:
        raise GGUFFormatError(
            f"{header.source}: {key} = {value:,} is out of range ({low:,} to {high:,})"
        )
    return value


def type_name(value_type: int) -> str:
    """A GGUF value type's name: "UINT32", "INT32", "BOOL"..."""
    try:
        return GGUFValueType(value_type).name
    except ValueError:
        return f"type {value_type}"


def stored_as(header: GGUFHeader, key: str) -> str:
    """How ``key``'s value is stored, in words: "UINT8 1", "the text 'yes'", "an INT64 array
    of 2 items"."""
    value, value_type = header.get(key), header.value_types.get(key, -1)
    if value_type == GGUFValueType.ARRAY:
        item = type_name(header.item_types.get(key, -1))
        count = value.count if isinstance(value, ArraySummary) else len(value)
        return f"{'an' if item[0] in 'AEIO' else 'a'} {item} array of {count:,} items"
    if isinstance(value, (str, tuple, ArraySummary)) or value_type < 0:
        return describe_value(value)
    return f"{type_name(value_type)} {value!r}"


def header_uint32(
    header: GGUFHeader, key: str, default: int, *, low: int = 0, high: int = UINT32_MAX
) -> int:
    """A value llama.cpp reads as a UINT32 and as nothing else (``get_key`` into a
    ``uint32_t``: any other stored type fails the load), range-checked; ``default`` when
    absent."""
    if key in header.metadata and header.value_types.get(key) != GGUFValueType.UINT32:
        raise GGUFFormatError(
            f"{header.source}: {key} should be stored as UINT32 (an unsigned 32-bit integer), "
            f"found {stored_as(header, key)}; llama.cpp reads it as nothing else and would "
            "refuse the file"
        )
    return header_int(header, key, default, low=low, high=high)


def header_strict_bool(header: GGUFHeader, key: str, default: bool) -> bool:
    """A setting llama.cpp reads as true only when it is stored as the GGUF bool true (it
    compares the stored value's text with "true", or loads it strictly as a bool): anything
    else is refused, so the app never reads it differently from llama.cpp."""
    value = header.get(key)
    if value is None:
        return default
    if type(value) is not bool or header.value_types.get(key, GGUFValueType.BOOL) != (
        GGUFValueType.BOOL
    ):
        raise GGUFFormatError(
            f"{header.source}: {key} should be stored as a GGUF bool (true or false), found "
            f"{stored_as(header, key)}; llama.cpp takes it for true only when it is the bool "
            "true, so it would not read this value as meant"
        )
    return value


def header_str(header: GGUFHeader, key: str, default: str) -> str:
    value = header.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise GGUFFormatError(
            f"{header.source}: {key} should be text, found {describe_value(value)}"
        )
    return value


def header_layer_max(header: GGUFHeader, key: str, default: int, high: int) -> int:
    """An integer that some architectures store per layer as an array: the largest."""
    value = header.get(key)
    if isinstance(value, tuple):
        if not all(type(v) is int and 0 <= v <= high for v in value):
            raise GGUFFormatError(f"{header.source}: {key} should hold integers from 0 to {high:,}")
        return max(value, default=default)
    if isinstance(value, ArraySummary):
        return default
    return header_int(header, key, default, high=high)
