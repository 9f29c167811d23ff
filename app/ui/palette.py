"""Token-kind colours (Okabe–Ito, colour-blind safe) and the text formats built from them."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QTextCharFormat

from app.engine.events import TokenKind

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common CVD.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

KIND_COLOURS: dict[TokenKind, str | None] = {
    TokenKind.ACCEPTED: OKABE_ITO["bluish_green"],
    TokenKind.RESAMPLED: OKABE_ITO["vermillion"],
    TokenKind.BONUS: OKABE_ITO["blue"],
    TokenKind.TARGET: None,  # default text colour
}

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


def kind_format(kind: TokenKind, style: str) -> QTextCharFormat:
    """The character format for a token of ``kind`` in colouring ``style``."""
    fmt = QTextCharFormat()
    colour = KIND_COLOURS.get(kind)
    if colour is None or style == "off":
        return fmt
    if style == "colour":
        fmt.setForeground(QColor(colour))
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


def legend_html(style: str) -> str:
    """Rich text for the legend line under the speculative pane."""
    parts = []
    for kind in (TokenKind.ACCEPTED, TokenKind.RESAMPLED, TokenKind.BONUS, TokenKind.TARGET):
        colour = KIND_COLOURS[kind]
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
