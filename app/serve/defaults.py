"""The server's defaults, light enough for the command line's parser to import."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_QUEUE = 8  # requests that may wait while one runs; more get 429
