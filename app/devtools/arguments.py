"""The developer tools' command lines: ``MODEL... [--name value]...``, read without argparse
so that each tool's usage is its module docstring."""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Arguments:
    options: dict[str, str]
    paths: tuple[Path, ...]

    def get(self, name: str, default: str) -> str:
        return self.options.get(name, default)

    def token_ids(self, name: str, default: Sequence[int]) -> list[int]:
        """A comma-separated token-id prompt such as ``1,300,310``."""
        return [int(t) for t in self.options.get(name, "").split(",") if t] or list(default)


def parse_arguments(
    argv: Sequence[str], n_paths: int, usage: str | None, flags: Collection[str] | None = None
) -> Arguments | None:
    """``argv``'s ``--name value`` options (only ``flags`` take a value when given; bare
    words of theirs are left alone) and its ``n_paths`` paths; ``None`` after printing
    ``usage`` when the paths are not ``n_paths``."""
    options = {
        a: argv[i + 1]
        for i, a in enumerate(argv[:-1])
        if (a in flags if flags is not None else a.startswith("--"))
    }
    values = set(options.values())
    paths = tuple(Path(a) for a in argv if not a.startswith("--") and a not in values)
    if len(paths) != n_paths:
        print(usage, file=sys.stderr)
        return None
    return Arguments(options, paths)
