"""SpecDeck's MTP drafting against llama.cpp's own (``llama-server --spec-type draft-mtp``).

``python -m app.devtools.mtp_reference MODEL [--assistant FILE] [--tokens N] [--draft-max K]
[--rounds R] [--prompt 1,300,310]`` starts llama-server (built from the llama.cpp vendored in
the installed llama-cpp-python, so the same llama.cpp) with the model drafting for itself (or
through its Gemma 4 style assistant, ``-md FILE``), asks it for N
greedy tokens after a token-id prompt, then has SpecDeck's engine process answer the same
prompt with the same drafting policy (fixed K tokens a step, no p-min, no guard: what the
server does), and target-only. It prints one JSON object: whether the three token sequences
are identical, each one's tokens/sec (best of R rounds, prompt processing excluded on both
sides), acceptance, and SpecDeck's speed as a share of the server's. End-of-generation stops
both (the server's ``ignore_eos`` bans the token instead of passing it, so the runs would
differ there); the server returns that last token, SpecDeck does not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.devtools.arguments import parse_arguments
from app.devtools.llama_server import ServerSetup, greedy_run
from app.devtools.reference import llama_cpp_tool
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SpecConfig
from app.engine.events import RunSummary
from app.engine.process.host import EngineHost, LoadRequest

PROMPT = (1, 300, 310, 320, 330, 301)
REFERENCE_CTX = 2048


def specdeck_run(
    model: Path,
    assistant: Path | None,
    prompt: list[int],
    n_tokens: int,
    draft_max: int,
    rounds: int,
    threads: int,
) -> dict[str, Any]:
    spec = SpecConfig(draft_max=draft_max, adaptive=False, collapse_guard=False, ngram_first=False)
    host = EngineHost()
    target = ModelSpec(str(model), n_ctx=REFERENCE_CTX, n_threads=threads)
    if assistant is None:
        load = LoadRequest(target, None, DraftSource.MTP)
    else:
        drafter = ModelSpec(str(assistant), n_ctx=REFERENCE_CTX, n_threads=threads)
        load = LoadRequest(target, drafter)
    try:
        host.load(load)
        out: dict[str, Any] = {}
        for speculative in (False, True):
            request = GenerationRequest(
                tuple(prompt),
                n_tokens,
                spec=spec,
                speculative=speculative,
                token_probs=False,
            )
            runs = [_summary(host, request) for _ in range(rounds)]
            best = max(runs, key=lambda r: r.tok_s)
            out["specdeck" if speculative else "target_only"] = {
                "tokens": list(best.token_ids),
                "tok_s": round(best.tok_s, 2),
                "drafted": best.drafted,
                "accepted": best.accepted,
                "host_ms_per_token": round(best.host_ms_per_token, 4),
            }
        return out
    finally:
        host.close()


def _summary(host: EngineHost, request: GenerationRequest) -> RunSummary:
    for batch in host.generate(request):
        for event in batch:
            if isinstance(event, RunSummary):
                return event
    raise RuntimeError("the engine gave no summary")


def compare(
    model: Path,
    prompt: list[int],
    n_tokens: int,
    draft_max: int,
    rounds: int,
    threads: int = 1,
    assistant: Path | None = None,
) -> dict[str, Any]:
    spec_args = ["-md", str(assistant), "-ngld", "0"] if assistant else []
    spec_args += ["--spec-type", "draft-mtp", "--spec-draft-n-max", str(draft_max)]
    spec_args += ["--spec-draft-n-min", "0"]
    setup = ServerSetup(REFERENCE_CTX, threads)
    binary = llama_cpp_tool("llama-server")
    server = greedy_run(binary, model, spec_args, prompt, n_tokens, setup, rounds=rounds)
    ours = specdeck_run(model, assistant, prompt, n_tokens, draft_max, rounds, threads)
    specdeck, target_only = ours["specdeck"], ours["target_only"]
    # the server's answer ends with the end-of-generation token when one stopped it
    served = server["tokens"]
    same = served[: len(specdeck["tokens"])] == specdeck["tokens"]
    return {
        "model": model.name,
        "assistant": assistant.name if assistant else None,
        "tokens": len(specdeck["tokens"]),
        "draft_max": draft_max,
        "identical_to_server": same and len(served) - len(specdeck["tokens"]) in (0, 1),
        "identical_to_target_only": specdeck["tokens"] == target_only["tokens"],
        "server_tok_s": server["tok_s"],
        "specdeck_tok_s": specdeck["tok_s"],
        "target_only_tok_s": target_only["tok_s"],
        "specdeck_vs_server": round(specdeck["tok_s"] / server["tok_s"], 3),
        "server_acceptance": round(server["accepted"] / max(server["drafted"], 1), 4),
        "specdeck_acceptance": round(specdeck["accepted"] / max(specdeck["drafted"], 1), 4),
        "specdeck_host_ms_per_token": specdeck["host_ms_per_token"],
    }


def main(argv: list[str]) -> int:
    args = parse_arguments(argv, 1, __doc__)
    if args is None:
        return 2
    report = compare(
        args.paths[0],
        args.token_ids("--prompt", PROMPT),
        int(args.get("--tokens", "256")),
        int(args.get("--draft-max", "3")),
        int(args.get("--rounds", "3")),
        assistant=Path(args.options["--assistant"]) if "--assistant" in args.options else None,
    )
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
