"""Host ms/token: wall time outside llama_decode per generated token, hover probabilities on,
at T=0 and T=0.8, speculative (fixed draft length 8, no guard) and target-only, on one pair.
A developer's benchmark, not a test: ``python -m app.devtools.hostcost TARGET DRAFT [tokens]
[threads] [--probs-off]`` (``--probs-off`` adds the T=0 paths without hover probabilities:
the rest of the loop's cost, without the full-vocabulary softmax normaliser)
(the fast pair: ``app.devtools.test_models.fast_pair.fast_pair()``; the CPU pair:
``qwen_coder_pair()``).
``python -m app bench`` reports the same figure per prompt as ``host_ms_per_token``.

At depth: ``python -m app.devtools.hostcost TARGET DRAFT --depths 256,1024,4096,8192
[--tokens 64] [--threads 2] [--ctx 8704] [--rounds 2]`` builds a prompt of about each many
tokens (``depth_prompts``) and prints, per depth, target-only and speculative tokens/sec with
the bench's default settings, and the host cost per token three ways: this thread's CPU time
outside ``llama_decode`` in the decoding steps and over the whole request (steady when other
programs take the cores), and the bench's wall-time figure."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from app.engine.config import GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.engine import Engine
from app.engine.events import PrefillEvent, RunSummary

PROMPT = "Write a Python function fizzbuzz(n) and explain it."


def main(argv: list[str]) -> int:
    if "--depths" in argv:
        return depth_cli(argv)
    probs_off = "--probs-off" in argv
    argv = [a for a in argv if a != "--probs-off"]
    target, draft = argv[0], argv[1]
    tokens = int(argv[2]) if len(argv) > 2 else 256
    threads = int(argv[3]) if len(argv) > 3 else 2
    paths = [(t, mode, True) for t in (0.0, 0.8) for mode in ("baseline", "speculative")]
    if probs_off:
        paths += [(0.0, mode, False) for mode in ("baseline", "speculative")]
    engine = pair_engine(target, draft, threads)
    prompt = engine.tokenize_chat([{"role": "user", "content": PROMPT}])
    try:
        for temperature, mode, probs in paths:
            request = fixed_length_request(
                prompt, tokens, temperature, speculative=mode == "speculative", probs=probs
            )
            list(engine.generate(request))  # warm-up
            runs = []
            for _ in range(3):
                last = list(engine.generate(request))[-1]
                assert isinstance(last, RunSummary)
                runs.append(last)
            host = statistics.median(r.host_ms_per_token for r in runs)
            rate = statistics.median(r.tok_s for r in runs)
            print(
                f"T={temperature} {mode:11s} host {host:.3f} ms/token  {rate:7.1f} tok/s  "
                f"{'' if probs else '(no hover probabilities)  '}"
                f"accept {runs[0].acceptance_rate:.2f}",
                flush=True,
            )
    finally:
        engine.close()
    return 0


def pair_engine(target: str, draft: str, threads: int) -> Engine:
    """The pair, loaded for a short fixed prompt."""
    return Engine(
        ModelSpec(target, n_ctx=2048, n_threads=threads),
        ModelSpec(draft, n_ctx=2048, n_threads=threads),
    )


def fixed_length_request(
    prompt: tuple[int, ...], tokens: int, temperature: float, *, speculative: bool, probs: bool
) -> GenerationRequest:
    """``tokens`` tokens whatever the answer, drafting 8 at a time with no guard: the loop's
    host cost, not the policy's choices."""
    return GenerationRequest(
        prompt,
        max_tokens=tokens,
        ignore_eos=True,
        token_probs=probs,
        sampler=SamplerConfig(temperature=temperature, seed=1),
        spec=SpecConfig(draft_max=8, adaptive=False, collapse_guard=False),
        speculative=speculative,
    )


class DecodeClock:
    """Wall time and this thread's CPU time inside ``llama_decode``, wrapped for this process.

    The calling thread computes its share of every decode (llama.cpp's thread 0), so its CPU
    time outside the decodes is the Python loop's own work, which, unlike wall time, does not
    count the time other programs hold the cores.
    """

    def __init__(self) -> None:
        import llama_cpp

        self.wall = self.cpu = 0.0
        self._module = llama_cpp
        self._decode = llama_cpp.llama_decode

        def timed(ctx: object, batch: object) -> int:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return self._decode(ctx, batch)
            finally:
                self.cpu += time.thread_time() - cpu
                self.wall += time.perf_counter() - wall

        llama_cpp.llama_decode = timed

    def close(self) -> None:
        self._module.llama_decode = self._decode


@dataclass(frozen=True)
class DepthRun:
    summary: RunSummary
    step_cpu_ms: float  # per token: this thread's CPU outside llama_decode in the steps
    request_cpu_ms: float  # the same from the start of the request (prompt processing too)


def measure(engine: Engine, clock: DecodeClock, request: GenerationRequest) -> DepthRun:
    began_cpu, began_decode = time.thread_time(), clock.cpu
    steps_cpu = steps_decode = 0.0
    summary = None
    for event in engine.generate(request):
        if isinstance(event, PrefillEvent):
            steps_cpu, steps_decode = time.thread_time(), clock.cpu
        elif isinstance(event, RunSummary):
            summary = event
    assert summary is not None and summary.tokens > 0
    now, decode = time.thread_time(), clock.cpu
    per_token = 1000.0 / summary.tokens
    return DepthRun(
        summary,
        (now - steps_cpu - (decode - steps_decode)) * per_token,
        (now - began_cpu - (decode - began_decode)) * per_token,
    )


def depth_main(
    target: str, draft: str, sizes: list[int], tokens: int, threads: int, ctx: int, rounds: int
) -> int:
    """Host cost and speedup at each context depth, with the bench's default settings."""
    from app.devtools.depth_prompts import depth_messages

    engine = Engine(
        ModelSpec(target, n_ctx=ctx, n_threads=threads),
        ModelSpec(draft, n_ctx=ctx, n_threads=threads),
    )
    clock = DecodeClock()
    try:

        def count(message: str) -> int:
            return len(engine.tokenize_chat([{"role": "user", "content": message}]))

        messages = depth_messages(sizes, count)
        print(
            "depth | target-only tok/s | speculative tok/s | speedup | host CPU ms/token per "
            "step, speculative / target-only | host CPU ms/token per request | host wall "
            "ms/token (bench) | load average",
            flush=True,
        )
        for index, (_, message) in enumerate(messages):
            prompt = engine.tokenize_chat([{"role": "user", "content": message}])
            request = GenerationRequest(
                prompt, max_tokens=tokens, ignore_eos=True, sampler=SamplerConfig(seed=1)
            )
            if index == 0:
                for speculative in (False, True):  # warm-up, as the bench does
                    measure(engine, clock, replace(request, max_tokens=8, speculative=speculative))
            runs: dict[bool, list[DepthRun]] = {False: [], True: []}
            for number in range(rounds):
                for speculative in (number % 2 == 1, number % 2 == 0):
                    runs[speculative].append(
                        measure(engine, clock, replace(request, speculative=speculative))
                    )
            base, spec = runs[False], runs[True]
            speedup = statistics.median(
                s.summary.tok_s / b.summary.tok_s for b, s in zip(base, spec, strict=True)
            )

            def median(figure: Callable[[DepthRun], float], of: list[DepthRun]) -> float:
                return statistics.median(figure(r) for r in of)

            print(
                f"{len(prompt)} | {median(lambda r: r.summary.tok_s, base):.2f} | "
                f"{median(lambda r: r.summary.tok_s, spec):.2f} | {speedup:.2f}× | "
                f"{median(lambda r: r.step_cpu_ms, spec):.3f} / "
                f"{median(lambda r: r.step_cpu_ms, base):.3f} | "
                f"{median(lambda r: r.request_cpu_ms, spec):.3f} | "
                f"{median(lambda r: r.summary.host_ms_per_token, spec):.3f} | "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        clock.close()
        engine.close()
    return 0


def depth_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.devtools.hostcost")
    parser.add_argument("target")
    parser.add_argument("draft")
    parser.add_argument("--depths", required=True, help="prompt sizes in tokens, comma-separated")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=8704)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.depths.split(",") if size.strip()]
    return depth_main(
        args.target, args.draft, sizes, args.tokens, args.threads, args.ctx, max(args.rounds, 1)
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
