"""What one target pass costs by its size, in a fresh process: each size's first uses, its
price repeated, its price where passes of other sizes come between (as in speculative
decoding), and the same with the bench's greedy sampler chain in ``llama_decode``.

The GPU check's first run had the cost model price verifying 2, 5, 9 and 17 tokens of the
fast pair at 14.9, 11.3, 20.4 and 38.5 ms beside 1.94 ms for one, and the guard never
drafted. Each of these would explain it, and each needs another fix: a size's first use
(kernels loaded on first launch: a warm-up at load), its second (a CUDA graph captured when a
shape repeats), a cost of alternating shapes (no graph is ever reused), or the sampler chain's
work per output row (a top-k over the whole vocabulary for every row). The figures tell them
apart. ``python -m app.devtools.gpu_check.pass_shapes MODEL N_CTX THREADS`` prints them as
JSON; ``measure`` runs that in a child, so that nothing an earlier phase loaded is warm.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.config import ModelSpec, SamplerConfig
from app.engine.llama.backend import LlamaContext, LlamaModel

PASS_SIZES = (1, 2, 3, 4, 5, 8, 9, 16, 17)  # a verification's sizes up to K = 16
PASS_DEPTH = 64  # tokens in the cache before every timed pass
FIRST_USES = 3  # the first, second and third pass of a size, each on its own
REPEATS = 5  # passes whose median prices a size, after its first uses
CHILD_TIMEOUT_S = 240


def _timed(ctx: LlamaContext, n: int) -> float:
    """One pass over n tokens at PASS_DEPTH, every row's logits out, in ms."""
    ctx.truncate(PASS_DEPTH)
    began = time.perf_counter()
    ctx.decode(list(range(20, 20 + n)), logits="all")
    return (time.perf_counter() - began) * 1000.0


def _single_between(ctx: LlamaContext, n: int) -> float:
    """A pass over n tokens right after a single-token one, as a verification follows a
    target-only step or another length's verification."""
    ctx.truncate(PASS_DEPTH)
    ctx.decode([30], logits="last")
    return _timed(ctx, n)


def _series(
    ctx: LlamaContext, measure: Callable[[LlamaContext, int], float], first_uses: int
) -> dict[str, Any]:
    by_size: dict[str, Any] = {}
    for n in PASS_SIZES:
        times = [measure(ctx, n) for _ in range(first_uses + REPEATS)]
        by_size[str(n)] = {
            "first_uses_ms": [round(t, 3) for t in times[:first_uses]],
            "median_ms": round(statistics.median(times[first_uses:]), 3),
        }
    return by_size


def pass_shapes(model: Path, n_ctx: int, threads: int) -> dict[str, Any]:
    """The figures, measured in this process (``measure`` for a fresh one)."""
    spec = ModelSpec(str(model), n_ctx=n_ctx, n_threads=threads)
    loaded = LlamaModel(spec)
    ctx = LlamaContext(loaded, spec)
    try:
        ctx.decode(list(range(10, 10 + PASS_DEPTH)), logits="none")
        report: dict[str, Any] = {"model": model.name, "depth": PASS_DEPTH}
        # repeated first, while every size is still new to the process
        report["repeated"] = _series(ctx, _timed, FIRST_USES)
        report["after_a_single_pass"] = _series(ctx, _single_between, 0)
        # the bench's chain at T = 0 (top-k of the greedy candidates, then a softmax);
        # where it cannot run on the device this says why, and nothing is timed
        report["sampler_chain"] = ctx.sample_with(SamplerConfig())
        if ctx.chain is not None:
            report["after_a_single_pass_with_chain"] = _series(ctx, _single_between, 1)
        return report
    finally:
        ctx.close()
        loaded.close()


def measure(model: Path, n_ctx: int, threads: int) -> dict[str, Any]:
    """``pass_shapes`` in a child process: its first uses are the process's first uses."""
    argv = [sys.executable, "-m", __name__, str(model), str(n_ctx), str(threads)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"pass_shapes ended with {done.returncode}: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def summary(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """By size: its first uses, then its median repeated, between single passes and (where
    the chain ran on the device) with the chain, in ms."""
    chained = figures.get("after_a_single_pass_with_chain", {})
    out: dict[str, dict[str, Any]] = {}
    for n, repeated in figures["repeated"].items():
        row = {
            "first_uses": repeated["first_uses_ms"],
            "repeated": repeated["median_ms"],
            "between_singles": figures["after_a_single_pass"][n]["median_ms"],
        }
        if n in chained:
            row["with_chain_first_and_median"] = [
                *chained[n]["first_uses_ms"],
                chained[n]["median_ms"],
            ]
        out[n] = row
    return out


def main(argv: list[str]) -> int:
    model, n_ctx, threads = Path(argv[0]), int(argv[1]), int(argv[2])
    print(json.dumps(pass_shapes(model, n_ctx, threads)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
