"""The DFlash probe's drafting against llama.cpp's own (``llama-server --spec-type
draft-dflash`` or ``draft-dspark`` ``-md HEAD``).

``python -m app.devtools.dflash_reference TARGET HEAD [--tokens N] [--draft-max K]
[--prompts "1,300,310;1,290,291"]`` starts llama-server (built from the llama.cpp vendored in
the installed llama-cpp-python, so the same llama.cpp) with the block drafter drafting for the
target (``draft-dspark`` when the head has a Markov head, as llama-server's own detection
decides), asks it for N greedy tokens (``ignore_eos``) after each token-id prompt, runs
``app.devtools.dflash_probe`` on the same prompts in a child process, and prints one JSON
object: per prompt, the server's tokens and drafted and accepted counts, whether they equal the
probe's target-only and speculative tokens, and the probe's counts (equal when the probe drives
the head as llama.cpp does).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gguf import GGUFReader

from app.devtools.head_reference import compared_rows, main_for, server_runs

PROBE = "app.devtools.dflash_probe"


def spec_type(head: Path) -> str:
    """llama-server's speculative type for this head: the Markov head makes it DSpark
    (common_speculative_types_from_gguf)."""
    markov = any(t.name == "markov_w1.weight" for t in GGUFReader(str(head)).tensors)
    return "draft-dspark" if markov else "draft-dflash"


def compare(
    target: Path, head: Path, prompts: list[list[int]], n_tokens: int, draft_max: int
) -> dict[str, Any]:
    kind = spec_type(head)
    drafting = ["-m", str(target), "-md", str(head), "--spec-type", kind]
    drafting += ["--spec-draft-n-max", str(draft_max), "--spec-draft-n-min", "0"]
    drafting += ["--spec-draft-p-min", "0"]
    servers = server_runs(drafting, prompts, n_tokens)
    rows = compared_rows(
        PROBE, target, head, prompts, servers, n_tokens, draft_max, "accepted_per_position"
    )
    return {"spec_type": kind, "tokens": n_tokens, "draft_max": draft_max, "prompts": rows}


def main(argv: list[str]) -> int:
    return main_for(argv, __doc__, compare, draft_max=4)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
