"""``python -m app.devtools.gpu_check.models --work DIR [--small]``: the GPU check's models,
written with SpecDeck's own synthetic writers (numpy and gguf only, no llama.cpp, so the
device script writes them while llama.cpp builds).

The fast pair keeps Qwen2.5's 151,936-token vocabulary (its tokenizer is carried without the
weights), so every per-vocabulary-entry cost is what a user pays; at the GPU shape its target
is a 16-layer, 2048-wide llama (5.4 GB in F32) and its draft the same at 512 wide, so a pass
costs about a millisecond on an H200 rather than pure launch overhead. The MTP model is a
16-layer, 2048-wide ``qwen35`` with one next-token block, at Qwen3.5's own recurrent-layer
widths (128-wide heads, 16 key and 32 value heads) so that the CUDA kernels are those a real
model uses.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from app.devtools.speed_pairs import synthetic_pair
from app.devtools.test_models.synthetic import (
    TinyQwen35Shape,
    TinyShape,
    write_tiny_qwen35,
    write_vocab_donor_pair,
)

DONOR_TOKENIZER = "donor-tokenizer.gguf"  # unpacked from python.tar.gz (prepare.py)
SCALE = 4  # the fast pair's target is its draft this many times as wide


@dataclass(frozen=True)
class Shapes:
    label: str
    draft: TinyShape  # the fast pair's draft; its target is SCALE times as wide
    mtp: TinyQwen35Shape
    n_ctx: int
    # how far the fast pair's target strays from its draft, and how small the MTP model's
    # layer branches are: measured on 16-layer stand-ins with llama-server, K = 8 and 3,
    # 0.01 gave 60 % acceptance (0.03, the tests' value, 26 %) and 0.05 gave 67 % (0.3: 8 %)
    noise: float
    branch_scale: float
    pair_size: str  # speed_pairs' size of the PAIR_METHODS' pairs


GPU_SHAPES = Shapes(
    "gpu",
    TinyShape(n_embd=512, n_layer=16, n_head=8, n_head_kv=2, n_ff=1408, n_ctx=4096),
    TinyQwen35Shape(
        n_embd=2048,
        n_trunk=16,
        n_nextn=1,
        n_head=16,
        n_head_kv=4,
        head_dim=128,
        n_ff=5632,
        n_ctx=4096,
        full_attention_interval=4,
        ssm_conv_kernel=4,
        ssm_state_size=128,
        ssm_group_count=16,
        ssm_time_step_rank=32,
        rope_sections=(24, 20, 20, 0),
    ),
    n_ctx=4096,
    noise=0.01,
    branch_scale=0.05,
    pair_size="large",
)
# the dry run on a CPU: the fast pair as the tests build it, the tiny MTP model
SMALL_SHAPES = Shapes(
    "small",
    TinyShape(n_embd=32, n_layer=2, n_head=2, n_head_kv=1, n_ff=64, n_ctx=4096),
    TinyQwen35Shape(n_ctx=2048),
    n_ctx=2048,
    noise=0.03,
    branch_scale=0.3,
    pair_size="tiny",
)


# the methods measured on speed_pairs' synthetic pairs, in the order the check runs them:
# the block drafters first (issue 35 asks for them), then the rest of issue 34's table
BLOCK_DRAFTERS = ("dflash", "dspark")
PAIR_METHODS = (*BLOCK_DRAFTERS, "eagle3", "assistant", "lookups")


@dataclass(frozen=True)
class Models:
    target: Path
    draft: Path
    mtp: Path
    # each PAIR_METHODS' synthetic target and head (none for lookups), speed_pairs' pairs
    pairs: dict[str, tuple[Path, Path | None]]

    def describe(self, shapes: Shapes) -> dict[str, object]:
        return {
            "fast_target": {"file": self.target.name, "bytes": self.target.stat().st_size},
            "fast_draft": {"file": self.draft.name, "bytes": self.draft.stat().st_size},
            "fast_draft_shape": asdict(shapes.draft),
            "fast_target_scale": SCALE,
            "mtp": {"file": self.mtp.name, "bytes": self.mtp.stat().st_size},
            "mtp_shape": asdict(shapes.mtp),
            "fast_pair_noise": shapes.noise,
            "mtp_branch_scale": shapes.branch_scale,
            "pairs": {
                name: {"target": t.name, "head": h.name if h else None, "size": shapes.pair_size}
                for name, (t, h) in self.pairs.items()
            },
        }


def _pair_paths(folder: Path, method: str, size: str) -> tuple[Path, Path | None]:
    """Where speed_pairs writes ``method``'s pair: a target and a head (none for lookups)."""
    head = None if method == "lookups" else folder / f"{method}-{size}-draft.gguf"
    return folder / f"{method}-{size}-target.gguf", head


def model_paths(work: Path, shapes: Shapes) -> Models:
    folder = work / f"models-{shapes.label}"
    return Models(
        folder / "fast.target.gguf",
        folder / "fast.draft.gguf",
        folder / "mtp.qwen35.gguf",
        {name: _pair_paths(folder / name, name, shapes.pair_size) for name in PAIR_METHODS},
    )


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".part")


def write_models(work: Path, shapes: Shapes) -> Models:
    """The check's models, written once: a file appears only when complete."""
    models = model_paths(work, shapes)
    models.target.parent.mkdir(parents=True, exist_ok=True)
    if not (models.target.exists() and models.draft.exists()):
        target, draft = _partial(models.target), _partial(models.draft)
        write_vocab_donor_pair(
            work / DONOR_TOKENIZER,
            target,
            draft,
            scale=SCALE,
            noise=shapes.noise,
            small_shape=shapes.draft,
        )
        draft.replace(models.draft)
        target.replace(models.target)
    if not models.mtp.exists():
        mtp = _partial(models.mtp)
        write_tiny_qwen35(mtp, shape=shapes.mtp, branch_scale=shapes.branch_scale)
        mtp.replace(models.mtp)
    for name, (target, head) in models.pairs.items():
        if not (target.exists() and (head is None or head.exists())):
            # written in a folder of their own, so a half-written pair is never taken whole
            partial = target.parent.with_name(target.parent.name + ".part")
            partial.mkdir(parents=True, exist_ok=True)
            written = synthetic_pair(name, partial, shapes.pair_size)
            if written != (partial / target.name, head and partial / head.name):
                raise RuntimeError(f"{name}: synthetic_pair wrote {written}")
            shutil.rmtree(target.parent, ignore_errors=True)
            partial.replace(target.parent)
    return models


def main(argv: list[str]) -> int:
    options = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    shapes = SMALL_SHAPES if "--small" in argv else GPU_SHAPES
    models = write_models(Path(options["--work"]), shapes)
    print(json.dumps(models.describe(shapes)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
