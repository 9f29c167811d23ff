"""How many tokens of a prompt-lookup match to verify, if any, priced by the cost model
and judged by what the target writes, verified or not."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.policy.costs import CostModel
from app.engine.running_stats import Ema, FadingShare
from app.engine.sequences import common_prefix_length

Promise = tuple[int, float]  # a length to verify, and the lookup tokens it is expected to yield


def promised(first: float, continued: float, k: int) -> float:
    """Tokens a k-token match is expected to yield: its first right at rate ``first``, each
    after a right one at rate ``continued``."""
    return first * (1.0 - continued**k) / (1.0 - continued)


class LookupGate:
    """How many tokens of a prompt-lookup match to verify, if any, judged by the whole step.

    A lookup costs no draft pass, but verification does: on a CPU three thousand tokens
    deep, verifying 17 tokens costs four single target passes, so a lookup that is mostly
    refused (4 % of 412 tokens on a paraphrase) ran at 0.68x. Each length k is priced with
    the cost model at this depth: the tokens it is expected to yield, times a single target
    pass, against verifying k + 1 tokens; the best is verified only when it beats the
    target alone.

    A lookup is right or wrong as a whole more than token by token: where its first token
    is accepted, a copied run usually goes on. So it is judged by two rates, how often a
    match's first token is accepted and how often a token after an accepted one is: a match
    right half the time is still worth verifying long on a copy (each right one yields a
    whole block), and one right a few times in a hundred is not worth a single token.

    A match held back is not wasted: what the target writes next says whether it would
    have been accepted, so both rates keep learning for free, and lookups resume where the
    answer starts copying again. A held match whose first token was right is followed
    until the target leaves it: in a math answer a repeated number is matched often and
    the words after it seldom, and a rate learned only from verified matches kept its
    prior of nine in ten there, so three-token lookups were verified at a fifth accepted
    (SmolLM2 F16 + Q4_1: 0.89x of target-only, where a two-token verification costs two
    single passes).

    The first-token rate is kept twice, by what the last judged match did: one that agreed
    as far as it was judged says the answer is copying, and the next match usually is
    right too; one refused says the answer left the text (an edit, new prose), and the
    next match, found on a suffix that includes the new tokens, usually is a coincidence.
    One rate over both averaged a copied function body with the docstring before it, and
    the model kept drafting the body at 30 ms a token that lookups copy for free.

    Rates learned from held matches still over-promise where verification follows a streak:
    a rate that jumps after two agreeing matches is highest just before the streak ends. So
    each verified match's promise is set against what it delivered, and the promise of the
    next is scaled by the share kept (math-1, SmolLM2 F16 + Q4_1: 51 lookup tokens verified,
    7 accepted, 0.88x).
    """

    FIRST_RATE = 0.25  # a match's first token: recent matches count most
    # Before any evidence a match's first token is presumed right one time in four: outside
    # copies most matches are coincidences, and a held match learns from what the target
    # writes at no cost, so a copy shows itself within a match or two. (At 0.5, chat and
    # math answers on a pair whose 5-token verification costs two single passes verified
    # their first lookups and ran at 0.86-0.92x.)
    FIRST_PRIOR = 0.25
    # A length is verified only where its expected gain beats the target alone by a tenth:
    # the cost model prices the passes, not the host's work on each verified row nor the
    # draft model's catch-up after a lookup step.
    MIN_GAIN = 1.1
    CONTINUED_MEMORY = 64.0  # tokens after an accepted first one: older evidence fades
    # the share of its promised lookup tokens verification delivers starts at one, worth two
    # tokens of evidence; older promises fade past 32 tokens promised
    KEPT_PRIOR = 2.0
    KEPT_MEMORY = 32.0
    KEPT_RANGE = (0.1, 1.5)

    def __init__(self, costs: CostModel) -> None:
        self.costs = costs
        # a match's first token: after a match that agreed (True), after a refusal or at the
        # start (False); the first copy starts from what every match so far showed
        self._first = {
            False: Ema(value=self.FIRST_PRIOR, alpha=self.FIRST_RATE),
            True: Ema(alpha=self.FIRST_RATE),
        }
        self.copying = False  # the last judged match agreed as far as it was judged
        # tokens kept of those judged after an accepted one: a prior of 0.9 worth ten tokens
        self._continued = FadingShare(9.0, 10.0, self.CONTINUED_MEMORY)
        # (position, tokens, what verifying it would have promised) of a match held back
        self._held: tuple[int, list[int], Promise | None] | None = None
        # lookup tokens accepted, and promised, over the matches judged to the end
        self._kept = FadingShare(self.KEPT_PRIOR, self.KEPT_PRIOR, self.KEPT_MEMORY)
        self._pending: Promise | None = None  # the match being verified
        self._would: Promise | None = None  # the best length of the match last priced
        # a held match whose first tokens were right: (position, tokens, judged so far,
        # its promise while not yet judged to the promised length)
        self._followed: tuple[int, list[int], int, Promise | None] | None = None

    @property
    def first(self) -> Ema:
        """The first-token rate that judges the next match: the one for the present state."""
        return self._first[self.copying]

    @property
    def continued(self) -> float:
        """P(a token is accepted | the tokens before it in the match were)."""
        return min(self._continued.share, 0.995)

    @property
    def kept(self) -> float:
        """The share of the lookup tokens promised that verification delivered."""
        low, high = self.KEPT_RANGE
        return min(max(self._kept.share, low), high)

    def _promised(self, k: int) -> float:
        return promised(self.first.value or 0.0, self.continued, k)

    def expected_tokens(self, k: int) -> float:
        """Tokens one verification of a k-token match yields, the target's own included."""
        return 1.0 + self.kept * self._promised(k)

    def length(self, available: int, k_max: int, depth: int) -> int:
        """The length to verify of a match of ``available`` tokens at context ``depth``; 0
        holds it back."""
        if available <= 0:
            # no match: nothing to price (most steps of an answer that copies nothing; pricing
            # the empty match was the largest part of a paused draft's step on the host)
            self._would = None
            return 0
        longest = min(available, k_max)
        # a single pass and every length's verification in one call: asked every step
        single, *prices = self.costs.verify_prices(1, longest + 1, depth)
        if single is None:
            return longest
        best_k, best = 0, 0.0
        # expected_tokens(k) with its rates read once: asked for every length, every step
        first, c, kept = self.first.value or 0.0, self.continued, self.kept
        for k, price in enumerate(prices, start=1):
            verify = price or single
            gain = (1.0 + kept * promised(first, c, k)) * single / verify  # expected_tokens
            if gain > best * 1.005:  # shorter on (near) ties: a refusal then costs less
                best_k, best = k, gain
        self._would = (best_k, self._promised(best_k)) if best_k else None
        if best <= self.MIN_GAIN:
            return 0
        self._pending = self._would
        return best_k

    def best_rate(self, k_max: int, depth: int) -> float | None:
        """Tokens per ms of verification expected of the best length up to ``k_max`` (None
        while a verification cost is unknown): what a lookup promises beside a model."""
        best = None
        for k in range(1, k_max + 1):
            verify = self.costs.verify_ms(k + 1, depth)
            if verify is None or verify <= 0:
                return None
            rate = self.expected_tokens(k) / verify
            best = rate if best is None or rate > best else best
        return best

    def observe(self, proposed: int, accepted: int) -> None:
        """A match of ``proposed`` tokens of which the first ``accepted`` were accepted (all
        judged: a refusal after them, or none proposed past them)."""
        if proposed <= 0:
            return
        self._followed = None  # the verified match judges those positions itself
        self._judge(proposed, accepted)
        if self._pending is not None and self._pending[0] == proposed:
            self._kept.add(accepted, self._pending[1])
        self._pending = None

    def _judge(self, proposed: int, accepted: int) -> None:
        """A match of ``proposed`` tokens (at least one), the first ``accepted`` right."""
        self.first.update(1.0 if accepted else 0.0)
        self.copying = accepted >= proposed
        if self.copying and self._first[True].value is None:
            self._first[True].value = self._first[False].value
        if not accepted:
            return
        # after the first: the accepted ones, and the refused one if there was one
        judged = accepted if accepted < proposed else proposed - 1
        self._continue(accepted - 1, judged)

    def _continue(self, kept: int, judged: int) -> None:
        """``judged`` tokens that followed accepted ones in a match, ``kept`` of them right."""
        if judged > 0:
            self._continued.add(kept, judged)

    def hold(self, position: int, tokens: list[int], *, priced: bool = False) -> None:
        """A match not verified, proposed for the tokens from ``position`` on; ``priced``:
        the last ``length`` priced it, and what it would have delivered is judged too."""
        promise = self._would if priced else None
        self._pending = self._would = None
        if tokens:
            self._held = (position, list(tokens), promise)

    def judge_held(self, committed: Sequence[int]) -> None:
        """Compare the match held back with what the target wrote in its place."""
        self._follow(committed)
        if self._held is None:
            return
        position, tokens, promise = self._held
        written = committed[position : position + len(tokens)]
        if not written:
            return
        self._held = None
        accepted = common_prefix_length(tokens, written)
        following = self._followed is not None
        if accepted < len(written):
            self._judge(len(tokens), accepted)  # refused at ``accepted``
            if promise is not None and not following:
                self._kept.add(min(accepted, promise[0]), promise[1])
            return
        self._judge(accepted, accepted)  # all that was written so far agreed
        if following:
            return  # one match at a time: the next usually continues the followed one
        if promise is not None and accepted >= promise[0]:
            self._kept.add(promise[0], promise[1])
            promise = None
        if accepted < len(tokens):
            self._followed = (position, tokens, accepted, promise)

    def _follow(self, committed: Sequence[int]) -> None:
        """Judge the followed match's tokens the target has written since the last step."""
        if self._followed is None:
            return
        position, tokens, judged, promise = self._followed
        written = committed[position : position + len(tokens)]
        if len(written) <= judged:
            return
        agreed = judged + common_prefix_length(tokens[judged:], written[judged:])
        refused = agreed < len(written)
        self._continue(agreed - judged, agreed - judged + refused)
        done = refused or agreed == len(tokens)
        if promise is not None and (done or agreed >= promise[0]):
            self._kept.add(min(agreed, promise[0]), promise[1])
            promise = None
        self._followed = None if done else (position, tokens, agreed, promise)
