"""``python -m app``: the desktop app, or a CLI subcommand."""

from __future__ import annotations

import sys
import time

import app

app.START_TIME = time.perf_counter()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    from app.cli.main import run

    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
