"""Errors the engine raises, each worded for the person who has to act on it."""

from __future__ import annotations


class SpecDeckError(Exception):
    """Base class: the message is shown to the user as is."""


class ModelLoadError(SpecDeckError):
    pass


class ModelUnavailableError(SpecDeckError):
    """A model the project fetches or derives itself could not be had."""


class ContextOverflowError(SpecDeckError):
    def __init__(self, needed: int, n_ctx: int) -> None:
        super().__init__(
            f"the conversation needs {needed} tokens but the context holds {n_ctx}. "
            "Start a new chat, shorten the prompt, or raise the context size."
        )
        self.needed = needed
        self.n_ctx = n_ctx


class GenerationCancelled(SpecDeckError):
    """A load or a prompt prefill was stopped on request."""
