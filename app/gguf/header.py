"""Read a GGUF header (metadata and tensor table) without touching the tensor data.

The metadata, the vocabulary and the tensor table sit at the start of a GGUF file, so a
pair can be checked and sized from a few megabytes: locally from disk, or over HTTP with
``Range`` requests that grow the read window until the whole header has arrived.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, Keys, LlamaFileType

from app.gguf.compat import (
    DEFAULT_ADD_BOS,
    DEFAULT_ADD_EOS,
    GGUF_TOKENIZER_TO_VOCAB_TYPE,
    VocabInfo,
)

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
_INT64_MAX = (1 << 63) - 1
LLAMA_MAX_LAYERS = 512  # llama-hparams.h: llama.cpp aborts on a block_count of 0 or above this

# Drafting heads a model can carry. The architecture names and the target-layer key come
# from the vendored llama.cpp (src/llama-arch.cpp): the gguf package on PyPI predates them.
NEXTN_KEY = Keys.LLM.NEXTN_PREDICT_LAYERS
TARGET_LAYERS_KEY = "{arch}.target_layers"
ASSISTANT_ARCHITECTURES = frozenset({"gemma4-assistant"})
HEAD_ARCHITECTURES = frozenset({"eagle3", "dflash"})
# Architectures whose next-token graph in the vendored llama.cpp asserts a single head (it
# aborts the process on more): src/models/<arch>.cpp, "only supports a single MTP block".
SINGLE_HEAD_MTP = frozenset(
    {
        "qwen35",
        "qwen35moe",
        "glm4moe",
        "deepseek2",
        "deepseek32",
        "deepseek4",
        "glm-dsa",
        "cohere2moe",
        "nemotron_h_moe",
        "bailingmoe3",
    }
)
EAGLE3_TARGET_LAYERS = 3  # models/eagle3.cpp: exactly three extracted target layers
_HEAD_LABELS = {"eagle3": "EAGLE-3 head", "dflash": "DFlash head"}
HEAD_METHODS = frozenset({"assistant", "eagle3", "dflash"})  # drafts for a target, is none
# Hybrid recurrent models (Qwen3-Next, Qwen3.5/3.6): every ``full_attention_interval``-th trunk
# layer is attention, the others a recurrent (gated delta net) layer with a fixed-size state
# (models/qwen35.cpp; llama_hparams::n_embd_r / n_embd_s).
FULL_ATTENTION_INTERVAL_KEY = "{arch}.full_attention_interval"
RECURRENT_LAYERS_KEY = "{arch}.attention.recurrent_layers"
SSM_KEYS = ("conv_kernel", "inner_size", "state_size", "group_count")
DEFAULT_FULL_ATTENTION_INTERVAL = 4  # models/qwen35.cpp, when the key is absent
RECURRENT_STATE_BYTES = 4  # the r and s rows are F32

# Default special tokens per vocab type when the GGUF does not name them (llama-vocab.cpp)
_DEFAULT_BOS = {"spm": 1, "bpe": 11, "wpm": 101}
_DEFAULT_EOS = {"spm": 2, "bpe": 11, "ugm": 1}

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
        item_type = self.u32()
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
        """``count`` strings, decoded when kept; the hot loop of every header."""
        # Token texts stay byte-exact (surrogateescape) because the pair rule compares them.
        errors = "surrogateescape" if exact else "replace"
        unpack = _U64.unpack_from
        items: list[str] = []
        append = items.append
        buffer = self.buffer
        for _ in range(count):
            if self.pos + 8 > len(buffer):
                self.ensure(8)
            length = unpack(buffer, self.pos)[0]
            if length > MAX_STRING_BYTES:
                raise self.fail(f"string length {length:,} is over the limit")
            start = self.pos + 8
            end = start + length
            if end > len(buffer):
                self.pos = start
                if length > self.remaining():
                    raise self.truncated(f": a string of {length:,} bytes")
                self.ensure(length)
                start, end = self.pos, self.pos + length
            if keep:
                append(buffer[start:end].decode("utf-8", errors))
            self.pos = end
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
    for index in range(kv_count):
        cursor.where = f"key #{index}"
        key = cursor.string(MAX_KEY_BYTES)
        cursor.where = f"key {key!r}"
        if key in metadata:
            raise cursor.fail("the key appears twice")
        metadata[key] = cursor.value(cursor.u32(), is_tokens=key == TOKENS_KEY)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        type(alignment) is not int
        or not 0 < alignment <= MAX_ALIGNMENT
        or alignment & (alignment - 1)
    ):
        raise GGUFFormatError(
            f"{source.name}: general.alignment must be a power of two up to "
            f"{MAX_ALIGNMENT}, found {_describe(alignment)}"
        )
    tensors = []
    names: set[str] = set()
    for index in range(tensor_count):
        cursor.where = f"tensor #{index}"
        name = cursor.string(MAX_TENSOR_NAME_BYTES)
        cursor.where = f"tensor {name!r}"
        if name in names:
            raise cursor.fail("the tensor name appears twice")
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
    return GGUFHeader(source.name, version, metadata, tuple(tensors), data_offset)


def _checked_tensor(cursor: _Cursor, tensor: TensorInfo, alignment: int) -> TensorInfo:
    if tensor.n_elements > _INT64_MAX:
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
    if tensor.offset + tensor.n_elements // block * type_size > _INT64_MAX:
        raise cursor.fail("data offset and size overflow")
    return tensor


def read_local_header(path: str | Path) -> GGUFHeader:
    return read_header(FileSource(path))


def _describe(value: Any) -> str:
    if isinstance(value, ArraySummary):
        return f"an array of {value.count:,} items"
    if isinstance(value, tuple):
        return f"an array of {len(value)} items"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"


def header_int(
    header: GGUFHeader, key: str, default: int, *, low: int = 0, high: int = _INT64_MAX
) -> int:
    """An integer metadata value, type- and range-checked; ``default`` when absent."""
    value = header.get(key)
    if value is None:
        return default
    if type(value) is not int:
        raise GGUFFormatError(
            f"{header.source}: {key} should be an integer, found {_describe(value)}"
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
        f"{header.source}: {key} should be true or false, found {_describe(value)}"
    )


def header_str(header: GGUFHeader, key: str, default: str) -> str:
    value = header.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise GGUFFormatError(f"{header.source}: {key} should be text, found {_describe(value)}")
    return value


def vocab_info(header: GGUFHeader) -> VocabInfo:
    """The vocabulary facts llama.cpp compares between a draft and a target."""
    tokenizer = header_str(header, "tokenizer.ggml.model", "none")
    vocab_type = GGUF_TOKENIZER_TO_VOCAB_TYPE.get(tokenizer, tokenizer)
    tokens = header.get(TOKENS_KEY, ())
    if not isinstance(tokens, tuple) or not tokens:
        raise GGUFFormatError(f"{header.source}: has no tokenizer.ggml.tokens array")
    if not all(isinstance(t, str) for t in tokens):
        raise GGUFFormatError(f"{header.source}: {TOKENS_KEY} should be an array of texts")
    last = len(tokens) - 1
    return VocabInfo(
        vocab_type=vocab_type,
        add_bos=header_bool(
            header, "tokenizer.ggml.add_bos_token", DEFAULT_ADD_BOS.get(vocab_type, False)
        ),
        add_eos=header_bool(
            header, "tokenizer.ggml.add_eos_token", DEFAULT_ADD_EOS.get(vocab_type, False)
        ),
        bos_id=header_int(
            header,
            "tokenizer.ggml.bos_token_id",
            _DEFAULT_BOS.get(vocab_type, -1),
            low=-1,
            high=last,
        ),
        eos_id=header_int(
            header,
            "tokenizer.ggml.eos_token_id",
            _DEFAULT_EOS.get(vocab_type, -1),
            low=-1,
            high=last,
        ),
        tokens=tokens,
    )


def _per_layer_max(header: GGUFHeader, key: str, default: int, high: int) -> int:
    # Some architectures store head counts per layer as an array.
    value = header.get(key)
    if isinstance(value, tuple):
        if not all(type(v) is int and 0 <= v <= high for v in value):
            raise GGUFFormatError(f"{header.source}: {key} should hold integers from 0 to {high:,}")
        return max(value, default=default)
    if isinstance(value, ArraySummary):
        return default
    return header_int(header, key, default, high=high)


def quantization_name(file_type: int | None) -> str:
    if file_type is None:
        return "unknown"
    try:
        name = LlamaFileType(file_type).name
    except ValueError:
        return f"type {file_type}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


@dataclass(frozen=True)
class SelfDrafting:
    """How a model drafts, as its header says: with its own next-token (MTP) layers, as a
    Gemma 4 style assistant of a target, or as an EAGLE-3 / DFlash head of a target."""

    method: str  # "mtp", "assistant", "eagle3", "dflash", or "" for a plain model
    n_heads: int = 0  # next-token layers (MTP only)
    target_layers: tuple[int, ...] = ()  # target layers a head reads (EAGLE-3 / DFlash)
    target_arch: str = ""  # an assistant's target architecture ("gemma4" for gemma4-assistant)

    @property
    def is_head(self) -> bool:
        """An assistant or a head: it drafts for another model and cannot answer alone."""
        return self.method in HEAD_METHODS

    @property
    def name(self) -> str:
        """The drafting method in a few words: "MTP, 1 head", "assistant draft for gemma4",
        "EAGLE-3 head", "DFlash head" or "plain model"."""
        if self.method == "mtp":
            return f"MTP, {self.n_heads} head{'s' * (self.n_heads != 1)}"
        if self.method == "assistant":
            return f"assistant draft for {self.target_arch or 'its target'}"
        return _HEAD_LABELS.get(self.method, "plain model")

    @property
    def label(self) -> str:
        if self.method == "mtp":
            return f"drafts for itself (MTP, {self.n_heads} head{'s' * (self.n_heads != 1)})"
        if self.method == "assistant":
            return "assistant draft (drafts from its target's hidden state)"
        return _HEAD_LABELS.get(self.method, "")


def self_drafting(header: GGUFHeader) -> SelfDrafting:
    """The drafting method the header declares, every count and layer id checked before
    llama.cpp sees it (it asserts, taking the whole process down, on a block count of 0 or
    over 512 and on a next-token count above the block count)."""
    arch = header_str(header, "general.architecture", "unknown")
    # absent, llama.cpp refuses the model cleanly; present and out of range, it asserts
    n_layer_all = header_int(header, f"{arch}.block_count", 0, low=1, high=LLAMA_MAX_LAYERS)
    n_nextn = header_int(header, NEXTN_KEY.format(arch=arch), 0, high=LLAMA_MAX_LAYERS)
    if n_nextn > n_layer_all:
        raise GGUFFormatError(
            f"{header.source}: {NEXTN_KEY.format(arch=arch)} = {n_nextn} is more than the "
            f"{n_layer_all} blocks the model has; the file is malformed"
        )
    if arch in ASSISTANT_ARCHITECTURES:
        return SelfDrafting("assistant", n_nextn, target_arch=arch.removesuffix("-assistant"))
    if arch in HEAD_ARCHITECTURES:
        return SelfDrafting(arch, 0, _target_layers(header, arch))
    if n_nextn > 1 and arch in SINGLE_HEAD_MTP:
        raise GGUFFormatError(
            f"{header.source}: {NEXTN_KEY.format(arch=arch)} = {n_nextn}, but llama.cpp runs "
            f"{arch} with exactly one next-token layer; the file is not one it can load"
        )
    if n_nextn:
        return SelfDrafting("mtp", n_nextn)
    return SelfDrafting("")


def _target_layers(header: GGUFHeader, arch: str) -> tuple[int, ...]:
    key = TARGET_LAYERS_KEY.format(arch=arch)
    value = header.get(key)
    if (
        not isinstance(value, tuple)
        or not value
        or not all(type(v) is int and 0 <= v < LLAMA_MAX_LAYERS for v in value)
    ):
        raise GGUFFormatError(
            f"{header.source}: an {arch} head needs {key}, a list of target layer numbers "
            f"from 0 to {LLAMA_MAX_LAYERS - 1}; found "
            f"{'nothing' if value is None else _describe(value)}"
        )
    if arch == "eagle3" and len(value) != EAGLE3_TARGET_LAYERS:
        raise GGUFFormatError(
            f"{header.source}: an eagle3 head reads exactly {EAGLE3_TARGET_LAYERS} target "
            f"layers; {key} lists {len(value)}"
        )
    return value


@dataclass(frozen=True)
class ModelFacts:
    architecture: str
    name: str
    n_layer: int
    n_head: int
    n_head_kv: int
    n_embd: int
    head_dim_k: int
    head_dim_v: int
    context_length: int
    file_type: int | None
    quantization: str
    tensor_data_size: int
    n_params: int
    vocab_size: int
    split_count: int = 1
    drafting: SelfDrafting = field(default_factory=lambda: SelfDrafting(""))
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # Layers the main context keeps K and V for: the trunk's attention layers (None: every
    # block, the rule for files whose layout is not known here). Next-token layers are not
    # among them: llama.cpp caches those in the MTP context only.
    attention_layers: int | None = None
    recurrent_state_bytes: int = 0  # one sequence's recurrent state, one snapshot (hybrids)
    mtp_weight_bytes: int = 0  # of the tensor data: the next-token layers' weights

    def kv_bytes(self, n_ctx: int, bytes_per_element: float) -> int:
        """K and V cache for ``n_ctx`` positions at the given cache element size."""
        layers = self.n_layer if self.attention_layers is None else self.attention_layers
        return self._kv(layers, n_ctx, bytes_per_element)

    def mtp_kv_bytes(self, n_ctx: int, bytes_per_element: float) -> int:
        """The MTP context's cache: one attention layer's K and V per next-token layer
        (llama-model.cpp keeps only ``il >= n_layer()`` there)."""
        heads = self.drafting.n_heads if self.drafting.method == "mtp" else 0
        return self._kv(heads, n_ctx, bytes_per_element)

    def _kv(self, layers: int, n_ctx: int, bytes_per_element: float) -> int:
        per_position = layers * self.n_head_kv * (self.head_dim_k + self.head_dim_v)
        return int(per_position * n_ctx * bytes_per_element)


def model_facts(header: GGUFHeader) -> ModelFacts:
    arch = header_str(header, "general.architecture", "unknown")

    def arch_int(suffix: str, default: int, high: int) -> int:
        return header_int(header, f"{arch}.{suffix}", default, high=high)

    n_embd = arch_int("embedding_length", 0, 1 << 20)
    n_head = _per_layer_max(header, f"{arch}.attention.head_count", 0, 1 << 16)
    n_head_kv = _per_layer_max(header, f"{arch}.attention.head_count_kv", n_head, 1 << 16)
    default_head_dim = n_embd // n_head if n_head else 0
    file_type = header_int(header, "general.file_type", -1, high=1 << 16)
    tokens = header.get(TOKENS_KEY, ())
    drafting = self_drafting(header)
    n_layer = arch_int("block_count", 0, LLAMA_MAX_LAYERS)
    n_trunk = n_layer - drafting.n_heads if drafting.method == "mtp" else n_layer
    recurrent = _recurrent_layers(header, arch, n_trunk)
    return ModelFacts(
        architecture=arch,
        name=header_str(header, "general.name", Path(header.source).name),
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_embd=n_embd,
        head_dim_k=arch_int("attention.key_length", default_head_dim, 1 << 20),
        head_dim_v=arch_int("attention.value_length", default_head_dim, 1 << 20),
        context_length=arch_int("context_length", 0, 1 << 40),
        file_type=None if file_type < 0 else file_type,
        quantization=quantization_name(None if file_type < 0 else file_type),
        tensor_data_size=header.tensor_data_size,
        n_params=header.n_params,
        vocab_size=len(tokens) if isinstance(tokens, tuple) else 0,
        split_count=header_int(header, "split.count", 1, low=1, high=99_999),
        drafting=drafting,
        attention_layers=(n_trunk - recurrent if recurrent or drafting.method == "mtp" else None),
        recurrent_state_bytes=recurrent * _recurrent_row_bytes(header, arch) if recurrent else 0,
        mtp_weight_bytes=_layer_bytes(header, range(n_trunk, n_layer)),
    )


def _recurrent_layers(header: GGUFHeader, arch: str, n_trunk: int) -> int:
    """How many trunk layers are recurrent in a hybrid model with a gated-delta-net state
    (the ``ssm`` keys); 0 for every other model."""
    if header.get(f"{arch}.ssm.inner_size") is None:
        return 0
    flags = header.get(RECURRENT_LAYERS_KEY.format(arch=arch))
    if isinstance(flags, tuple) and all(type(f) in (bool, int) for f in flags):
        return sum(1 for il, flag in enumerate(flags) if il < n_trunk and flag)
    if header.get(FULL_ATTENTION_INTERVAL_KEY.format(arch=arch)) is None:
        return 0  # a pure state-space model: its state is not estimated here
    interval = header_int(
        header,
        FULL_ATTENTION_INTERVAL_KEY.format(arch=arch),
        DEFAULT_FULL_ATTENTION_INTERVAL,
        low=1,
        high=LLAMA_MAX_LAYERS,
    )
    return sum(1 for il in range(n_trunk) if (il + 1) % interval)


def _recurrent_row_bytes(header: GGUFHeader, arch: str) -> int:
    """One recurrent layer's state for one sequence: the convolution rows
    ``(d_conv - 1) * (d_inner + 2 * n_group * d_state)`` and the state ``d_state * d_inner``."""
    conv, inner, state, groups = (
        header_int(header, f"{arch}.ssm.{key}", 0, high=1 << 24) for key in SSM_KEYS
    )
    conv_rows = max(conv - 1, 0) * (inner + 2 * groups * state)
    return (conv_rows + state * inner) * RECURRENT_STATE_BYTES


def _layer_bytes(header: GGUFHeader, layers: range) -> int:
    if not layers:
        return 0
    prefixes = tuple(f"blk.{il}." for il in layers)
    return sum(t.n_bytes for t in header.tensors if t.name.startswith(prefixes))


def head_mismatch(target: GGUFHeader, draft: SelfDrafting) -> str | None:
    """Why a head or an assistant cannot draft for this target, in words; None when it can
    (or when the draft is a plain model: its vocabulary is checked elsewhere).

    llama.cpp aborts the whole process when an EAGLE-3 head reads a layer past the target's.
    """
    if not draft.is_head:
        return None
    facts = model_facts(target)
    if draft.method == "dflash":
        return "DFlash heads are not supported by this SpecDeck yet"
    if draft.method == "assistant":
        if draft.target_arch and draft.target_arch != facts.architecture:
            return (
                f"an assistant for {draft.target_arch} models cannot draft for a "
                f"{facts.architecture} model"
            )
        return None
    trunk = facts.n_layer - facts.drafting.n_heads
    outside = [layer for layer in draft.target_layers if layer >= trunk]
    if outside:
        return (
            f"the head reads target layers {list(draft.target_layers)}, but the target has "
            f"{trunk}: it was trained for a deeper model"
        )
    return None
