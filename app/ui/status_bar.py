"""The window's status fields: the current pair's device and memory, the current answer's
speed and acceptance, and nothing older.

New chat, a pair change and a remote pair clear the answer's figures; while an answer is
written its acceptance counts from its own steps (as the charts plot them), never the last
answer's beside this one's speed.
"""

from __future__ import annotations

from PySide6.QtWidgets import QStatusBar

from app.engine.config import DraftSource
from app.engine.events import RunSummary, StepEvent
from app.engine.figures import speed_text
from app.models.drafting import pair_words
from app.models.fit import gib
from app.ui.status_fit import (
    StatusField,
    StatusFit,
    before_parenthesis,
    first_part,
    speed_essentials,
)
from app.workers.live_figures import LiveRate, tokens_text
from app.workers.messages import EventBatch, PairLoaded

EMPTY = {
    "device": "device —",
    "speed": "tok/s —",
    "acceptance": "acceptance —",
    "memory": "memory —",
}
# 0: never hidden (this answer's speed, the serving state); the rest hide from the highest
PRIORITY = {"device": 3, "speed": 0, "acceptance": 1, "memory": 2}
SHORT = {
    "device": first_part,
    "speed": speed_essentials,
    "acceptance": before_parenthesis,
    "memory": before_parenthesis,
}


def loaded_message(message: PairLoaded) -> str:
    """The status bar's word on a pair that loaded, with its threads when it runs on fewer
    than every core (another program was busy, or the settings asked for fewer)."""
    info = message.pair
    words = pair_words(info.target_path, info.draft_path, DraftSource(info.draft_source))
    fit = info.threads
    threads = f"; {fit.reason}" if fit is not None and fit.threads < fit.cores else ""
    return f"Pair loaded in {message.load_s:.1f} s: {words}{threads}"


ACCEPTANCE_TIP = (
    "acceptance: drafted tokens the target accepted ÷ drafted tokens, over this answer.\n"
    "tokens/pass: tokens each target pass produced, its own token included (1 + accepted ÷ "
    "passes, counting the passes that drafted nothing).\n"
    "The guard banner's agreement is another figure: accepted ÷ judged draft tokens over the "
    "guard's last few steps only."
)


def tokens_per_pass_text(summary: RunSummary) -> str:
    """Two decimals, or three where two would round an answer with accepted drafts to 1.00."""
    value = summary.tokens_per_pass
    text = f"{value:.2f}"
    if summary.accepted and text == "1.00":
        text = f"{value:.3f}"
    return f"{text} tokens/pass"


def acceptance_text(summary: RunSummary) -> str:
    """The one acceptance figure: drafted tokens accepted ÷ drafted, over the answer."""
    if not summary.drafted:
        return "acceptance — (nothing drafted)"
    return (
        f"acceptance {summary.acceptance_rate * 100:.0f} %"
        f" ({summary.accepted}/{summary.drafted} drafted)"
        f" · {tokens_per_pass_text(summary)}"
    )


class StatusFields:
    """The permanent fields of the window's status bar."""

    def __init__(self, bar: QStatusBar) -> None:
        self._bar = bar
        self.fit = StatusFit(bar)
        self.labels = {
            name: StatusField(
                text,
                priority=PRIORITY[name],
                short=SHORT[name],
                explanation=ACCEPTANCE_TIP if name == "acceptance" else "",
            )
            for name, text in EMPTY.items()
        }
        for index, label in enumerate(self.labels.values()):
            label.setObjectName(f"status_{label.text().split()[0].replace('/', '_')}")
            # a rule between the items, so figures never read as one run of words
            rule = "border-left: 1px solid palette(mid); " if index else ""
            label.setStyleSheet(f"QLabel {{ {rule}padding: 0 8px; }}")
            bar.addPermanentWidget(label)
            self.fit.add(label)
        self._rate = LiveRate()
        self._accepted = self._drafted = 0

    def clear_answer(self) -> None:
        """No answer on screen (new chat, another pair): no answer's figures."""
        self.labels["speed"].setText(EMPTY["speed"])
        self.labels["acceptance"].setText(EMPTY["acceptance"])
        self._rate.clear()
        self._accepted = self._drafted = 0

    def show_pair(self, pair: PairLoaded | None) -> None:
        """A pair was loaded (or none is): its device, and no figures of the last pair."""
        self.clear_answer()
        if pair is None:
            self.labels["device"].setText(EMPTY["device"])
            self.labels["memory"].setText(EMPTY["memory"])
        elif pair.remote is not None:  # the server's machine: nothing measured here
            self.labels["device"].setText(f"remote · {pair.remote.server}")
            self.labels["memory"].setText(EMPTY["memory"])
        else:
            self.labels["device"].setText(pair.pair.device)

    def show_memory(self, rss: int | None, weights_bytes: int) -> None:
        weights = gib(weights_bytes)
        self.labels["memory"].setText(
            f"memory {gib(rss)} (weights {weights})" if rss else f"weights {weights}"
        )

    def begin_answer(self) -> None:
        self.clear_answer()
        self.labels["speed"].setText("tok/s — (waiting for the first token)")

    def ingest(self, batch: EventBatch) -> None:
        """The answer being written: its speed from its first token on, its acceptance from
        its own steps so far."""
        speculative = batch.run == "speculative"
        if speculative:
            for event in batch.events:
                if isinstance(event, StepEvent):
                    self._accepted += event.accepted
                    self._drafted += event.drafted
            if self._drafted:
                share = self._accepted / self._drafted
                self.labels["acceptance"].setText(
                    f"acceptance {share * 100:.0f} % ({self._accepted}/{self._drafted} "
                    "drafted) so far"
                )
        if batch.tokens:  # a count until a second token gives a rate
            rate = self._rate.rate(batch.run, batch.tokens, batch.elapsed_s)
            shown = tokens_text(batch.tokens) if rate is None else speed_text(rate)
            self.labels["speed"].setText(f"{batch.run} {shown}")

    def done(self, spec: RunSummary | None, base: RunSummary | None) -> None:
        """The answer ended: its measured figures (a stopped one keeps those it had)."""
        if spec is None:
            return
        speed = f"spec {speed_text(spec.tok_s)}"
        if base is not None:
            speed += f" · base {speed_text(base.tok_s)}"
        self.labels["speed"].setText(speed)
        self.labels["acceptance"].setText(acceptance_text(spec))

    def add(self, field: StatusField) -> None:
        """Another field after these (the serving state), fitted with them."""
        self._bar.addPermanentWidget(field)
        self.fit.add(field)
