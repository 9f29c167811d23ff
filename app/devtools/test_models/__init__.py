"""Tiny but real GGUF models for the tests and the GPU check, written with numpy and gguf only:
llama, qwen35 and step35 targets and pairs (``synthetic``), a Gemma 4 target and its assistant
(``synthetic_gemma4``), an EAGLE-3 head and its target (``synthetic_eagle3``). Developer tools:
the installers leave them out, and nothing in the shipped app imports them."""
