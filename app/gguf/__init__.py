"""GGUF files: headers read by range, checks before loading, pair compatibility."""
