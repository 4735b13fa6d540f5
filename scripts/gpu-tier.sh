#!/usr/bin/env bash
# On a CUDA machine, without touching its clocks (KBENCH_LOCK_CLOCKS=0; ncu gets --clock-control none): the whole
# test suite (the GPU tier included), then one profile in each mode through the CLI (event and annotation on
# vector_add, ncu on matmul, nsys on fork_join), each report checked against the contract, and the same
# captures analysed again offline with `kbench analyze`.
# Usage: scripts/gpu-tier.sh [RESULTS_DIR]   (default out/gpu-tier; profiles under RESULTS_DIR/profiles)
set -uo pipefail
res=${1:-out/gpu-tier}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
echo "=== device (read-only query)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv | tee "$res/device.txt"
echo "=== pytest, both tiers"
$py -m pytest -q -p no:cacheprovider -rs 2>&1 | tee "$res/pytest.log" | tail -12
echo "=== one profile per mode"
for run in "vector_add event" "vector_add annotation" "matmul ncu" "fork_join nsys"; do
  set -- $run
  start=$(date +%s%N)
  $py -m kbench.kernel "$1" --prof_type="$2" --out "$res/profiles" > "$res/$2_$1.md" 2> "$res/$2_$1.err"
  rc=$?
  echo "$1 $2 rc=$rc wall $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^- Clocks' "$res/$2_$1.md")"
done
echo "=== contract"
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md
echo "=== the same captures, analysed offline"
for cap in "$res"/profiles/annotation/*/*/*/profile.ncu-rep "$res"/profiles/ncu/*/*/*/profile.ncu-rep \
           "$res"/profiles/nsys/*/*/*/timeline.sqlite "$res"/profiles/nsys/*/*/*/pytorch_trace.json; do
  [ -f "$cap" ] || continue
  kernel=$(echo "$cap" | awk -F/ '{print $(NF-3)}')
  mode=$(echo "$cap" | awk -F/ '{print $(NF-4)}')
  $py -m kbench analyze "$cap" --mode "$mode" --plan "$kernel" --out "$res/offline" > /dev/null 2> "$res/offline-$mode.err"
  echo "analyze $mode $kernel rc=$?"
done
