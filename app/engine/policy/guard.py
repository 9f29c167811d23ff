"""What the collapse guard measures and decides with: drafting steps against
target-only decoding at the same depths (``Economics``), a pause and why
(``PauseDecision``), and what a request leaves for the next (``GuardMemory``). The
decisions themselves are taken by ``DraftController`` (``controller.py``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from app.engine.events import GuardEvent, GuardReason
from app.engine.running_stats import Ema


class Economics:
    """Realised speed of drafting steps against target-only decoding at the same depths.

    Each drafting step is compared with what target-only decoding costs where it ran: a
    single target pass priced at its depth plus a target-only step's own overhead (the
    part outside the pass). A base measured early in a long answer would flatter every
    drafting step after it, since every step costs more as the context grows.
    """

    def __init__(self, window: int) -> None:
        # (tokens, ms, target-only ms per token at that step's depth)
        self._spec: deque[tuple[int, float, float]] = deque(maxlen=window)
        # of those steps, whether other programs slowed its target pass (``INTERFERED``)
        self._interfered: deque[bool] = deque(maxlen=window)
        self.base_ms = Ema(alpha=0.1)  # one target-only token, whole step
        self.overhead_ms = Ema(alpha=0.1)  # of it, the time beyond its target pass
        self.host_ms = Ema(alpha=0.1)  # a step's time outside llama_decode

    def observe_speculative(
        self, tokens: int, ms: float, base_ms: float | None, *, interfered: bool = False
    ) -> None:
        if base_ms is not None:
            self._spec.append((tokens, ms, base_ms))
            self._interfered.append(interfered)

    def observe_target_only(
        self, ms: float, single_ms: float | None = None, *, overhead_ms: float | None = None
    ) -> None:
        """One target-only token's whole step, ``ms``; its time beyond the target pass
        (``overhead_ms``) where measured, else beyond the pass's price ``single_ms``."""
        self.base_ms.update(ms)
        if overhead_ms is not None:
            self.overhead_ms.update(overhead_ms)
        elif single_ms is not None:
            self.overhead_ms.update(max(ms - single_ms, 0.0))

    def target_only_ms(self, single_ms: float | None) -> float | None:
        """One target-only token where a single target pass costs ``single_ms``."""
        if single_ms is None:
            return self.base_ms.value
        if self.overhead_ms.value is not None:
            return single_ms + self.overhead_ms.value
        if self.base_ms.value is not None:
            return self.base_ms.value
        return single_ms + (self.host_ms.value or 0.0)

    def clear(self) -> None:
        self._spec.clear()
        self._interfered.clear()

    def noisy(self) -> bool:
        """Enough of the judged steps ran while other programs slowed the machine that their
        speed says more about the machine than about the draft."""
        return bool(self._interfered) and sum(self._interfered) >= NOISY_SHARE * len(
            self._interfered
        )

    @property
    def steps(self) -> int:
        return len(self._spec)

    def ratio(self) -> float | None:
        """Measured speed of drafting steps over target-only decoding (1.0 = break-even)."""
        ms = sum(m for _, m, _ in self._spec)
        if ms <= 0:
            return None
        return sum(t * base for t, _, base in self._spec) / ms


MAX_PROBE_INTERVAL = 1024  # target-only tokens between two probes of a paused draft, at most
# A step's target pass that took this many times its price (the cost lines' figure for its size
# and depth) ran while something else had the cores: bursts on a busy 2-core machine spread
# single passes 5-40x, a quiet machine's stay within about 1.2x of their price.
INTERFERED = 1.5
NOISY_SHARE = 1 / 3  # of the judged steps interfered with: their speed does not decide alone
NOISY_PROBE = 8  # target-only tokens before a draft paused on noisy costs is tried again
EXPENSIVE_DRAFT = 0.5  # a draft pass costing this fraction of a target pass or more


@dataclass(frozen=True)
class GuardMemory:
    """What a request leaves for the next one on the same pair: a pause for cost persists
    (the draft's price is a property of the pair), a pause for disagreement does not."""

    paused_for_cost: bool
    probe_in: int
    failed_probes: int
    acceptance: float | None
    # the verifications near its depth when the last pause on a few passes' prices was
    # decided (``DraftController.few_passes``)
    few_passes_at: int | None = None


@dataclass(frozen=True)
class PauseDecision:
    reason: GuardReason  # disagreement or cost
    acceptance: float
    break_even: float
    speed_ratio: float | None
    draft_cost_fraction: float | None
    probe_in: int  # target-only tokens before the draft is probed again
    window: int = 0  # steps the agreement was measured over
    never_pays: bool = False  # the cost lines say no draft length can beat the target
    noisy: bool = False  # decided on costs measured while other programs slowed the machine
    few_passes: bool = False  # decided on prices that rest on a few passes (``prices_unsettled``)

    def event(self, step: int) -> GuardEvent:
        """The pause said at ``step``: the guard event carries every field of the decision."""
        return GuardEvent(paused=True, step=step, **vars(self))
