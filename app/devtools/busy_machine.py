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

from app.engine.machine_load import LoadRunning, MachineLoad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.devtools.busy_machine")
    parser.add_argument("load", help="bursts, bursts:SEED or steady:SHARE")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long, without a command (default 60)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- a command to run under it")
    args = parser.parse_args(argv)
    try:
        load = MachineLoad.parse(args.load)
    except ValueError as exc:
        parser.error(str(exc))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    limit = load.limit_s if command else max(0.0, args.seconds)
    load = MachineLoad(**{**load.__dict__, "limit_s": limit})
    print(f"busy machine: {load.describe()}", file=sys.stderr)
    with LoadRunning(load):
        if command:
            return subprocess.call(command)
        try:
            time.sleep(limit)
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
