"""Running statistics the drafters and the controller keep as a run goes: an exponential
moving average, a share over fading evidence, the median of the last few samples."""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass


@dataclass
class Ema:
    """An exponential moving average: None until the first sample, then that sample."""

    value: float | None = None
    alpha: float = 0.2

    def update(self, sample: float) -> None:
        self.value = (
            sample if self.value is None else self.value + self.alpha * (sample - self.value)
        )


@dataclass
class FadingShare:
    """part / whole over recent evidence: both sums are halved once the whole reaches
    ``memory``, so older evidence fades."""

    part: float
    whole: float
    memory: float

    def add(self, part: float, whole: float) -> None:
        if self.whole >= self.memory:
            self.part, self.whole = self.part / 2, self.whole / 2
        self.part += part
        self.whole += whole

    @property
    def share(self) -> float:
        return self.part / self.whole


class RecentMedian:
    """The median of the last few samples: one pass slowed by a scheduler hiccup or a page
    fault (hundreds of ms where the rest take 15) moves it not at all, a lasting change
    within a few samples."""

    def __init__(self, size: int = 7) -> None:
        self._samples: deque[float] = deque(maxlen=size)
        # read far more often than updated (every price of a step reads its cells' medians,
        # a refit all of them): kept until the next sample
        self._value: float | None = None

    def update(self, sample: float) -> None:
        self._samples.append(sample)
        self._value = None

    @property
    def value(self) -> float | None:
        if self._value is None and self._samples:
            self._value = statistics.median(self._samples)
        return self._value

    @property
    def count(self) -> int:
        return len(self._samples)

    @property
    def spread(self) -> float | None:
        """The median over the fastest recent sample: near 1 while the samples cost what they
        cost; well above it when most of them were slowed (something else had the cores),
        for a pass is slowed by other programs, never sped up."""
        value = self.value
        if value is None:
            return None
        low = min(self._samples)
        return value / low if low > 0 else None
