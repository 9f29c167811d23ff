"""How a speed is written for people, once: the window, the command line and the Lab all
call ``speed_text`` (or ``rate`` for the bare number), so the verdict, the stats line and the
status bar show the same digits for the same run."""

from __future__ import annotations


def rate(tok_s: float) -> str:
    """Tokens/sec with three significant figures, so slow runs are not all "0.8"."""
    return f"{tok_s:.1f}" if tok_s >= 10 else f"{tok_s:.2f}"


def speed_text(tok_s: float) -> str:
    """A speed with its unit: "12.3 tok/s", "4.75 tok/s"."""
    return f"{rate(tok_s)} tok/s"
