"""Typed access to a GGUF header's metadata: each value type- and range-checked, with
an error that names the file and the key.
"""

from __future__ import annotations

from app.gguf.reader import INT64_MAX, ArraySummary, GGUFFormatError, GGUFHeader, describe_value


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


def header_bool(header: GGUFHeader, key: str, default: bool) -> bool:
    value = header.get(key)
    if value is None:
        return default
    if type(value) is bool or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise GGUFFormatError(
        f"{header.source}: {key} should be true or false, found {describe_value(value)}"
    )


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
