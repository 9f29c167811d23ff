"""The weight-repacking probe: a small llama.cpp program that runs in a child process.

It writes a one-layer llama model (256 wide, so that both the Q4_0 and the K-quant tile
alignments hold), has llama.cpp quantize it to Q4_0, loads it with repacking on and decodes
a batch (the AMX matrix-matrix kernel) and then one token (the matrix-vector path). If
llama.cpp's AMX kernel is broken, the child dies here and ``repacking`` turns repacking off.

It calls llama.cpp's C API itself rather than the app's loader (``llama_backend``), which
asks ``repacking`` for the verdict this program decides. The model writer is the one piece
of model writing the shipped app needs; the test models live with the developer tools.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.llama.quantize import quantize
from app.engine.llama.runtime import ensure_backend
from app.gguf.writing import write_out

WIDTH, FEED_FORWARD, HEADS, CONTEXT = 256, 512, 4, 64
# SPM token types: unknown, control, byte
_UNKNOWN, _CONTROL, _BYTE = 2, 3, 6


def write_probe_model(path: Path) -> Path:
    """A one-layer F32 llama with a byte vocabulary and seeded random weights."""
    import gguf
    import numpy as np

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256
    rng = np.random.default_rng(0)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * cols**-0.5).astype(np.float32)

    ones = np.ones(WIDTH, dtype=np.float32)
    tensors = {
        "token_embd.weight": mat(len(tokens), WIDTH),
        "output_norm.weight": ones,
        "output.weight": mat(len(tokens), WIDTH),
        "blk.0.attn_norm.weight": ones,
        "blk.0.attn_q.weight": mat(WIDTH, WIDTH),
        "blk.0.attn_k.weight": mat(WIDTH, WIDTH),
        "blk.0.attn_v.weight": mat(WIDTH, WIDTH),
        "blk.0.attn_output.weight": mat(WIDTH, WIDTH),
        "blk.0.ffn_norm.weight": ones,
        "blk.0.ffn_gate.weight": mat(FEED_FORWARD, WIDTH),
        "blk.0.ffn_up.weight": mat(FEED_FORWARD, WIDTH),
        "blk.0.ffn_down.weight": mat(WIDTH, FEED_FORWARD),
    }
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    write_out(writer, tensors)
    return path


def _decode(ctx: object, tokens: list[int], start: int) -> None:
    """One ``llama_decode`` of ``tokens`` from position ``start``, every row's logits out."""
    import llama_cpp

    batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    try:
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        batch.n_tokens = len(tokens)
        rc = llama_cpp.llama_decode(ctx, batch)
    finally:
        llama_cpp.llama_batch_free(batch)
    if rc != 0:
        raise SystemExit(f"llama_decode of the probe model returned {rc}")


def probe_child(model_dir: str) -> None:
    """Runs in the child: a real AMX-type matrix product with repacking on."""
    import llama_cpp

    source = write_probe_model(Path(model_dir) / "probe.gguf")
    quantized = quantize(source, "Q4_0", threads=1)
    ensure_backend()
    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = 999  # as the app loads a model: every layer that fits
    model_params.use_mmap = True
    model_params.use_extra_bufts = True  # repacking on
    model = llama_cpp.llama_model_load_from_file(str(quantized).encode(), model_params)
    if not model:
        raise SystemExit("llama.cpp could not load the probe model")
    ctx_params = llama_cpp.llama_context_default_params()
    ctx_params.n_ctx = CONTEXT
    ctx_params.n_batch = ctx_params.n_ubatch = 32
    ctx_params.n_seq_max = 1
    ctx_params.n_threads = ctx_params.n_threads_batch = 2
    ctx = llama_cpp.llama_init_from_model(model, ctx_params)
    if not ctx:
        llama_cpp.llama_model_free(model)
        raise SystemExit("llama.cpp could not create a context for the probe model")
    try:
        _decode(ctx, list(range(3, 19)), 0)  # a batch: the AMX matrix-matrix kernel
        _decode(ctx, [20], 16)  # one token: the matrix-vector path
    finally:
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
