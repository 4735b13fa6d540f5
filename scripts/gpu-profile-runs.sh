#!/usr/bin/env bash
# Profile a list of runs on a CUDA machine, clocks left alone (KBENCH_LOCK_CLOCKS=0), plans from tests/data/validation
# or the shipped ones: one line per run (exit, wall time, the Stages table's first row), then the contract check of
# every report written; GPU_TIER=1 then runs the GPU tier (GPU_TIER_S caps it, default 330 s).
# RUNS="name:mode:kernel:version:params ..." (space-separated, params comma-separated) names the runs, or SET one list:
#   mla-decode-steps (default): the mla_decode versions at the compute-bound point and the chain pair in event and
#     annotation mode (the runs behind docs/kernels/mla_decode.md's steps, docs/examples/mla_decode-h100-runs);
#   diagnosis-rows: the rowloop long pair, matmul v2, mla_decode v2, tile_mm narrow and stream few in event and
#     annotation mode (the runs behind docs/diagnosis.md's 2026-11-25 rows that came last; with GPU_TIER=1).
# Usage: [SET=NAME | RUNS=...] [GPU_TIER=1] scripts/gpu-profile-runs.sh [RESULTS_DIR]   (default out/profile-runs)
res=${1:-out/profile-runs}
. "$(dirname "$0")/gpu-common.sh"
declare -A sets
sets[mla-decode-steps]="mla_decode-v2-s16:event:mla_decode:v2:--b=32,--s=16,--t=4096
mla_decode-v4-s16:event:mla_decode:v4:--b=32,--s=16,--t=4096
chain-split:event:chain:split:
chain-whole:event:chain:whole:
mla_decode-v2-s16:annotation:mla_decode:v2:--b=32,--s=16,--t=4096
mla_decode-v4-s16:annotation:mla_decode:v4:--b=32,--s=16,--t=4096
chain-split:annotation:chain:split:
chain-whole:annotation:chain:whole:"
for mode in event annotation; do
  sets[diagnosis-rows]+="rowloop-long_narrow:$mode:rowloop:long_narrow:--rows=264,--cols=1048576
rowloop-long_wide:$mode:rowloop:long_wide:--rows=264,--cols=1048576
matmul-v2:$mode:matmul:v2:
mla_decode-v2-s16:$mode:mla_decode:v2:--b=32,--s=16,--t=4096
tile_mm-narrow:$mode:tile_mm:narrow:
stream-few:$mode:stream:few:
"
done
set=${SET:-mla-decode-steps}
[ -n "${RUNS:-}" ] || [ -n "${sets[$set]:-}" ] || { echo "SET=$set: no such list (${!sets[*]})" >&2; exit 2; }
for spec in ${RUNS:-${sets[$set]}}; do
  IFS=: read -r name mode kernel version params <<< "$spec"
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  $py -m kbench.kernel "$kernel" "$version" ${params//,/ } --kernel-path tests/data/validation --prof_type="$mode" \
    --out "$res/profiles" > "$res/$mode-$name.md" 2> "$res/$mode-$name.err"
  echo "$name $mode rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^| ' "$res/$mode-$name.md" | sed -n 4p | cut -c1-150)"
done
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md | tail -1
if [ "${GPU_TIER:-0}" = 1 ]; then
  step "GPU tier"
  timeout "${GPU_TIER_S:-330}" $py -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tail -4 | tee "$res/pytest-gpu.txt"
fi
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader | tee -a "$res/device.txt"
