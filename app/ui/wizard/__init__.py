"""The pair-selection wizard: hardware → target → quantization → draft → review →
download → verification → finish."""

from app.ui.wizard.wizard import PairWizard

__all__ = ["PairWizard"]
