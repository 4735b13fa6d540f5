#!/usr/bin/env bash
# The H100 runs behind issue 29's devlog steps (docs/kernels/mla_decode.md), clocks left alone: the mla_decode versions
# at the compute-bound point and the chain pair (tests/data/validation/chain), in event and annotation mode, and the
# contract check of every report written. Usage: scripts/gpu-issue29.sh [RESULTS_DIR] (default out/issue29);
# RUNS="name:mode:kernel:version:params..." (space-separated) picks other runs.
set -uo pipefail
res=${1:-out/issue29}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$res/device.txt"
default="mla_decode-v2-s16:event:mla_decode:v2:--b=32,--s=16,--t=4096
mla_decode-v4-s16:event:mla_decode:v4:--b=32,--s=16,--t=4096
chain-split:event:chain:split:
chain-whole:event:chain:whole:
mla_decode-v2-s16:annotation:mla_decode:v2:--b=32,--s=16,--t=4096
mla_decode-v4-s16:annotation:mla_decode:v4:--b=32,--s=16,--t=4096
chain-split:annotation:chain:split:
chain-whole:annotation:chain:whole:"
for spec in ${RUNS:-$default}; do
  IFS=: read -r name mode kernel version params <<< "$spec"
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  $py -m kbench.kernel "$kernel" "$version" ${params//,/ } --kernel-path tests/data/validation --prof_type="$mode" \
    --out "$res/profiles" > "$res/$mode-$name.md" 2> "$res/$mode-$name.err"
  echo "$name $mode rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^| ' "$res/$mode-$name.md" | sed -n 4p | cut -c1-150)"
done
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md | tail -1
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader | tee -a "$res/device.txt"
