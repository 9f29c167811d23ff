"""Keep this machine busy the way other programs do, for a while or around a command.

``python -m app.devtools.busy_machine bursts:7 --seconds 60`` loads every core in seeded
bursts for a minute; ``python -m app.devtools.busy_machine steady:0.5 -- python -m app bench
…`` runs the command with half the cores kept busy and ends the load when it ends. The bench
makes the same load itself with ``--busy`` (quiet and busy figures in one run).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import replace

from app.engine.machine_load import LoadRunning, MachineLoad


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # the command after "--" is not parsed: its own options are its own
    command = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    parser = argparse.ArgumentParser(
        prog="python -m app.devtools.busy_machine",
        usage="%(prog)s LOAD [--seconds S] [-- COMMAND ...]",
    )
    parser.add_argument("load", help="bursts, bursts:SEED or steady:SHARE")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long, without a command (default 60)"
    )
    args = parser.parse_args(words)
    try:
        load = MachineLoad.parse(args.load)
    except ValueError as exc:
        parser.error(str(exc))
    limit = load.limit_s if command else max(0.0, args.seconds)
    load = replace(load, limit_s=limit)
    print(f"busy machine: {load.describe()}", file=sys.stderr)
    with LoadRunning(load):
        if command:
            try:
                return subprocess.call(command)
            except OSError as exc:
                print(f"busy machine: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
                return 127
        try:
            time.sleep(limit)
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
