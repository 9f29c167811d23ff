"""Models on the Hub and on this computer (no Qt): ``hub`` and ``hub_http`` (Hub search, file
listings and headers over bounded HTTP), ``downloads`` (resumable, verified downloads),
``library`` (the local model library and saved pair profiles), ``catalog`` (the curated pairs and
the ranking of draft candidates), ``fit`` (hardware detection and memory estimates), ``drafting``
(how a local file drafts, read from its header), ``shipped`` (the PyPI-shipped test and demo
models) and ``split_names`` (split GGUF part names). GGUF headers and checks are in ``app.gguf``,
stored-file primitives in ``app.files``."""
