"""Online draft-length choice, break-even acceptance and the collapse guard.

With per-token acceptance probability ``a`` and draft length ``k``, one verification pass
yields ``(1 - a**(k+1)) / (1 - a)`` tokens on average (Leviathan et al. 2023). It costs
``k`` draft passes plus one target pass over ``k + 1`` tokens. Both costs are measured as
the run goes, so the controller adapts to the pair, the device and the prompt, instead of
being tuned to any one of them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from app.core.config import SpecConfig


def expected_tokens(acceptance: float, k: int) -> float:
    a = min(max(acceptance, 0.0), 0.999)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


@dataclass
class _Ema:
    value: float | None = None
    alpha: float = 0.2

    def update(self, sample: float) -> None:
        self.value = (
            sample if self.value is None else self.value + self.alpha * (sample - self.value)
        )


class CostModel:
    """Measured per-pass costs: draft pass, and target pass as a line in batch size."""

    def __init__(self) -> None:
        self.draft_ms = _Ema()
        self._verify: dict[int, _Ema] = {}

    def observe_draft(self, ms_per_token: float) -> None:
        self.draft_ms.update(ms_per_token)

    def observe_verify(self, n_tokens: int, ms: float) -> None:
        self._verify.setdefault(n_tokens, _Ema()).update(ms)

    def _known(self) -> dict[int, float]:
        return {n: e.value for n, e in self._verify.items() if e.value is not None}

    def _line(self, known: dict[int, float]) -> tuple[float, float, float]:
        """Least-squares line through the measured batch sizes: (mean x, mean y, slope >= 0)."""
        xs, ys = list(known.keys()), list(known.values())
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
        slope = covariance / var if var else 0.0
        return mean_x, mean_y, max(slope, 0.0)

    def verify_ms(self, n_tokens: int) -> float | None:
        known = self._known()
        if not known:
            return None
        if n_tokens in known:
            return known[n_tokens]
        if len(known) == 1:
            return next(iter(known.values()))
        mean_x, mean_y, slope = self._line(known)
        return max(mean_y + slope * (n_tokens - mean_x), 1e-3)

    def marginal_verify_ms(self) -> float:
        """Extra target time for one more token in the verification batch."""
        known = self._known()
        return self._line(known)[2] if len(known) > 1 else 0.0

    def keep_drafting_threshold(self) -> float:
        """Drafting token i pays off while P(tokens 1..i all accepted) exceeds this.

        An accepted token saves one single-token target pass; drafting it costs one draft
        pass plus its share of the verification batch.
        """
        single = self.verify_ms(1)
        if single is None or self.draft_ms.value is None:
            return 0.0
        return min((self.draft_ms.value + self.marginal_verify_ms()) / single, 1.0)

    def ready(self) -> bool:
        return self.draft_ms.value is not None and bool(self._verify)

    def speedup(self, acceptance: float, k: int) -> float:
        """Expected tokens/sec of speculation with draft length k over target-only decoding."""
        single = self.verify_ms(1)
        step = self.verify_ms(k + 1)
        if single is None or step is None or self.draft_ms.value is None:
            return 1.0
        cost = k * self.draft_ms.value + step
        return expected_tokens(acceptance, k) * single / cost

    def break_even(self, k: int) -> float:
        """Smallest per-token acceptance at which draft length k beats the target alone."""
        if not self.ready() or k <= 0:
            return 0.0
        low, high = 0.0, 0.999
        if self.speedup(high, k) < 1.0:
            return 1.0
        for _ in range(30):
            mid = (low + high) / 2
            if self.speedup(mid, k) >= 1.0:
                high = mid
            else:
                low = mid
        return high


class DraftController:
    """Chooses the next draft length and decides when speculation should pause."""

    def __init__(self, config: SpecConfig, costs: CostModel | None = None) -> None:
        self.config = config
        self.costs = costs or CostModel()
        self.acceptance = _Ema(value=0.8, alpha=0.15)  # per drafted token, optimistic prior
        self._window: deque[tuple[int, int]] = deque(maxlen=config.guard_window)
        self.paused = False
        self._paused_tokens = 0
        self.draft_len = config.draft_max
        # (draft confidence, accepted?) of recently judged draft tokens, for calibration
        self._judged: deque[tuple[float, bool]] = deque(maxlen=128)

    def observe_confidences(self, confidences: list[float | None], accepted: int) -> None:
        """Record how the draft's own top probability compared with what was accepted."""
        for index, confidence in enumerate(confidences[: accepted + 1]):
            if confidence is not None:
                self._judged.append((confidence, index < accepted))

    @property
    def calibration(self) -> float:
        """Observed acceptance over predicted confidence (1.0 until there is evidence)."""
        if len(self._judged) < 16:
            return 1.0
        predicted = sum(c for c, _ in self._judged)
        observed = sum(1 for _, ok in self._judged if ok)
        return min(max(observed / predicted, 0.5), 1.5) if predicted > 0 else 1.0

    def keep_drafting_threshold(self) -> float:
        """Cumulative-confidence threshold for confidence-driven adaptive drafting."""
        return self.costs.keep_drafting_threshold() if self.config.adaptive else 0.0

    def observe_step(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        # a block cut short by a rejection says "accepted of accepted+1 tried"
        tried = accepted + 1 if accepted < drafted else drafted
        self.acceptance.update(accepted / tried)
        self._window.append((accepted, tried))

    @property
    def rolling_acceptance(self) -> float:
        """Per-token agreement over the recent window: accepted / tokens actually judged."""
        tried = sum(t for _, t in self._window)
        return sum(a for a, _ in self._window) / tried if tried else 0.0

    def next_draft_len(self, *, confidence_driven: bool = False) -> int:
        """Draft length for the next block.

        A draft model reports its confidence per token, so adaptive drafting stops on the
        measured economics token by token (``keep_drafting_threshold``) and this only gives
        the ceiling. Prompt lookup has no confidence: the length maximising expected tokens
        per unit of measured cost is chosen instead.
        """
        cfg = self.config
        if not cfg.adaptive or not self.costs.ready() or confidence_driven:
            self.draft_len = cfg.draft_max
            return self.draft_len
        a = self.acceptance.value or 0.0
        best_k, best = cfg.draft_min, 0.0
        for k in range(cfg.draft_min, cfg.draft_max + 1):
            gain = self.costs.speedup(a, k)
            if gain > best * 1.005:  # prefer shorter blocks on (near) ties
                best_k, best = k, gain
        self.draft_len = best_k
        return best_k

    def break_even(self) -> float:
        return self.costs.break_even(max(self.draft_len, 1))

    def should_pause(self) -> bool:
        """After a verification step: has agreement collapsed below break-even?"""
        if not self.config.collapse_guard or self.paused:
            return False
        if len(self._window) < self._window.maxlen or not self.costs.ready():  # type: ignore[operator]
            return False
        if self.rolling_acceptance < self.break_even():
            self.paused = True
            self._paused_tokens = 0
            return True
        return False

    def tick_paused(self) -> bool:
        """Count one target-only token while paused; True when it is time to probe again."""
        self._paused_tokens += 1
        if self._paused_tokens >= self.config.probe_every:
            self.paused = False
            self._window.clear()
            return True
        return False
