"""Figures of an answer while it is written, without Qt: its token count and its speed.

A run's batches carry the time since the run started, the wait for the prompt included: the
first token's rate would be "1 tokens · 0.07 tok/s", the prompt's processing read as a slow
answer. The speed is counted from the first token on, as a finished run's ``tok_s`` counts
generation time without the prefill, and shown only once a second token came.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.figures import speed_text


def tokens_text(count: int) -> str:
    """ "1 token", "12 tokens"."""
    return f"{count} token{'s' * (count != 1)}"


@dataclass
class LiveRate:
    """Each run's first token (its time since the run started, and the count then)."""

    first: dict[str, tuple[float, int]] = field(default_factory=dict)

    def clear(self) -> None:
        self.first.clear()

    def rate(self, run: str, tokens: int, elapsed_s: float) -> float | None:
        """Tokens per second after the first token; None until it means something."""
        if tokens <= 0:
            return None
        began = self.first.setdefault(run, (elapsed_s, tokens))
        made, seconds = tokens - began[1], elapsed_s - began[0]
        return made / seconds if made > 0 and seconds > 0 else None

    def text(self, run: str, tokens: int, elapsed_s: float) -> str:
        """ "1 token", then "12 tokens · 3.4 tok/s"."""
        rate = self.rate(run, tokens, elapsed_s)
        count = tokens_text(tokens)
        return count if rate is None else f"{count} · {speed_text(rate)}"
