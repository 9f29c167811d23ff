"""The GPU check: SpecDeck's engine against llama.cpp's own server on a lent CUDA machine.

Three parts. ``prepare`` (run here) packs what that machine lacks into ``.gpu_check/`` at the
repository root: the llama.cpp sources vendored in the installed llama-cpp-python, stripped to
what a CUDA build of libllama and llama-server needs; the pure-Python packages the engine
imports that the machine's image does not hold; and the fast pair's donor tokenizer.
``device.sh`` (run there) builds libllama and llama-server with CUDA, points the carried
``llama_cpp`` package at them and runs ``check``, which writes GPU-sized synthetic models
with SpecDeck's own writers and measures them into ``gpu_check.json``.
"""
