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
    within a few samples. Beside it, the fastest of a longer stretch (``fast``): what the
    samples cost while nothing else had the cores, for other programs only ever slow a
    pass; a burst longer than the median's few samples moves the median, not that."""

    def __init__(self, size: int = 7, floor_size: int = 32) -> None:
        self._size = size
        self._samples: deque[float] = deque(maxlen=max(size, floor_size))
        # read far more often than updated (every price of a step reads its cells' medians,
        # a refit all of them): kept until the next sample
        self._value: float | None = None
        self._fast: float | None = None

    def update(self, sample: float) -> None:
        self._samples.append(sample)
        self._value = self._fast = None

    def _recent(self) -> list[float]:
        return list(self._samples)[-self._size :]

    @property
    def value(self) -> float | None:
        if self._value is None and self._samples:
            self._value = statistics.median(self._recent())
        return self._value

    @property
    def fast(self) -> float | None:
        """The second fastest of the longer stretch (the fastest of fewer than four), so one
        sample timed short by chance does not set it alone."""
        if self._fast is None and self._samples:
            ordered = sorted(self._samples)
            self._fast = ordered[1 if len(ordered) >= 4 else 0]
        return self._fast

    @property
    def count(self) -> int:
        return min(len(self._samples), self._size)

    @property
    def kept(self) -> int:
        """The samples of the longer stretch (``fast``'s)."""
        return len(self._samples)

    def ran_slowed(self, factor: float) -> bool:
        """Whether the recent samples mostly ran over ``factor`` times the fastest: their
        median over the fast price (``spread``); of two, the slower over the faster, for the
        median of two, their mean, halves one slowed sample."""
        recent = self._recent()
        if len(recent) == 2:
            return max(recent) > factor * min(recent)
        spread = self.spread
        return len(recent) >= 3 and spread is not None and spread > factor

    @property
    def spread(self) -> float | None:
        """The median over the fast price (``fast``): near 1 while the samples cost what they
        cost; well above it when most of the recent ones were slowed (something else had the
        cores), for a pass is slowed by other programs, never sped up."""
        value, low = self.value, self.fast
        if value is None or low is None:
            return None
        return value / low if low > 0 else None
