"""Token-kind colours (Okabe–Ito, colour-blind safe) and the text formats built from them.

Charts, underlines and background tints use the Okabe–Ito hues (``app.lab.colours``) as
published. Coloured
*text* uses the same hues darkened (light theme) or lightened (dark theme) until they reach
the WCAG AA contrast of 4.5:1 on the text background: the published green and vermillion
reach only 3.4:1 and 3.9:1 on white.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QTextCharFormat

from app.engine.events import TokenKind
from app.lab.colours import OKABE_ITO

KIND_COLOURS: dict[TokenKind, str | None] = {
    TokenKind.ACCEPTED: OKABE_ITO["bluish_green"],
    TokenKind.RESAMPLED: OKABE_ITO["vermillion"],
    TokenKind.BONUS: OKABE_ITO["blue"],
    TokenKind.TARGET: None,  # default text colour
}

KIND_TEXT_COLOURS: dict[bool, dict[TokenKind, str | None]] = {  # keyed by "dark theme"
    False: {
        TokenKind.ACCEPTED: "#007A58",  # 5.4:1 on white
        TokenKind.RESAMPLED: "#B84F00",  # 5.1:1
        TokenKind.BONUS: "#0072B2",  # 5.2:1
        TokenKind.TARGET: None,
    },
    True: {
        TokenKind.ACCEPTED: "#33C49A",  # 5.5:1 or better on backgrounds up to #353535
        TokenKind.RESAMPLED: "#FF8F40",  # 5.4:1
        TokenKind.BONUS: "#5AB8F5",  # 5.6:1
        TokenKind.TARGET: None,
    },
}


def text_colour(kind: TokenKind, dark: bool = False) -> str | None:
    return KIND_TEXT_COLOURS[dark][kind]


KIND_LABELS = {
    TokenKind.ACCEPTED: "accepted draft token",
    TokenKind.RESAMPLED: "resampled by the target",
    TokenKind.BONUS: "bonus token",
    TokenKind.TARGET: "target only",
}
LEGEND_LABELS = {
    TokenKind.ACCEPTED: "accepted",
    TokenKind.RESAMPLED: "resampled",
    TokenKind.BONUS: "bonus",
    TokenKind.TARGET: "target only",
}

DIVERGENCE_COLOUR = OKABE_ITO["yellow"]
SPEC_PEN = OKABE_ITO["bluish_green"]
BASE_PEN = OKABE_ITO["reddish_purple"]
STYLES = ("colour", "underline", "background", "off")
STYLE_LABELS = {
    "colour": "Coloured text",
    "underline": "Underline",
    "background": "Background",
    "off": "No colouring",
}


def kind_format(kind: TokenKind, style: str, dark: bool = False) -> QTextCharFormat:
    """The character format for a token of ``kind`` in colouring ``style``."""
    fmt = QTextCharFormat()
    colour = KIND_COLOURS.get(kind)
    if colour is None or style == "off":
        return fmt
    if style == "colour":
        fmt.setForeground(QColor(text_colour(kind, dark)))
    elif style == "underline":
        fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
        fmt.setUnderlineColor(QColor(colour))
        fmt.setFontUnderline(True)
    elif style == "background":
        tint = QColor(colour)
        tint.setAlpha(70)
        fmt.setBackground(tint)
    return fmt


def divergence_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setBackground(QColor(DIVERGENCE_COLOUR))
    fmt.setForeground(QColor("#000000"))
    fmt.setFontWeight(QFont.Weight.Bold)
    return fmt


def legend_html(style: str, dark: bool = False) -> str:
    """Rich text for the legend line under the speculative pane."""
    parts = []
    for kind in (TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS, TokenKind.TARGET):
        colour = text_colour(kind, dark) if style == "colour" else KIND_COLOURS[kind]
        label = LEGEND_LABELS[kind].replace(" ", "&nbsp;")
        if colour is None or style == "off":
            swatch = "■" if colour is None else "□"
            parts.append(f"<span>{swatch}&nbsp;{label}</span>")
        elif style == "underline":
            parts.append(
                f"<span style='text-decoration: underline; color: {colour}'>▁▁</span> {label}"
            )
        elif style == "background":
            parts.append(f"<span style='background-color: {colour}'>&nbsp;&nbsp;</span> {label}")
        else:
            parts.append(f"<span style='color: {colour}'>■&nbsp;{label}</span>")
    parts.append(
        f"<span style='background-color: {DIVERGENCE_COLOUR}; color: black'>&nbsp;N&nbsp;</span>"
        "&nbsp;divergence"
    )
    return " &nbsp; ".join(parts)
