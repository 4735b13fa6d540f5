#!/usr/bin/env bash
# The H100 runs behind docs/diagnosis.md's 2026-11-25 rows that came last, clocks left alone: the rowloop long pair
# (event, annotation), example reports of the shipped and validation kernels with the final catalogue, the GPU tier,
# and the contract check of every report written. Usage: scripts/gpu-issue28.sh [RESULTS_DIR] (default out/issue28)
set -uo pipefail
res=${1:-out/issue28}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee "$res/device.txt"
run() {  # name mode kernel version [params...]
  local name=$1 mode=$2; shift 2
  start=$(date +%s%N)
  $py -m kbench.kernel "$@" --kernel-path tests/data/validation --prof_type="$mode" --out "$res/profiles" \
    > "$res/$mode-$name.md" 2> "$res/$mode-$name.err"
  echo "$name $mode rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^| ' "$res/$mode-$name.md" | sed -n 4p | cut -c1-150)"
}
for mode in event annotation; do
  run rowloop-long_narrow "$mode" rowloop long_narrow --rows=264 --cols=1048576
  run rowloop-long_wide "$mode" rowloop long_wide --rows=264 --cols=1048576
  run matmul-v2 "$mode" matmul v2
  run mla_decode-v2-s16 "$mode" mla_decode v2 --b=32 --s=16 --t=4096
  run tile_mm-narrow "$mode" tile_mm narrow
  run stream-few "$mode" stream few
done
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md | tail -1
timeout "${GPU_TIER_S:-330}" $py -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tail -4 | tee "$res/pytest-gpu.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader | tee -a "$res/device.txt"
