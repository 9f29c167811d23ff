#!/usr/bin/env bash
# The GPU check, run from the repository root on the lent CUDA machine (docs/gpu-check.md):
#   bash app/devtools/gpu_check/device.sh
# with .gpu_check/ (python -m app.devtools.gpu_check.prepare) carried. It builds libllama and
# llama-server with CUDA (sm_90) from the carried llama.cpp, then runs check.py against them
# and writes $OUT/gpu_check.json. A rerun on the still-warm machine reuses the build and the
# models in .gpu_check_work/ (git-ignored, not carried).
#
# Options: --reuse-build DIR  use DIR's libllama.so and llama-server instead of building
#          --cpu              build without CUDA (the pipeline's dry run where no GPU is lent)
#          --small            small model shapes (a dry run on a CPU)
#          --configure-only   stop after cmake's configure step
#          --no-fa            no FlashAttention CUDA kernels (a build about a quarter shorter)
#          --fresh            measure every phase again (else a rerun on the still-warm
#                             machine measures only the phases the last call did not reach)
# Environment: PY (default python3), GPU_CHECK_BUDGET_S (default 560: the whole script's
# seconds, inside run's 600), JOBS (default: all cores), CUBLAS_ROOT (a folder holding
# include/cublas_v2.h and lib/libcublas.so.*, where the CUDA toolkit lacks cuBLAS).
set -u
START=$(date +%s)
ROOT=$(pwd)
PACK="$ROOT/.gpu_check"
WORK="$ROOT/.gpu_check_work"
OUT="${OUT:-$WORK/out}"
PY="${PY:-python3}"
BUDGET="${GPU_CHECK_BUDGET_S:-560}"
JOBS="${JOBS:-$(nproc)}"
REUSE="" CUDA=ON SMALL="" CONFIGURE_ONLY="" FA=ON
while [ $# -gt 0 ]; do
  case "$1" in
    --reuse-build) REUSE="$2"; shift ;;
    --cpu) CUDA=OFF ;;
    --small) SMALL=--small ;;
    --configure-only) CONFIGURE_ONLY=1 ;;
    --no-fa) FA=OFF ;;
    --fresh) rm -f "$WORK"/gpu_check.*.json ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$WORK" "$OUT"
LOG="$OUT/device.log"
exec > >(tee -a "$LOG") 2>&1
say() { echo "[gpu_check $(( $(date +%s) - START ))s] $*"; }
fail() {  # a JSON that says what stopped the check, so $OUT always holds one
  say "FAILED: $1"
  [ -n "${MODELS_PID:-}" ] && kill "$MODELS_PID" 2>/dev/null
  "$PY" - "$OUT/gpu_check.json" "$1" "$LOG" <<'EOF'
import json, os, sys
report = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
report["failed"] = sys.argv[2]
report["log_tail"] = open(sys.argv[3], encoding="utf-8", errors="replace").read()[-4000:]
json.dump(report, open(sys.argv[1], "w"), indent=1)
EOF
  exit 1
}

[ -f "$PACK/llama.cpp.tar.gz" ] && [ -f "$PACK/python.tar.gz" ] \
  || fail "no $PACK: run python -m app.devtools.gpu_check.prepare here and carry .gpu_check"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem \
  --format=csv > "$OUT/nvidia-smi.csv" 2>&1 || say "no nvidia-smi"
say "python: $("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"

rm -rf "$WORK/site" && tar -xzf "$PACK/python.tar.gz" -C "$WORK" || fail "unpacking python.tar.gz"
# the models need numpy and gguf only: written on one core while the others build llama.cpp
if [ -z "$CONFIGURE_ONLY" ]; then
  PYTHONPATH="$WORK/site:$ROOT" "$PY" -m app.devtools.gpu_check.models --work "$WORK" $SMALL \
    > "$WORK/models.log" 2>&1 &
  MODELS_PID=$!
fi

CUDA_ARGS=()
if [ "$CUDA" = ON ] && [ -z "$REUSE" ]; then
  command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
  # the CUDA toolkit may come without cuBLAS (pip-built images): use the Python packages'
  # copy then (nvidia-cublas, PyTorch's dependency)
  if [ -z "${CUBLAS_ROOT:-}" ] && ! ls /usr/local/cuda/lib64/libcublas.so* >/dev/null 2>&1; then
    CUBLAS_ROOT=$("$PY" - <<'EOF'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
for root in roots + glob.glob("/opt/*/.venv/lib/python3*/site-packages/nvidia"):
    for lib in sorted(glob.glob(os.path.join(root, "**", "libcublas.so.*"), recursive=True)):
        print(os.path.dirname(os.path.dirname(lib)))
        raise SystemExit
EOF
)
  fi
  if [ -n "${CUBLAS_ROOT:-}" ]; then
    say "cuBLAS from $CUBLAS_ROOT"
    CUBLAS=$(ls "$CUBLAS_ROOT"/lib/libcublas.so.* | head -1)
    CUBLASLT=$(ls "$CUBLAS_ROOT"/lib/libcublasLt.so.* | head -1)
    CUDA_ARGS+=(-DCUDA_cublas_LIBRARY="$CUBLAS" -DCUDA_cublasLt_LIBRARY="$CUBLASLT"
                -DCMAKE_CUDA_FLAGS="-I$CUBLAS_ROOT/include")
    export LD_LIBRARY_PATH="$CUBLAS_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  # nor the driver's stub: link the driver itself, wherever the machine mounts it
  if [ -z "${CUDA_DRIVER_LIB:-}" ] && ! ls /usr/local/cuda/lib64/stubs/libcuda.so >/dev/null 2>&1; then
    CUDA_DRIVER_LIB=$( (ldconfig -p | grep -o '/.*/libcuda\.so.*' ;
                        ls /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so*
                       ) 2>/dev/null | head -1)
  fi
  if [ -n "${CUDA_DRIVER_LIB:-}" ]; then
    say "CUDA driver library $CUDA_DRIVER_LIB"
    CUDA_ARGS+=(-DCUDA_cuda_driver_LIBRARY="$CUDA_DRIVER_LIB")
  fi
  CUDA_ARGS+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA_NCCL=OFF
              -DGGML_CUDA_FA="$FA")
fi

if [ -n "$REUSE" ]; then
  BIN="$REUSE"
else
  BUILD="$WORK/build-cuda-$CUDA"
  BIN="$BUILD/bin"
  if [ ! -x "$BIN/llama-server" ] || [ ! -f "$BIN/libllama.so" ] || [ -n "$CONFIGURE_ONLY" ]; then
    [ -d "$WORK/llama.cpp" ] || tar -xzf "$PACK/llama.cpp.tar.gz" -C "$WORK" \
      || fail "unpacking llama.cpp.tar.gz"
    say "configure (CUDA $CUDA)"
    cmake -S "$WORK/llama.cpp" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF "${CUDA_ARGS[@]}" > "$WORK/configure.log" 2>&1 \
      || { tail -40 "$WORK/configure.log"; fail "cmake configure"; }
    grep -E "CUDA|cuBLAS|Including" "$WORK/configure.log"
    [ -n "$CONFIGURE_ONLY" ] && { say "configured"; exit 0; }
    # stopped short of the call's limit, so that this script still writes its JSON; ninja
    # resumes where it stopped when the same command runs again on the still-warm machine
    LEFT=$(( BUDGET - ($(date +%s) - START) - 20 ))
    say "build llama llama-server -j$JOBS (at most $LEFT s)"
    timeout "$LEFT" cmake --build "$BUILD" --target llama llama-server -j "$JOBS" \
      > "$WORK/build.log" 2>&1
    RC=$?
    [ $RC = 124 ] && fail "the build ran out of time: run the same command again at once"
    [ $RC = 0 ] || { tail -60 "$WORK/build.log"; fail "cmake build"; }
    say "built"
  else
    say "reusing $BIN"
  fi
fi

wait "$MODELS_PID" || { cat "$WORK/models.log"; fail "writing the models"; }
say "models written: $(tail -c 400 "$WORK/models.log")"

# llama_cpp loads libllama from LLAMA_CPP_LIB_PATH; its _ggml module (the engine's device
# list) only from its own lib/ folder, so that folder is the build's too
ln -sfn "$BIN" "$WORK/site/llama_cpp/lib"
export LLAMA_CPP_LIB_PATH="$BIN"
export PYTHONPATH="$WORK/site:$ROOT" PYTHONUNBUFFERED=1
export SPECDECK_MODEL_CACHE="$WORK/cache" SPECDECK_CACHE_DIR="$WORK/cache"
export SPECDECK_CONFIG_DIR="$WORK/config" SPECDECK_DATA_DIR="$WORK/data"
LEFT=$(( BUDGET - ($(date +%s) - START) ))
say "check ($LEFT s left)"
"$PY" -m app.devtools.gpu_check.check --work "$WORK" --bin "$BIN" \
  --out "$OUT" --budget-s "$LEFT" $SMALL || fail "check.py exited $?"
say "done"
