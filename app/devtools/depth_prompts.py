"""Bench prompts at chosen context depths, for measuring how the loop's cost grows with depth.

A code file of this repository, repeated and cut so that the rendered chat prompt has about
the asked number of tokens on the target's tokenizer, followed by one request about it. Each
prompt starts with the one before it, so a bench over the set re-uses the cached prefix from
row to row instead of processing every depth from the start. A developer's tool::

    python -m app.devtools.depth_prompts --target T.gguf --out depth.jsonl \
        [--sizes 256,1024,4096,8192,16384] [--source app/engine/policy/controller.py]
    python -m app bench --target T.gguf --draft D.gguf --prompts depth.jsonl --ctx 17408 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from app.engine.config import DraftSource, ModelSpec
from app.engine.process.host import EngineHost
from app.engine.process.protocol import LoadRequest

REQUEST = "\n\nIn the code above, rewrite the first class with a docstring on every method."
DEFAULT_SOURCE = Path(__file__).resolve().parents[1] / "engine" / "policy" / "controller.py"


def depth_messages(
    sizes: list[int], count: Callable[[str], int], source: Path = DEFAULT_SOURCE
) -> list[tuple[int, str]]:
    """(size, user message) per size: the longest cut of the repeated ``source`` whose rendered
    prompt has at most ``size`` tokens by ``count`` (message -> rendered prompt tokens)."""
    code = source.read_text(encoding="utf-8")
    messages = []
    for size in sorted(sizes):
        repeated = code * (size * 8 // max(len(code), 1) + 1)  # > 4 characters per token
        low, high = 0, len(repeated)
        while low < high:
            middle = (low + high + 1) // 2
            if count(repeated[:middle] + REQUEST) <= size:
                low = middle
            else:
                high = middle - 1
        messages.append((size, repeated[:low] + REQUEST))
    return messages


def depth_prompts(target: Path, sizes: list[int], source: Path) -> list[dict[str, object]]:
    """One ``{"id", "prompt", "tokens"}`` per size: the prompt's rendered token count."""
    host = EngineHost()
    try:
        host.load(LoadRequest(ModelSpec(str(target), n_ctx=512), None, DraftSource.NGRAM))

        def count(message: str) -> int:
            return len(host.tokenize_chat([{"role": "user", "content": message}]))

        return [
            {"id": f"depth-{size}", "prompt": message, "tokens": count(message)}
            for size, message in depth_messages(sizes, count, source)
        ]
    finally:
        host.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.devtools.depth_prompts")
    parser.add_argument("--target", required=True, help="target GGUF (its tokenizer counts)")
    parser.add_argument("--out", required=True, help="JSONL to write")
    parser.add_argument("--sizes", default="256,1024,4096,8192,16384")
    parser.add_argument("--source", default=str(DEFAULT_SOURCE), help="the text to repeat")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = depth_prompts(Path(args.target), sizes, Path(args.source))
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for row in rows:
        print(f"{row['id']}: {row['tokens']} tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
