"""Read a GGUF header (metadata and tensor table) without touching the tensor data.

The metadata, the vocabulary and the tensor table sit at the start of a GGUF file, so a
pair can be checked and sized from a few megabytes: locally from disk, or over HTTP with
``Range`` requests that grow the read window until the whole header has arrived. The reader
is bounded: every count and length is checked against the bytes left and against generous
real-model limits before anything is allocated for it.
"""

from __future__ import annotations

import struct
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
TOKENS_KEY = "tokenizer.ggml.tokens"
# Arrays longer than this are summarised (scores, merges, token types): only the token texts
# are needed for the compatibility rule, and keeping 150k floats per header is wasteful.
MAX_KEPT_ARRAY = 4096
FIRST_WINDOW = 1 << 20
MAX_WINDOW = 16 << 20

# A header is untrusted input. Real ones stay well inside these limits (a 262k-token
# vocabulary with merges is about 20 MiB; large models have a few thousand tensors), so
# anything beyond them is refused before it is read.
MAX_HEADER_BYTES = 64 << 20
MAX_TENSORS = 1 << 17
MAX_KV = 1 << 16
MAX_ARRAY_ITEMS = 1 << 22
MAX_VOCAB = 1 << 20
MAX_KEY_BYTES = 1 << 16
MAX_STRING_BYTES = 16 << 20
MAX_TENSOR_NAME_BYTES = 63  # GGML_MAX_NAME - 1: llama.cpp refuses longer names
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ALIGNMENT = 1 << 20
INT64_MAX = (1 << 63) - 1

_SCALAR_FORMATS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_SCALAR_STRUCTS = {t: struct.Struct(f) for t, f in _SCALAR_FORMATS.items()}
_STRING, _ARRAY = 8, 9
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class GGUFFormatError(ValueError):
    """The bytes are not a GGUF file this reader understands."""


class GGUFTruncatedError(GGUFFormatError):
    """The file ends before its header does."""


class ByteSource(Protocol):
    """Random-access bytes: a local file or a remote file read by ranges."""

    name: str
    size: int | None  # total bytes when known

    def read_at(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``offset``; fewer only at the end of the file."""
        ...


class FileSource:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self.size: int | None = self.path.stat().st_size

    def read_at(self, offset: int, size: int) -> bytes:
        with self.path.open("rb") as handle:
            handle.seek(offset)
            return handle.read(size)


@dataclass(frozen=True)
class ArraySummary:
    """A long metadata array that was parsed past but not kept."""

    item_type: int
    count: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def n_bytes(self) -> int:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
        except (ValueError, KeyError):
            return 0
        return self.n_elements // block * type_size


@dataclass(frozen=True)
class GGUFHeader:
    source: str
    version: int
    metadata: Mapping[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # where the tensor data starts (after alignment padding)
    # each key's stored GGUF value type (``gguf.GGUFValueType``), and an array's item type:
    # llama.cpp reads most keys with one exact type and refuses, or misreads, the others
    value_types: Mapping[str, int] = field(default_factory=dict)
    item_types: Mapping[str, int] = field(default_factory=dict)

    @property
    def tensor_data_size(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def n_params(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


class _Cursor:
    """Sequential reader over a sliding window of a byte source.

    ``buffer`` holds the bytes from file offset ``base`` on; ``pos`` indexes into it. Bytes
    already parsed are dropped as the window slides, so memory follows what is kept, not the
    size of the header. ``where`` names the key or tensor being read, for every error.
    """

    def __init__(self, source: ByteSource, first_window: int) -> None:
        self.source = source
        self.buffer = bytearray()
        self.base = 0
        self.pos = 0
        self.window = first_window
        self.where = "the start of the header"
        self.item_type = -1  # the item type of the array read last

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def fail(self, message: str) -> GGUFFormatError:
        return GGUFFormatError(f"{self.source.name}: {self.where}: {message}")

    def truncated(self, detail: str) -> GGUFTruncatedError:
        return GGUFTruncatedError(
            f"{self.source.name}: file ends inside the GGUF header ({self.where}{detail})"
        )

    def remaining(self) -> int:
        """Bytes the rest of the header can still have."""
        limit = MAX_HEADER_BYTES
        if self.source.size is not None:
            limit = min(limit, self.source.size)
        return limit - self.offset

    def ensure(self, size: int) -> None:
        """Make ``buffer[pos : pos + size]`` available."""
        if self.pos + size <= len(self.buffer):
            return
        end = self.offset + size
        if end > MAX_HEADER_BYTES:
            raise self.fail(
                f"the header is larger than {MAX_HEADER_BYTES >> 20} MiB, far beyond any real model"
            )
        if self.pos:  # drop what was parsed (cheap: bytearray trims its front in place)
            del self.buffer[: self.pos]
            self.base += self.pos
            self.pos = 0
        while self.base + len(self.buffer) < end:
            have = self.base + len(self.buffer)
            want = min(max(end - have, self.window), MAX_HEADER_BYTES - have)
            chunk = self.source.read_at(have, want)
            if not chunk:
                raise self.truncated("")
            self.buffer += chunk
            self.window = min(self.window * 2, MAX_WINDOW)

    def skip(self, size: int) -> None:
        if size > self.remaining():
            raise self.truncated(f": {size:,} bytes to skip")
        self.ensure(size)
        self.pos += size

    def u32(self) -> int:
        self.ensure(4)
        value = _U32.unpack_from(self.buffer, self.pos)[0]
        self.pos += 4
        return int(value)

    def u64(self) -> int:
        self.ensure(8)
        value = _U64.unpack_from(self.buffer, self.pos)[0]
        self.pos += 8
        return int(value)

    def count(self, what: str, limit: int, min_item_bytes: int) -> int:
        """A u64 count, refused when absurd or when its items cannot fit in what is left."""
        value = self.u64()
        if value > limit:
            raise self.fail(f"{what} count {value:,} is absurd (limit {limit:,})")
        needed = value * min_item_bytes
        if needed > MAX_HEADER_BYTES - self.offset:
            raise self.fail(
                f"{what} count {value:,} cannot fit in a header of at most "
                f"{MAX_HEADER_BYTES >> 20} MiB"
            )
        if needed > self.remaining():
            raise self.truncated(
                f": {what} count {value:,} needs {needed:,} bytes, {self.remaining():,} are left"
            )
        return value

    def _length(self, limit: int) -> int:
        length = self.u64()
        if length > limit:
            raise self.fail(f"string length {length:,} is over the limit of {limit:,}")
        if length > self.remaining():
            raise self.truncated(f": a string of {length:,} bytes")
        return length

    def string(self, limit: int = MAX_STRING_BYTES, errors: str = "replace") -> str:
        # Invalid UTF-8 is replaced so that names and messages can always be printed.
        length = self._length(limit)
        self.ensure(length)
        text = self.buffer[self.pos : self.pos + length].decode("utf-8", errors)
        self.pos += length
        return text

    def name(self, what: str, index: int, limit: int, seen: Container[str], twice: str) -> str:
        """The name of ``what`` number ``index``, which later failures then name; ``twice``
        is the failure when ``seen`` has it already."""
        self.where = f"{what} #{index}"
        name = self.string(limit)
        self.where = f"{what} {name!r}"
        if name in seen:
            raise self.fail(twice)
        return name

    def scalar(self, value_type: int) -> Any:
        packer = _SCALAR_STRUCTS.get(value_type)
        if packer is None:
            raise self.fail(f"unknown GGUF value type {value_type}")
        self.ensure(packer.size)
        value = packer.unpack_from(self.buffer, self.pos)[0]
        self.pos += packer.size
        return value

    def value(self, value_type: int, is_tokens: bool) -> Any:
        if value_type == _STRING:
            return self.string()
        if value_type != _ARRAY:
            return self.scalar(value_type)
        item_type = self.item_type = self.u32()
        if item_type == _ARRAY:
            raise self.fail("nested arrays are not supported by llama.cpp")
        if item_type == _STRING:
            limit = MAX_VOCAB if is_tokens else MAX_ARRAY_ITEMS
            count = self.count("array", limit, 8)
            if is_tokens or count <= MAX_KEPT_ARRAY:
                return self.strings(count, keep=True, exact=is_tokens)
            self.strings(count, keep=False, exact=False)
            return ArraySummary(item_type, count)
        packer = _SCALAR_STRUCTS.get(item_type)
        if packer is None:
            raise self.fail(f"unknown GGUF array item type {item_type}")
        count = self.count("array", MAX_ARRAY_ITEMS, packer.size)
        if count > MAX_KEPT_ARRAY:
            self.skip(count * packer.size)
            return ArraySummary(item_type, count)
        self.ensure(count * packer.size)
        items = tuple(
            v[0] for v in packer.iter_unpack(self.buffer[self.pos : self.pos + count * packer.size])
        )
        self.pos += count * packer.size
        return items

    def strings(self, count: int, *, keep: bool, exact: bool) -> tuple[str, ...]:
        """``count`` strings, decoded when kept; the hot loop of every header (a real
        vocabulary and its merges are 300,000 strings: the position is kept in a local and
        given back to the cursor only around a read)."""
        # Token texts stay byte-exact (surrogateescape) because the pair rule compares them.
        errors = "surrogateescape" if exact else "replace"
        unpack = _U64.unpack_from
        items: list[str] = []
        append = items.append
        buffer = self.buffer  # grown and trimmed in place by ensure(), which moves pos
        size, pos = len(buffer), self.pos
        for _ in range(count):
            if pos + 8 > size:
                self.pos = pos
                self.ensure(8)
                size, pos = len(buffer), self.pos
            length = unpack(buffer, pos)[0]
            if length > MAX_STRING_BYTES:
                self.pos = pos
                raise self.fail(f"string length {length:,} is over the limit")
            start = pos + 8
            end = start + length
            if end > size:
                self.pos = start
                if length > self.remaining():
                    raise self.truncated(f": a string of {length:,} bytes")
                self.ensure(length)
                size, start = len(buffer), self.pos
                end = start + length
            if keep:
                append(buffer[start:end].decode("utf-8", errors))
            pos = end
        self.pos = pos
        return tuple(items)


def read_header(source: ByteSource, *, first_window: int = FIRST_WINDOW) -> GGUFHeader:
    """Parse the GGUF header from ``source``, reading no tensor data.

    Every count is checked against the bytes left and against generous real-model limits
    before anything is allocated for it; the error names the file and the key or tensor.
    """
    cursor = _Cursor(source, first_window)
    cursor.ensure(4)
    if bytes(cursor.buffer[:4]) != GGUF_MAGIC:
        raise GGUFFormatError(f"{source.name}: not a GGUF file (bad magic)")
    cursor.pos = 4
    version = cursor.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GGUFFormatError(
            f"{source.name}: GGUF version {version} is not supported (expected 2 or 3); "
            "convert the model again with a current llama.cpp"
        )
    cursor.where = "the tensor count"
    tensor_count = cursor.count("tensor", MAX_TENSORS, 32)
    cursor.where = "the key count"
    kv_count = cursor.count("key", MAX_KV, 12)
    metadata: dict[str, Any] = {}
    value_types: dict[str, int] = {}
    item_types: dict[str, int] = {}
    for index in range(kv_count):
        key = cursor.name("key", index, MAX_KEY_BYTES, metadata, "the key appears twice")
        value_type = value_types[key] = cursor.u32()
        metadata[key] = cursor.value(value_type, is_tokens=key == TOKENS_KEY)
        if value_type == _ARRAY:
            item_types[key] = cursor.item_type
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        type(alignment) is not int
        or not 0 < alignment <= MAX_ALIGNMENT
        or alignment & (alignment - 1)
    ):
        raise GGUFFormatError(
            f"{source.name}: general.alignment must be a power of two up to "
            f"{MAX_ALIGNMENT}, found {describe_value(alignment)}"
        )
    tensors = []
    names: set[str] = set()
    for index in range(tensor_count):
        name = cursor.name(
            "tensor", index, MAX_TENSOR_NAME_BYTES, names, "the tensor name appears twice"
        )
        names.add(name)
        n_dims = cursor.u32()
        if not 1 <= n_dims <= MAX_DIMS:
            raise cursor.fail(f"{n_dims} dimensions (llama.cpp supports 1 to {MAX_DIMS})")
        shape = tuple(cursor.u64() for _ in range(n_dims))
        ggml_type, offset = cursor.u32(), cursor.u64()
        tensors.append(
            _checked_tensor(cursor, TensorInfo(name, shape, ggml_type, offset), alignment)
        )
    data_offset = -(-cursor.offset // alignment) * alignment
    return GGUFHeader(
        source.name, version, metadata, tuple(tensors), data_offset, value_types, item_types
    )


def _checked_tensor(cursor: _Cursor, tensor: TensorInfo, alignment: int) -> TensorInfo:
    if tensor.n_elements > INT64_MAX:
        raise cursor.fail(f"shape {tensor.shape} has more elements than llama.cpp can index")
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(tensor.ggml_type)]
    except (ValueError, KeyError):
        raise cursor.fail(f"unknown tensor type {tensor.ggml_type}") from None
    if tensor.shape[0] % block:
        raise cursor.fail(
            f"row length {tensor.shape[0]} is not a multiple of the block size {block} of its type"
        )
    if tensor.offset % alignment:
        raise cursor.fail(
            f"data offset {tensor.offset:,} is not a multiple of the alignment "
            f"{alignment} (the file is malformed, not truncated)"
        )
    if tensor.offset + tensor.n_elements // block * type_size > INT64_MAX:
        raise cursor.fail("data offset and size overflow")
    return tensor


def read_local_header(path: str | Path) -> GGUFHeader:
    return read_header(FileSource(path))


def describe_value(value: Any) -> str:
    if isinstance(value, ArraySummary):
        return f"an array of {value.count:,} items"
    if isinstance(value, tuple):
        return f"an array of {len(value)} items"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"
