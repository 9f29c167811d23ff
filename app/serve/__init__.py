"""``python -m app serve``: SpecDeck's engine behind an OpenAI-compatible HTTP server (Qt-free)."""
