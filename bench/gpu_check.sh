#!/usr/bin/env bash
# GPU check of jaxsearch's Pallas kernels, for a machine with an NVIDIA GPU,
# Python 3.12 and jax with its CUDA plugin preinstalled, and no network:
#   1. pip installs jaxsearch from this repository (no build isolation, no
#      dependencies: the build requirements must already be installed; wheels
#      put in $WHEELS, default bench/wheels, e.g. meson-python, go in first);
#   2. runs the GPU tests (pytest -m gpu): every GPU implementation that can
#      run here (Pallas, native Triton where jax-triton works) against jnp;
#   3. the deviceless resource report: every tuning config compiled by XLA
#      for an H200 with spills fatal, its registers, spills and shared memory
#      (bench/gpu_resources.py; needs jax's CUDA plugin, which a GPU jax has);
#   4. the deviceless cost estimate of each kernel from its SASS
#      (bench/gpu_cost.py; needs nvdisasm, the nvidia-cuda-nvdisasm wheel:
#      carry it in $WHEELS), whose rows step 5 times;
#   5. benchmarks N = M = 1e8 sorted int32 and float32: the merge-path and
#      binary-search kernels against jnp's methods, torch and cupy, and a
#      device-to-device copy of the same bytes, then the kernels at the
#      configs step 4 estimated, each beside its estimate
#      (bench/gpu_bench.py).
# Each step gets a time limit from what is left of $DEADLINE (default 465 s),
# so the whole script ends within 8 minutes whatever hangs.
#
# Usage: bench/gpu_check.sh [gpu_bench.py options, e.g. --skew or --sweep]
# (--sweep times all the tuning configs: give it DEADLINE=600 or more.)
set -u -o pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-bench/wheels}
DEADLINE=${DEADLINE:-465}
# JAX would otherwise take 75% of GPU memory up front, leaving torch and
# cupy too little for 1e8-element inputs.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
status=0

# step NAME MAX RESERVE COMMAND...: run COMMAND for at most MAX seconds,
# and never into the last RESERVE seconds before the deadline (kept for the
# steps after it).
step() {
  local name=$1 limit=$2 reserve=$3 start=$SECONDS rc
  shift 3
  local left=$((DEADLINE - SECONDS - reserve))
  [ "${left}" -lt "${limit}" ] && limit=${left}
  if [ "${limit}" -lt 10 ]; then
    echo "=== ${name}: skipped, out of time"
    status=1
    return 1
  fi
  echo "=== ${name} (limit ${limit} s)"
  timeout --kill-after=10 "${limit}" "$@"
  rc=$?
  echo "=== ${name}: exit ${rc} after $((SECONDS - start)) s"
  [ "${rc}" -eq 0 ] || status=1
  return "${rc}"
}

"${PYTHON}" - <<'EOF'
import sys, jax
print(f"python {sys.version.split()[0]}, jax {jax.__version__}, "
      f"backend {jax.default_backend()}, devices {jax.devices()}")
if jax.default_backend() != "gpu":
  sys.exit("no GPU backend: this script needs a GPU")
EOF
[ $? -eq 0 ] || exit 1

if compgen -G "${WHEELS}/*.whl" > /dev/null; then
  step "install carried wheels" 60 400 \
    "${PYTHON}" -m pip install --no-index --no-deps "${WHEELS}"/*.whl
fi
step "pip install jaxsearch" 180 290 \
  "${PYTHON}" -m pip install --no-build-isolation --no-deps . || exit 1

# -P: keep the source tree off sys.path, so the tests import the installed
# package (the source `jaxsearch/` lacks the compiled extension).
step "pytest -m gpu" 200 250 \
  "${PYTHON}" -P -m pytest -m gpu tests -q -p no:cacheprovider -rfE

step "deviceless resource report" 90 160 \
  "${PYTHON}" -P bench/gpu_resources.py --dtypes int32,float32

estimates=$(mktemp --suffix=.json)
if step "deviceless cost estimate" 60 100 \
  "${PYTHON}" -P bench/gpu_cost.py --json "${estimates}"; then
  set -- --estimates "${estimates}" "$@"
fi

step "benchmark" 300 0 "${PYTHON}" -P bench/gpu_bench.py "$@"

echo "=== gpu_check: $([ ${status} -eq 0 ] && echo PASSED || echo FAILED)" \
  "in ${SECONDS} s"
exit "${status}"
