#!/usr/bin/env bash
# MLA decode's peers (issue 52) on a CUDA machine with no network: installs the carry (.whl-fi, built by
# scripts/mla-peers/build-carry.sh: a stripped FlashInfer wheel with its fa3 MLA module prebuilt for sm_90a, tvm-ffi,
# FlashMLA's libflashmla_capi.so) into /tmp/site, imports flashinfer.mla, then smoke-tests each peer in a process of
# its own (FlashMLA exits its process on a CUDA error) at b=2 t=256: s=1 h=16, s=1 h=128 and s=4 h=16 with ragged
# lens, each output against a float32 paged reference, timed by kbench's event timing. Each step has a timeout (6.5
# minutes at most in all; about 1 expected) and says FAILED with its exit code (124: timed out) and its log's end.
# POINTS="b32_s1_t4096_h128 ..." also times those points, both peers in one process (at most 2.5 minutes more).
# Usage: scripts/gpu-mla-peers.sh [RESULTS_DIR]   (default out/gpu-mla-peers; CARRY= another carry folder)
res=${1:-out/gpu-mla-peers}
. "$(dirname "$0")/gpu-common.sh"
carry=${CARRY:-.whl-fi}
# the carry's libraries link libcudart.so.13, which torch has loaded by then; nvcc is needed only by FlashInfer's JIT
# fallback (the AOT module not loading)
[ -x /usr/local/cuda/bin/nvcc ] && cuda_home=/usr/local/cuda || cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
export CUDA_HOME=${CUDA_HOME:-$cuda_home} MAX_JOBS=16 FLASHINFER_CUDA_ARCH_LIST=9.0a TORCH_CUDA_ARCH_LIST=9.0
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-ws TVM_FFI_CACHE_DIR=/tmp/tvm-ffi
export PYTHONPATH="/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
failed=0
check() {  # check STEP RC LOG: say FAILED with the step's exit code and the end of its log
  [ "$2" = 0 ] && return 0
  failed=1
  echo "FAILED: $1 (exit $2$([ "$2" = 124 ] && echo ', timed out')); last lines of $3:"
  tail -n 15 "$3" | sed 's/^/  | /'
  return 1
}

step "install the carry ($carry) into /tmp/site"
if [ -f "$carry/MANIFEST.txt" ]; then cat "$carry/MANIFEST.txt"; else echo "no $carry/MANIFEST.txt: was $carry carried?"; fi
timeout 60 $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$carry"/*.whl > "$res/install.log" 2>&1
check "pip install $carry/*.whl" $? "$res/install.log"

step "import flashinfer.mla"
timeout 90 $py -c "
import time; t = time.time()
import flashinfer, flashinfer.mla, tvm_ffi
print('flashinfer', flashinfer.__version__, 'from', flashinfer.__file__, 'tvm_ffi', tvm_ffi.__version__, f'imported in {time.time() - t:.1f} s')
from flashinfer.jit import env
print('AOT modules:', sorted(p.name for p in env.FLASHINFER_AOT_DIR.iterdir()) if env.FLASHINFER_AOT_DIR.is_dir() else 'none')
" > "$res/import.log" 2>&1
check "import flashinfer.mla" $? "$res/import.log" && cat "$res/import.log"

for peer in flashinfer flashmla; do
  step "smoke: $peer"
  # FlashInfer's budget covers its JIT fallback (about a minute on 16 cores) should the AOT module not load
  timeout "$([ $peer = flashinfer ] && echo 150 || echo 90)" $py -m tests.benchmark.mla_peers --peers "$peer" --reps 20 > "$res/smoke-$peer.txt" 2>&1
  check "smoke of $peer" $? "$res/smoke-$peer.txt" || true
  grep -E '^b[0-9]' "$res/smoke-$peer.txt"
done

if [ -n "${POINTS:-}" ]; then
  step "points: $POINTS"
  timeout 150 $py -m tests.benchmark.mla_peers $POINTS --reps 50 2>&1 | tee "$res/points.txt"
  check "points" "${PIPESTATUS[0]}" "$res/points.txt" || true
fi
step "done ($([ $failed = 0 ] && echo 'every step passed' || echo 'a step FAILED: see above'))"
exit $failed
