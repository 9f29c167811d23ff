"""Host ms/token: wall time outside llama_decode per generated token, hover probabilities on,
at T=0 and T=0.8, speculative (fixed draft length 8, no guard) and target-only, on one pair.
A developer's benchmark, not a test: ``python -m app.devtools.hostcost TARGET DRAFT [tokens]
[threads] [--probs-off]`` (``--probs-off`` adds the T=0 paths without hover probabilities:
the rest of the loop's cost, without the full-vocabulary softmax normaliser)
(the fast pair: ``app.models.shipped.fast_pair()``; the CPU pair: ``qwen_coder_pair()``).
``python -m app bench`` reports the same figure per prompt as ``host_ms_per_token``."""

from __future__ import annotations

import statistics
import sys

from app.engine.config import GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.engine import Engine
from app.engine.events import RunSummary

PROMPT = "Write a Python function fizzbuzz(n) and explain it."


def main(argv: list[str]) -> int:
    probs_off = "--probs-off" in argv
    argv = [a for a in argv if a != "--probs-off"]
    target, draft = argv[0], argv[1]
    tokens = int(argv[2]) if len(argv) > 2 else 256
    threads = int(argv[3]) if len(argv) > 3 else 2
    paths = [(t, mode, True) for t in (0.0, 0.8) for mode in ("baseline", "speculative")]
    if probs_off:
        paths += [(0.0, mode, False) for mode in ("baseline", "speculative")]
    engine = Engine(
        ModelSpec(target, n_ctx=2048, n_threads=threads),
        ModelSpec(draft, n_ctx=2048, n_threads=threads),
    )
    prompt = engine.tokenize_chat([{"role": "user", "content": PROMPT}])
    try:
        for temperature, mode, probs in paths:
            request = GenerationRequest(
                prompt,
                max_tokens=tokens,
                ignore_eos=True,
                token_probs=probs,
                sampler=SamplerConfig(temperature=temperature, seed=1),
                spec=SpecConfig(draft_max=8, adaptive=False, collapse_guard=False),
                speculative=mode == "speculative",
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


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
