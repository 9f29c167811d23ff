"""The speculative loop and llama.cpp access (no Qt)."""
