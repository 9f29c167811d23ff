"""Serving overhead per token: the engine driven directly vs the same engine behind
``python -m app serve``, same pair, same prompt, greedy, end-of-generation ignored.

A developer's measurement, not a test:
``python -m tests.serve.overhead TARGET DRAFT [tokens] [threads] [repeats]``

Prints, as medians over the repeats (after one warm-up each):
- ``generate``: ``python -m app generate``'s own tok/s (the engine's clock) as ms/token;
- ``direct``: an ``EngineHost`` driven in this process as ``generate`` drives it, timed by
  the caller: ms/token from the first token to the last, and whole-request wall time;
- ``served``: the same request streamed through the server with the ``openai`` client,
  timed by the client the same way, and the server's own ``timings`` for that request;
- for both, the caller's wall time per request less the engine's own (prefill + generation),
  per token: what the engine process's pipe (direct) or the pipe plus HTTP (served) adds.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.events import PrefillEvent, RunSummary, TokenEvent
from app.engine.process.host import EngineHost, LoadRequest
from tests.serve.conftest import ROOT, ServeProcess, app_env

PROMPT = "Write a Python function fizzbuzz(n) and explain it."


def _generate(options: list[str], tokens: int) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "app", "generate", *options, "--ignore-eos"]
        + ["--max-tokens", str(tokens), "--no-colour", PROMPT],
        cwd=ROOT,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found = re.search(r"(\d+) tokens, ([\d.]+) tok/s", out.stderr)
    assert found and int(found[1]) == tokens, out.stderr
    return 1000.0 / float(found[2])


def _direct(host: EngineHost, tokens: int) -> tuple[float, float, float, float]:
    began = time.perf_counter()
    prompt = host.tokenize_chat([{"role": "user", "content": PROMPT}])
    request = GenerationRequest(prompt, max_tokens=tokens, spec=SpecConfig(), ignore_eos=True)
    stamps: list[float] = []
    summary = prefill = None
    for batch in host.generate(request):
        now = time.perf_counter()
        for event in batch:
            if isinstance(event, TokenEvent):
                stamps.append(now)
            elif isinstance(event, PrefillEvent):
                prefill = event
            elif isinstance(event, RunSummary):
                summary = event
    wall = (time.perf_counter() - began) * 1000
    assert summary is not None and prefill is not None and summary.tokens == tokens
    engine_ms = prefill.ms + tokens / summary.tok_s * 1000
    per_token = (stamps[-1] - stamps[0]) * 1000 / (tokens - 1)
    return per_token, wall, 1000 / summary.tok_s, (wall - engine_ms) / tokens


def _served(server: ServeProcess, tokens: int) -> tuple[float, float, float, float]:
    client = server.client()
    began = time.perf_counter()
    first = last = 0.0
    timings: dict = {}
    for chunk in client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": PROMPT}],
        temperature=0,
        max_tokens=tokens,
        stream=True,
    ):
        now = time.perf_counter()
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or now
            last = now
        if chunk.model_extra and chunk.model_extra.get("timings"):
            timings = chunk.model_extra["timings"]
    wall = (time.perf_counter() - began) * 1000
    assert timings["predicted_n"] == tokens
    engine_ms = timings["prompt_ms"] + timings["predicted_ms"]
    per_token = (last - first) * 1000 / (tokens - 1)
    return per_token, wall, timings["predicted_per_token_ms"], (wall - engine_ms) / tokens


def main(argv: list[str]) -> int:
    target, draft = argv[0], argv[1]
    tokens = int(argv[2]) if len(argv) > 2 else 128
    threads = int(argv[3]) if len(argv) > 3 else 2
    repeats = int(argv[4]) if len(argv) > 4 else 5
    options = ["--target", target, "--draft", draft, "--threads", str(threads), "--ctx", "2048"]

    generate = [_generate(options, tokens) for _ in range(repeats)]

    host = EngineHost()
    try:
        spec = ModelSpec(target, n_ctx=2048, n_threads=threads)
        host.load(LoadRequest(spec, ModelSpec(draft, n_ctx=2048, n_threads=threads)))
        _direct(host, tokens)
        direct = [_direct(host, tokens) for _ in range(repeats)]
    finally:
        host.close()

    with tempfile.TemporaryDirectory() as logs:
        server = ServeProcess([*options, "--ignore-eos"], Path(logs))
        try:
            _served(server, tokens)
            served = [_served(server, tokens) for _ in range(repeats)]
        finally:
            server.close()

    def med(rows: list, i: int) -> float:
        return statistics.median(r[i] for r in rows)

    print(f"{tokens} tokens, {threads} threads, median of {repeats}")
    print(f"generate (engine clock)        {statistics.median(generate):7.3f} ms/token")
    print(
        f"direct EngineHost (caller)     {med(direct, 0):7.3f} ms/token  "
        f"wall {med(direct, 1):7.1f} ms  engine {med(direct, 2):7.3f} ms/token"
    )
    print(
        f"served, streamed (client)      {med(served, 0):7.3f} ms/token  "
        f"wall {med(served, 1):7.1f} ms  engine {med(served, 2):7.3f} ms/token"
    )
    print(
        f"caller wall - engine time: direct {med(direct, 3):.3f} ms/token, "
        f"served {med(served, 3):.3f} ms/token"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
