"""Command line: `python -m app` subcommands (no Qt until the window is asked for)."""
