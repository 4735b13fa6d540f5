#!/usr/bin/env bash
# On a CUDA machine, without touching its clocks (KBENCH_LOCK_CLOCKS=0; ncu gets --clock-control none): the whole
# test suite (the GPU tier included), then one profile in each mode through the CLI (event and annotation on
# vector_add, ncu on matmul, nsys on fork_join), each report checked against the contract, and the same
# captures analysed again offline with `kbench analyze`. TESTS=gpu runs the GPU tier alone (pytest -m gpu);
# RESIDENT=1 adds the resident's warm loop (three calls, then --resident-stop); REAPER=1 SIGKILLs a kbench while ncu
# profiles under it (its reaper must end ncu and the plan's child).
# Usage: [TESTS=gpu] [RESIDENT=1] [REAPER=1] scripts/gpu-tier.sh [RESULTS_DIR]   (default out/gpu-tier; profiles
# under RESULTS_DIR/profiles)
set -uo pipefail
res=${1:-out/gpu-tier}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
echo "=== device (read-only query)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv | tee "$res/device.txt"
if [ "${TESTS:-all}" = gpu ]; then
  echo "=== pytest, the GPU tier"
  $py -m pytest -q -m gpu -p no:cacheprovider -rs 2>&1 | tee "$res/pytest-gpu.log" | tail -6
else
  echo "=== pytest, both tiers"
  $py -m pytest -q -p no:cacheprovider -rs 2>&1 | tee "$res/pytest.log" | tail -12
fi
echo "=== one profile per mode"
for run in "vector_add event" "vector_add annotation" "matmul ncu" "fork_join nsys"; do
  set -- $run
  start=$(date +%s%N)
  KBENCH_RESIDENT=0 $py -m kbench.kernel "$1" --prof_type="$2" --out "$res/profiles" > "$res/$2_$1.md" 2> "$res/$2_$1.err"
  rc=$?
  echo "$1 $2 rc=$rc wall $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^- Clocks' "$res/$2_$1.md")"
done
echo "=== contract"
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md
echo "pictures: $(cd "$res/profiles" && ls */*/*/*/timeline.png */*/*/*/roofline.png 2>/dev/null | tr '\n' ' ')"
echo "=== the same captures, analysed offline"
for cap in "$res"/profiles/annotation/*/*/*/profile.ncu-rep "$res"/profiles/ncu/*/*/*/profile.ncu-rep \
           "$res"/profiles/nsys/*/*/*/timeline.sqlite "$res"/profiles/nsys/*/*/*/pytorch_trace.json; do
  [ -f "$cap" ] || continue
  kernel=$(echo "$cap" | awk -F/ '{print $(NF-3)}')
  mode=$(echo "$cap" | awk -F/ '{print $(NF-4)}')
  $py -m kbench analyze "$cap" --mode "$mode" --plan "$kernel" --out "$res/offline" > /dev/null 2> "$res/offline-$mode.err"
  echo "analyze $mode $kernel rc=$?"
done
if [ "${RESIDENT:-0}" = 1 ]; then
  echo "=== resident"
  export KBENCH_RESIDENT=1 XDG_RUNTIME_DIR=$(mktemp -d)
  chmod 700 "$XDG_RUNTIME_DIR"
  for call in first second third; do
    start=$(date +%s%N)
    $py -m kbench.kernel matmul v2 --m=2048 --n=2048 --k=2048 --prof_type=event --out "$res/resident" > "$res/resident-$call.md" 2> "$res/resident-$call.err"
    echo "$call rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms $(grep -c 'resident' "$res/resident-$call.err") resident line(s)"
    sleep 1
  done
  $py -m kbench.kernel --resident-stop 2>&1; sleep 1; echo "residents left: $(pgrep -fc kbench.cli.resident_server)"
  unset KBENCH_RESIDENT XDG_RUNTIME_DIR
fi
if [ "${REAPER:-0}" = 1 ]; then
  echo "=== SIGKILL while ncu profiles"
  KBENCH_RESIDENT=0 $py -m kbench.kernel matmul --prof_type=ncu --out "$res/killed" > "$res/killed.md" 2> "$res/killed.err" &
  victim=$!
  for _ in $(seq 60); do pgrep -f "ncu.*kbench" > /dev/null && break; sleep 0.5; done
  echo "ncu running under kbench: $(pgrep -fc 'ncu.*kbench')"; sleep 3
  kill -9 "$victim"; sleep 5
  echo "after SIGKILL + 5 s: ncu $(pgrep -fc 'ncu.*kbench'), plan children $(pgrep -fc 'kbench.capture.child')"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader | tee -a "$res/device.txt"
