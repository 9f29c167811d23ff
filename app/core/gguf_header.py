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

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from app.core.compat import (
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
MAX_KEPT_ARRAY = 64
FIRST_WINDOW = 1 << 20
MAX_HEADER_BYTES = 256 << 20

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
_STRING, _ARRAY = 8, 9


class GGUFFormatError(ValueError):
    """The bytes are not a GGUF file this reader understands."""


class ByteSource(Protocol):
    """Random-access bytes: a local file or a remote file read by ranges."""

    name: str

    def read_at(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``offset``; fewer only at the end of the file."""
        ...


class HttpRangeSource:
    """A remote file read with HTTP ``Range`` requests through huggingface_hub's session.

    The session applies the Hub's offline mode and redirects; ``token`` follows
    huggingface_hub's rules (None: the stored token, False: none, str: that token).
    """

    def __init__(self, url: str, *, token: str | bool | None = None) -> None:
        self.url = url
        self.name = url
        self.token = token

    def read_at(self, offset: int, size: int) -> bytes:
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        headers = build_hf_headers(token=self.token)
        headers["Range"] = f"bytes={offset}-{offset + size - 1}"
        headers["Accept-Encoding"] = "identity"
        with get_session().stream("GET", self.url, headers=headers, timeout=30) as response:
            if response.status_code == 416:
                return b""
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            if response.status_code == 206:
                return response.read()
            # The server ignored the range and sends the whole file: keep only what was asked.
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) >= offset + size:
                    break
            return bytes(data[offset : offset + size])


class FileSource:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = str(self.path)

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
    """Sequential reader over a growing prefix of a byte source."""

    def __init__(self, source: ByteSource, first_window: int) -> None:
        self.source = source
        self.buffer = bytearray()
        self.pos = 0
        self.window = first_window

    def take(self, size: int) -> bytes:
        end = self.pos + size
        while end > len(self.buffer):
            if len(self.buffer) >= MAX_HEADER_BYTES:
                raise GGUFFormatError(
                    f"{self.source.name}: header is larger than {MAX_HEADER_BYTES >> 20} MiB"
                )
            want = max(end - len(self.buffer), self.window)
            chunk = self.source.read_at(len(self.buffer), want)
            if not chunk:
                raise GGUFFormatError(f"{self.source.name}: file ends inside the GGUF header")
            self.buffer += chunk
            self.window = min(self.window * 2, 64 << 20)
        data = bytes(self.buffer[self.pos : end])
        self.pos = end
        return data

    def scalar(self, value_type: int) -> Any:
        fmt = _SCALAR_FORMATS.get(value_type)
        if fmt is None:
            raise GGUFFormatError(f"{self.source.name}: unknown GGUF value type {value_type}")
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def string(self) -> str:
        length = self.u64()
        if length > MAX_HEADER_BYTES:
            raise GGUFFormatError(f"{self.source.name}: corrupt string length {length}")
        return self.take(length).decode("utf-8", errors="surrogateescape")

    def value(self, value_type: int, keep_array: bool) -> Any:
        if value_type == _STRING:
            return self.string()
        if value_type != _ARRAY:
            return self.scalar(value_type)
        item_type = self.u32()
        count = self.u64()
        keep = keep_array or count <= MAX_KEPT_ARRAY
        if item_type in _SCALAR_FORMATS and not keep:
            self.take(count * struct.calcsize(_SCALAR_FORMATS[item_type]))
            return ArraySummary(item_type, count)
        items = [self.value(item_type, False) for _ in range(count)]
        return tuple(items) if keep else ArraySummary(item_type, count)


def read_header(source: ByteSource, *, first_window: int = FIRST_WINDOW) -> GGUFHeader:
    """Parse the GGUF header from ``source``, reading no tensor data."""
    cursor = _Cursor(source, first_window)
    if cursor.take(4) != GGUF_MAGIC:
        raise GGUFFormatError(f"{source.name}: not a GGUF file (bad magic)")
    version = cursor.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GGUFFormatError(
            f"{source.name}: GGUF version {version} is not supported (expected 2 or 3); "
            "convert the model again with a current llama.cpp"
        )
    tensor_count = cursor.u64()
    kv_count = cursor.u64()
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cursor.string()
        value_type = cursor.u32()
        metadata[key] = cursor.value(value_type, keep_array=key == TOKENS_KEY)
    tensors = []
    for _ in range(tensor_count):
        name = cursor.string()
        n_dims = cursor.u32()
        shape = tuple(cursor.u64() for _ in range(n_dims))
        tensors.append(TensorInfo(name, shape, cursor.u32(), cursor.u64()))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT)) or DEFAULT_ALIGNMENT
    data_offset = -(-cursor.pos // alignment) * alignment
    return GGUFHeader(source.name, version, metadata, tuple(tensors), data_offset)


def read_local_header(path: str | Path) -> GGUFHeader:
    return read_header(FileSource(path))


def vocab_info(header: GGUFHeader) -> VocabInfo:
    """The vocabulary facts llama.cpp compares between a draft and a target."""
    tokenizer = str(header.get("tokenizer.ggml.model", "none"))
    vocab_type = GGUF_TOKENIZER_TO_VOCAB_TYPE.get(tokenizer, tokenizer)
    tokens = header.get(TOKENS_KEY, ())
    if not isinstance(tokens, tuple):
        raise GGUFFormatError(f"{header.source}: has no tokenizer.ggml.tokens array")
    return VocabInfo(
        vocab_type=vocab_type,
        add_bos=bool(
            header.get("tokenizer.ggml.add_bos_token", DEFAULT_ADD_BOS.get(vocab_type, False))
        ),
        add_eos=bool(
            header.get("tokenizer.ggml.add_eos_token", DEFAULT_ADD_EOS.get(vocab_type, False))
        ),
        bos_id=int(header.get("tokenizer.ggml.bos_token_id", _DEFAULT_BOS.get(vocab_type, -1))),
        eos_id=int(header.get("tokenizer.ggml.eos_token_id", _DEFAULT_EOS.get(vocab_type, -1))),
        tokens=tokens,
    )


def _per_layer_max(value: Any, default: int) -> int:
    # Some architectures store head counts per layer as an array.
    if isinstance(value, tuple):
        return max((int(v) for v in value), default=default)
    if isinstance(value, ArraySummary) or value is None:
        return default
    return int(value)


def quantization_name(file_type: int | None) -> str:
    if file_type is None:
        return "unknown"
    try:
        name = LlamaFileType(file_type).name
    except ValueError:
        return f"type {file_type}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


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
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def kv_bytes(self, n_ctx: int, bytes_per_element: float) -> int:
        """K and V cache for ``n_ctx`` positions at the given cache element size."""
        per_position = self.n_layer * self.n_head_kv * (self.head_dim_k + self.head_dim_v)
        return int(per_position * n_ctx * bytes_per_element)


def model_facts(header: GGUFHeader) -> ModelFacts:
    arch = str(header.get("general.architecture", "unknown"))

    def arch_key(suffix: str, default: Any = None) -> Any:
        return header.get(f"{arch}.{suffix}", default)

    n_embd = int(arch_key("embedding_length", 0))
    n_head = _per_layer_max(arch_key("attention.head_count"), 0)
    n_head_kv = _per_layer_max(arch_key("attention.head_count_kv"), n_head)
    default_head_dim = n_embd // n_head if n_head else 0
    file_type = header.get("general.file_type")
    tokens = header.get(TOKENS_KEY, ())
    return ModelFacts(
        architecture=arch,
        name=str(header.get("general.name", Path(header.source).name)),
        n_layer=int(arch_key("block_count", 0)),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_embd=n_embd,
        head_dim_k=int(arch_key("attention.key_length", default_head_dim)),
        head_dim_v=int(arch_key("attention.value_length", default_head_dim)),
        context_length=int(arch_key("context_length", 0)),
        file_type=None if file_type is None else int(file_type),
        quantization=quantization_name(None if file_type is None else int(file_type)),
        tensor_data_size=header.tensor_data_size,
        n_params=header.n_params,
        vocab_size=len(tokens) if isinstance(tokens, tuple) else 0,
        split_count=int(header.get("split.count", 1)),
    )
