"""Remote engines: OpenAI-compatible servers (llama-server, vLLM, SGLang) that do their own
speculation. ``client`` (bounded, checked requests and the servers' own figures) and
``chat`` (the window's chat streamed from a server), used by the Lab and by the window."""
