"""The EAGLE-3 probe's drafting against llama.cpp's own (``llama-server --spec-type
draft-eagle3 -md HEAD``).

``python -m app.devtools.eagle3_reference TARGET HEAD [--tokens N] [--draft-max K]
[--prompts "1,300,310;1,290,291"]`` starts llama-server (built from the llama.cpp vendored in
the installed llama-cpp-python, so the same llama.cpp) with the head drafting for the target,
asks it for N greedy tokens (``ignore_eos``) after each token-id prompt, runs
``app.devtools.eagle3_probe`` on the same prompts in a child process, and prints one JSON
object: per prompt, whether the server's tokens equal the probe's target-only and speculative
tokens, and both sides' drafted and accepted counts (equal when the probe drives the head as
llama.cpp does: the same drafts, accepted at the same places).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from app.devtools.head_reference import compared_rows, main_for, server_runs

PROBE = "app.devtools.eagle3_probe"


def compare(
    target: Path, head: Path, prompts: list[list[int]], n_tokens: int, draft_max: int
) -> dict[str, Any]:
    drafting = ["-m", str(target), "-md", str(head), "--spec-type", "draft-eagle3"]
    drafting += ["--spec-draft-n-max", str(draft_max), "--spec-draft-n-min", "0"]
    servers = server_runs(drafting, prompts, n_tokens)
    rows = compared_rows(
        PROBE, target, head, prompts, servers, n_tokens, draft_max, "acceptance_per_position"
    )
    return {"tokens": n_tokens, "draft_max": draft_max, "prompts": rows}


def main(argv: list[str]) -> int:
    return main_for(argv, __doc__, compare, draft_max=3)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
