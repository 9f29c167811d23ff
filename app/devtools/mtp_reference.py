"""SpecDeck's MTP drafting against llama.cpp's own (``llama-server --spec-type draft-mtp``).

``python -m app.devtools.mtp_reference MODEL [--assistant FILE] [--tokens N] [--draft-max K]
[--rounds R] [--prompt 1,300,310]``: ``app.devtools.speed_reference`` for the MTP methods, the
model drafting for itself (or through its Gemma 4 style assistant, ``-md FILE``). It prints
speed_reference's JSON object: whether SpecDeck's speculative, SpecDeck's target-only and the
server's greedy tokens are identical, each one's tokens/sec (best of R rounds, prompt
processing excluded on both sides), both sides' acceptance, and SpecDeck's speed as a share of
the server's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.devtools.arguments import parse_arguments
from app.devtools.speed_reference import PROMPT, compare


def main(argv: list[str]) -> int:
    args = parse_arguments(argv, 1, __doc__)
    if args is None:
        return 2
    assistant = Path(args.options["--assistant"]) if "--assistant" in args.options else None
    report = compare(
        "mtp" if assistant is None else "assistant",
        args.paths[0],
        assistant,
        n_tokens=int(args.get("--tokens", "256")),
        draft_max=int(args.get("--draft-max", "3")),
        rounds=int(args.get("--rounds", "3")),
        prompt=args.token_ids("--prompt", PROMPT),
    )
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
