#!/usr/bin/env bash
# Issue 41 on a CUDA machine, clocks left alone (KBENCH_LOCK_CLOCKS=0; ncu gets --clock-control none): the GPU tier
# (pytest -m gpu), one profile per mode with the contract check, the resident's warm loop (first, second and an
# edited-source call, then --resident-stop), and a kbench SIGKILLed while ncu profiles under it (its reaper must end
# ncu and the plan's child). Usage: scripts/gpu-issue41.sh [RESULTS_DIR]   (default out/issue41)
set -uo pipefail
res=${1:-out/issue41}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
clocks() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader | tee -a "$res/device.txt"; }
clocks
echo "=== GPU tier"
$py -m pytest -q -m gpu -p no:cacheprovider -rs 2>&1 | tee "$res/pytest-gpu.log" | tail -6
echo "=== one profile per mode"
for run in "vector_add event" "vector_add annotation" "matmul ncu" "fork_join nsys"; do
  set -- $run
  start=$(date +%s%N)
  KBENCH_RESIDENT=0 $py -m kbench.kernel "$1" --prof_type="$2" --out "$res/profiles" > "$res/$2_$1.md" 2> "$res/$2_$1.err"
  echo "$1 $2 rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^- Clocks' "$res/$2_$1.md" | cut -c1-120)"
done
$py tests/contract/check_report.py "$res"/profiles/*/*/*/*/report.md | tail -1
echo "pictures: $(cd "$res/profiles" && ls */*/*/*/timeline.png */*/*/*/roofline.png 2>/dev/null | tr '\n' ' ')"
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
echo "=== SIGKILL while ncu profiles"
KBENCH_RESIDENT=0 $py -m kbench.kernel matmul --prof_type=ncu --out "$res/killed" > "$res/killed.md" 2> "$res/killed.err" &
victim=$!
for _ in $(seq 60); do pgrep -f "ncu.*kbench" > /dev/null && break; sleep 0.5; done
echo "ncu running under kbench: $(pgrep -fc 'ncu.*kbench')"; sleep 3
kill -9 "$victim"; sleep 5
echo "after SIGKILL + 5 s: ncu $(pgrep -fc 'ncu.*kbench'), plan children $(pgrep -fc 'kbench.capture.child')"
clocks
