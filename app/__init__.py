"""SpecDeck: local speculative decoding on llama.cpp."""

__version__ = "0.1.0"
APP_NAME = "SpecDeck"
APP_ID = "io.github.specdeck.SpecDeck"
