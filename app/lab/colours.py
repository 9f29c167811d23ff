"""The colours the window and the Lab's HTML report share, written once and without Qt.

Okabe & Ito (2008), "Color Universal Design": hues distinguishable with every common colour
vision deficiency. The token kinds (``app.ui.palette``), the Lab tab's plot and the report's
SVG all take their hues from here, so one configuration has one colour everywhere.
"""

from __future__ import annotations

from app.lab.stats import Verdict

OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
# One colour per configuration, in order; yellow is left out: too faint a line on white.
SERIES = tuple(
    OKABE_ITO[name]
    for name in ("blue", "orange", "bluish_green", "reddish_purple", "sky_blue", "vermillion")
)
CONFIRMED = "#1b7f3b"
FALSIFIED = "#b00020"
DISTURBED = "#9a5b00"  # measured under outside load: neither a pass nor a fail yet
UNDECIDED = "#555"


def series_colour(index: int) -> str:
    return SERIES[index % len(SERIES)]


def verdict_colour(verdict: Verdict) -> str:
    if verdict.disturbed:
        return DISTURBED
    return {"confirmed": CONFIRMED, "falsified": FALSIFIED}.get(verdict.status, UNDECIDED)
