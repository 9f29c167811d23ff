"""What the draft's confidence in a token says about its acceptance: the pair's
calibration by confidence bin, and one answer's shift from it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence


def judged(confidences: Sequence[float | None], accepted: int) -> Iterator[tuple[float, bool]]:
    """(confidence, accepted?) of each drafted token the target judged: the accepted prefix
    and the first it refused; tokens without a confidence (prompt lookup) are skipped."""
    for index, confidence in enumerate(confidences[: accepted + 1]):
        if confidence is not None:
            yield confidence, index < accepted


class AnswerBias:
    """This answer's correction to the pair's calibration: a shift in log-odds, learned
    online from the tokens the target judges (the bias term of online Platt scaling).

    The calibration is learned over everything the pair has drafted, but acceptance at a
    given confidence depends on the text: in a story the draft's distribution is spread
    over words that the target happens to pick as well, in code a low confidence means
    a real fork. The shift starts at zero for each answer and follows what this answer's
    tokens show, so drafting lengthens where spread-but-right drafts keep being accepted
    and shortens where confident drafts keep failing.
    """

    RATE = 0.1  # log-odds moved per judged token, times its surprise
    LIMIT = 3.0

    def __init__(self) -> None:
        self.shift = 0.0

    def adjust(self, acceptance: float) -> float:
        a = min(max(acceptance, 1e-3), 1.0 - 1e-3)
        z = math.log(a / (1.0 - a)) + self.shift
        return 1.0 / (1.0 + math.exp(-z))

    def observe(self, predicted: float, accepted: bool) -> None:
        surprise = (1.0 if accepted else 0.0) - self.adjust(predicted)
        self.shift = min(max(self.shift + self.RATE * surprise, -self.LIMIT), self.LIMIT)


# Upper edges of the draft-confidence bins the calibration learns acceptance for.
_CONFIDENCE_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, 1.01)
_PRIOR_WEIGHT = 2.0  # pseudo-observations at the bin's own confidence before evidence
_BIN_MEMORY = 400.0  # older evidence fades once a bin has seen this many tokens


class ConfidenceCalibration:
    """P(a draft token is accepted | the draft's confidence in it), learned per pair.

    A draft's top probability is not its acceptance rate: a quantized copy of the target is
    often right with a spread distribution (accepted at confidence 0.4), a foreign draft can
    be confidently wrong. Each bin starts at its own confidence and moves to what is
    observed, so drafting is neither timid where the draft is right nor bold where it is not.
    """

    def __init__(self) -> None:
        self._accepted = [0.0] * len(_CONFIDENCE_EDGES)
        self._judged = [0.0] * len(_CONFIDENCE_EDGES)

    @staticmethod
    def _bin(confidence: float) -> int:
        for index, edge in enumerate(_CONFIDENCE_EDGES):
            if confidence < edge:
                return index
        return len(_CONFIDENCE_EDGES) - 1

    @staticmethod
    def _centre(index: int) -> float:
        low = _CONFIDENCE_EDGES[index - 1] if index else 0.0
        return min((low + _CONFIDENCE_EDGES[index]) / 2, 0.99)

    def observe(self, confidence: float, accepted: bool) -> None:
        index = self._bin(confidence)
        if self._judged[index] >= _BIN_MEMORY:
            self._judged[index] /= 2
            self._accepted[index] /= 2
        self._judged[index] += 1.0
        self._accepted[index] += 1.0 if accepted else 0.0

    def acceptance(self, confidence: float) -> float:
        index = self._bin(confidence)
        prior = self._centre(index)
        hits = self._accepted[index] + _PRIOR_WEIGHT * prior
        return hits / (self._judged[index] + _PRIOR_WEIGHT)

    @property
    def evidence(self) -> float:
        return sum(self._judged)
