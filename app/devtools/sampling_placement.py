"""Where the sampler chain pays: tokens/sec and host ms/token with llama.cpp's chain run inside
``llama_decode`` ("device") and with full rows sampled on the host, taking turns in one process
on one pair (fixed draft length 8, no guard, hover probabilities on). A developer's benchmark,
not a test::

    python -m app.devtools.sampling_placement TARGET DRAFT [tokens] [threads] [rounds]

The host figure leaves ``llama_decode`` out, so a chain that moves work into the decode lowers
it whatever the decode pays for it: read it beside tokens/sec. ``auto`` (the default placement)
is the device where the output layer is on a GPU, else the host.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace

from app.devtools.hostcost import PROMPT, fixed_length_request, pair_engine
from app.engine.events import RunSummary

PLACEMENTS = ("device", "host")


def main(argv: list[str]) -> int:
    target, draft = argv[0], argv[1]
    tokens = int(argv[2]) if len(argv) > 2 else 256
    threads = int(argv[3]) if len(argv) > 3 else 2
    rounds = int(argv[4]) if len(argv) > 4 else 4
    engine = pair_engine(target, draft, threads)
    models = [m for m in (engine.target, engine.draft) if m is not None]
    prompt = engine.tokenize_chat([{"role": "user", "content": PROMPT}])
    print("T | mode | placement | tok/s | host ms/token | sampling", flush=True)
    try:
        for temperature in (0.0, 0.8):
            for speculative in (False, True):
                request = fixed_length_request(
                    prompt, tokens, temperature, speculative=speculative, probs=True
                )
                runs: dict[str, list[RunSummary]] = {p: [] for p in PLACEMENTS}
                for number in range(rounds + 1):  # round 0 warms both placements up
                    order = PLACEMENTS if number % 2 == 0 else PLACEMENTS[::-1]
                    for placement in order:
                        for model in models:
                            model.spec = replace(model.spec, sampling=placement)
                        last = list(engine.generate(request))[-1]
                        assert isinstance(last, RunSummary)
                        if number:
                            runs[placement].append(last)
                for placement, done in runs.items():
                    print(
                        f"{temperature} | {'speculative' if speculative else 'target-only'} | "
                        f"{placement} | {statistics.median(r.tok_s for r in done):.1f} | "
                        f"{statistics.median(r.host_ms_per_token for r in done):.3f} | "
                        f"{done[0].sampling}",
                        flush=True,
                    )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
