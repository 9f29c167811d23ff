"""How far the bench's time-to-first-token ratio swings by chance: per prompt, many one-token
runs per mode with every cache emptied, the modes taking turns (as ``bench`` takes them), and
the speculative ÷ target-only ratio of their medians over groups of runs. A developer's
benchmark, not a test::

    python -m app.devtools.first_token_spread TARGET DRAFT PROMPTS.jsonl [runs] [groups] [threads]

``groups``: sizes, comma-separated (default ``3,7``). ``paired``: the median of the runs' own
ratios, the figure to compare with 1.0; then, for each size, what a bench taking that many runs
per mode would have reported on each of ``runs // size`` tries.
"""

from __future__ import annotations

import statistics
import sys
from contextlib import closing
from pathlib import Path

from app.cli.main import bench_prompts
from app.devtools.hostcost import pair_engine
from app.engine.bench import first_token_times
from app.engine.config import GenerationRequest
from app.engine.engine import Engine


def group_ratios(base: list[float], spec: list[float], group: int) -> list[float]:
    """The ratio of medians over each whole group of ``group`` runs."""
    whole = len(base) - len(base) % group
    return [
        statistics.median(spec[i : i + group]) / statistics.median(base[i : i + group])
        for i in range(0, whole, group)
    ]


def prompt_row(engine: Engine, item: dict[str, str], runs: int, sizes: list[int]) -> str:
    """One prompt's line of the table."""
    prompt = engine.tokenize_chat([{"role": "user", "content": item["prompt"]}])
    base, spec = first_token_times(engine, GenerationRequest(prompt), runs)
    paired = statistics.median(s / b for b, s in zip(base, spec, strict=True))
    groups = [", ".join(f"{r:.3f}" for r in group_ratios(base, spec, n)) for n in sizes]
    figures = [f"{statistics.median(base):.1f}", f"{statistics.median(spec):.1f}", f"{paired:.3f}"]
    return " | ".join([item["id"], str(len(prompt)), *figures, *groups])


def main(argv: list[str]) -> int:
    target, draft, prompts = argv[0], argv[1], Path(argv[2])
    runs = int(argv[3]) if len(argv) > 3 else 21
    sizes = [int(x) for x in (argv[4] if len(argv) > 4 else "3,7").split(",")]
    threads = int(argv[5]) if len(argv) > 5 else 2
    columns = " | ".join(f"groups of {size}" for size in sizes)
    print(f"prompt | tokens | target-only ms | speculative ms | paired | {columns}", flush=True)
    with closing(pair_engine(target, draft, threads)) as engine:
        for item in bench_prompts(prompts):
            print(prompt_row(engine, item, runs, sizes), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
