"""Models: GGUF headers and checks, pairs, the Hub, downloads, catalog, library, hardware."""
