"""How long one pass of each model takes on each thread count, quiet and while other
programs keep cores busy: the measurement behind ``thread_fit.ThreadGovernor``.

``python -m app.devtools.thread_passes [TARGET [DRAFT]] [--busy 1,2] [--repeats 2]``

Without files it measures the CPU benchmark pair (Qwen2.5-Coder-0.5B F32 target, Q2_K
draft; ``app.models.shipped``). Each model decodes a 60-token prompt, then 12 single-token
passes per thread count (1 up to the usable cores); the median pass is reported, quiet and
with N cores kept busy (``--busy``: one line per count; ``machine_load``'s steady load, which
spins and streams memory as other programs do), ``--repeats`` times. It also checks that
every thread count gives the same logits, bit for bit, and says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from app.engine.config import ModelSpec, usable_cores
from app.engine.llama.backend import LlamaContext, LlamaModel
from app.engine.machine_load import LoadRunning, MachineLoad

PROMPT = list(range(1000, 1060))
PASSES = 12


def _pass_ms(ctx: LlamaContext, threads: int) -> tuple[float, np.ndarray]:
    """The median single-token pass on ``threads``, and the last pass's logits."""
    ctx.set_threads(threads)
    ctx.truncate(0)
    ctx.decode(PROMPT, logits="last")
    times = []
    for i in range(PASSES):
        began = time.perf_counter()
        ctx.decode([PROMPT[0] + i], logits="last")
        times.append((time.perf_counter() - began) * 1000.0)
    return statistics.median(times), ctx.logits(-1).copy()


def _table(contexts: dict[str, LlamaContext], thread_counts: list[int]) -> tuple[dict, bool]:
    figures: dict[str, float] = {}
    same = True
    for name, ctx in contexts.items():
        first: np.ndarray | None = None
        for threads in thread_counts:
            ms, logits = _pass_ms(ctx, threads)
            figures[f"{name} {threads}t ms"] = round(ms, 1)
            same = same and (first is None or bool(np.array_equal(first, logits)))
            first = logits if first is None else first
    return figures, same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.devtools.thread_passes")
    parser.add_argument("models", nargs="*", type=Path, help="target [draft] (default: Qwen)")
    parser.add_argument("--busy", default="1,2", help="cores kept busy, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.models:
        paths = list(args.models[:2])
    else:
        from app.models.shipped import qwen_coder_pair

        paths = list(qwen_coder_pair())
    contexts = {}
    for name, path in zip(("target", "draft"), paths, strict=False):
        spec = ModelSpec(str(path), n_ctx=256, n_threads=1)
        contexts[name] = LlamaContext(LlamaModel(spec), spec)
    cores = len(usable_cores())
    thread_counts = list(range(1, cores + 1))
    busy_counts = [int(n) for n in args.busy.split(",") if n.strip()]
    for repeat in range(args.repeats):
        for busy in [0, *busy_counts]:
            share = min(busy, cores) / cores
            load = LoadRunning(MachineLoad("steady", share=share, limit_s=600.0))
            with load if busy else nullcontext():
                figures, same = _table(contexts, thread_counts)
            line = {"repeat": repeat, "busy_cores": busy, **figures, "same_logits": same}
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
