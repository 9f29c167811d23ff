"""Tiny synthetic GGUF files for header, compatibility and download tests.

The tensors are small random arrays: enough for the header reader and the tensor table,
not a model llama.cpp could run (``app.devtools.test_models.synthetic`` makes those).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType


def spm_tokens(n_extra: int = 64, *, tweak: dict[int, str] | None = None) -> list[str]:
    """<unk> <s> </s>, the 256 byte tokens, then ``n_extra`` word pieces."""
    tokens = ["<unk>", "<s>", "</s>"]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581w{i}" for i in range(n_extra)]
    for token_id, text in (tweak or {}).items():
        tokens[token_id] = text
    return tokens


def write_gguf(
    path: Path,
    *,
    name: str = "tiny",
    arch: str = "llama",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    context_length: int = 2048,
    tokens: list[str] | None = None,
    bos_id: int = 1,
    eos_id: int = 2,
    add_bos: bool = True,
    file_type: int = LlamaFileType.ALL_F32,
    padding_bytes: int = 0,
    seed: int = 0,
) -> Path:
    """Write a small GGUF; ``padding_bytes`` adds a tensor so downloads take a few chunks."""
    tokens = tokens if tokens is not None else spm_tokens()
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_block_count(n_layer)
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_embd * 2)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_file_type(int(file_type))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([1] * len(tokens))
    writer.add_bos_token_id(bos_id)
    writer.add_eos_token_id(eos_id)
    writer.add_add_bos_token(add_bos)
    writer.add_add_eos_token(False)
    writer.add_tensor("token_embd.weight", rng.standard_normal((len(tokens), n_embd), np.float32))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    if padding_bytes:
        writer.add_tensor("pad.weight", rng.standard_normal(padding_bytes // 4, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# --- hand-made GGUF bytes, for headers no writer would produce ------------------------------

GGUF_U32, GGUF_I32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_U64 = 4, 5, 7, 8, 9, 10


def enc_str(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def kv_u32(key: str, value: int) -> bytes:
    return enc_str(key) + struct.pack("<II", GGUF_U32, value)


def kv_string(key: str, text: str | bytes) -> bytes:
    return enc_str(key) + struct.pack("<I", GGUF_STRING) + enc_str(text)


def kv_array(key: str, item_type: int, count: int, payload: bytes = b"") -> bytes:
    return enc_str(key) + struct.pack("<IIQ", GGUF_ARRAY, item_type, count) + payload


def kv_tokens(tokens: list[str] | list[bytes]) -> bytes:
    payload = b"".join(enc_str(t) for t in tokens)
    return kv_array("tokenizer.ggml.tokens", GGUF_STRING, len(tokens), payload)


def tensor_entry(
    name: str | bytes, shape: tuple[int, ...], ggml_type: int = 0, offset: int = 0
) -> bytes:
    return (
        enc_str(name)
        + struct.pack("<I", len(shape))
        + b"".join(struct.pack("<Q", d) for d in shape)
        + struct.pack("<IQ", ggml_type, offset)
    )


def llama_kvs(arch: str | bytes = "llama", name: str | bytes = "raw") -> list[bytes]:
    """The keys of a small, valid llama header (vocabulary included)."""
    return [
        kv_string("general.architecture", arch),
        kv_string("general.name", name),
        kv_u32("llama.block_count", 2),
        kv_u32("llama.embedding_length", 64),
        kv_u32("llama.attention.head_count", 4),
        kv_u32("llama.context_length", 2048),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
    ]


def raw_gguf(
    kvs: list[bytes],
    tensors: list[bytes] | None = None,
    *,
    n_kv: int | None = None,
    n_tensors: int | None = None,
    data: bytes = b"",
) -> bytes:
    tensors = tensors if tensors is not None else [tensor_entry("output_norm.weight", (64,))]
    head = b"GGUF" + struct.pack(
        "<IQQ",
        3,
        len(tensors) if n_tensors is None else n_tensors,
        len(kvs) if n_kv is None else n_kv,
    )
    body = head + b"".join(kvs) + b"".join(tensors)
    return body + bytes(-len(body) % 32) + (data or bytes(256))


def qwen36_27b_header(path: Path, *, nextn: int = 1, block_count: int = 65) -> Path:
    """A header (no tensor data) shaped like Qwen3.6-27B with its next-token layer, from the
    model's published config: 64 trunk layers, every 4th full attention (4 KV heads of 256),
    gated delta-net layers (conv 4, inner 6144, state 128, 16 groups), 1 MTP block."""
    arch = "qwen35"
    kvs = [
        kv_string("general.architecture", arch),
        kv_string("general.name", "Qwen3.6-27B-shaped"),
        kv_u32(f"{arch}.block_count", block_count),
        kv_u32(f"{arch}.nextn_predict_layers", nextn),
        kv_u32(f"{arch}.context_length", 262_144),
        kv_u32(f"{arch}.embedding_length", 5120),
        kv_u32(f"{arch}.attention.head_count", 24),
        kv_u32(f"{arch}.attention.head_count_kv", 4),
        kv_u32(f"{arch}.attention.key_length", 256),
        kv_u32(f"{arch}.attention.value_length", 256),
        kv_u32(f"{arch}.full_attention_interval", 4),
        kv_u32(f"{arch}.ssm.conv_kernel", 4),
        kv_u32(f"{arch}.ssm.inner_size", 6144),
        kv_u32(f"{arch}.ssm.state_size", 128),
        kv_u32(f"{arch}.ssm.group_count", 16),
        kv_u32(f"{arch}.ssm.time_step_rank", 48),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
    ]
    q8_0 = 8
    mtp_block = block_count - nextn
    tensors = [
        tensor_entry("blk.0.attn_norm.weight", (5120,), 0, 0),
        tensor_entry(f"blk.{mtp_block}.nextn.eh_proj.weight", (10240, 5120), q8_0, 20480),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw_gguf(kvs, tensors))
    return path


def head_header(path: Path, arch: str = "gemma4-assistant", *extra: bytes) -> Path:
    """A header (no tensor data) of a drafting head: a Gemma 4 assistant by default."""
    kvs = [
        kv_string("general.architecture", arch),
        kv_string("general.name", f"{arch} head"),
        kv_u32(f"{arch}.block_count", 4),
        kv_u32(f"{arch}.nextn_predict_layers", 4),
        kv_u32(f"{arch}.embedding_length", 64),
        kv_u32(f"{arch}.attention.head_count", 4),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_tokens(spm_tokens(8)),
        *extra,
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw_gguf(kvs))
    return path
