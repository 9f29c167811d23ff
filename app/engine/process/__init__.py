"""The engine in its own process: the host the app talks to, the child that owns llama.cpp,
the typed protocol between them, and the child's native log."""
