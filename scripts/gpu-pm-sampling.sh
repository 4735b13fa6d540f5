#!/usr/bin/env bash
# PM sampling in event mode on a CUDA machine, clocks untouched (KBENCH_LOCK_CLOCKS=0, ncu --clock-control none):
# the GPU tier (TIER=0 skips it), the agreement and timing table (tests/benchmark/bench_sampling.py; PLANS picks
# fewer: pkg:ver,...), the warm loop with sampling on and off (WARM=1: bench_turnaround --warm), and the probe of what
# the chip offers (PROBE=1: scripts/pm-sampling-probe.py); INTERVALS="5 2" samples PLANS again at those intervals
# (us); BENCH=0 skips the table at the default interval; COSTS=1 times opening a collector per buffer size and runs
# ncu beside one (scripts/pm-sampling-costs.py); RAGGED=1 the uneven-programs pair in event mode.
# Needs cupti-python beside kbench (README, "Counters in event mode": pip install --no-deps --target DIR, DIR first
# on PYTHONPATH).
# Usage: scripts/gpu-pm-sampling.sh [RESULTS_DIR]   (default out/gpu-pm-sampling)
res=${1:-out/gpu-pm-sampling}
. "$(dirname "$0")/gpu-common.sh"
$py -c "from importlib.metadata import version; print('cupti-python', version('cupti-python'))" | tee -a "$res/device.txt"
if [ "${PROBE:-0}" = 1 ]; then
  step "probe"
  $py scripts/pm-sampling-probe.py "$res/probe" > "$res/probe.log" 2>&1; echo "probe rc=$?"; tail -3 "$res/probe.log"
fi
if [ "${COSTS:-0}" = 1 ]; then
  step "what opening costs per buffer size; ncu beside an open collector"
  timeout 400 $py scripts/pm-sampling-costs.py 2>&1 | tee "$res/costs.txt" | tail -12
fi
if [ "${TIER:-1}" = 1 ]; then
  step "GPU tier"
  $py -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee "$res/gpu-tier.log" | tail -25
fi
if [ "${BENCH:-1}" = 1 ]; then
  step "sampled against replayed counters; timings with sampling on and off"
  $py -m tests.benchmark.bench_sampling "$res/bench" ${PLANS:+--plans=$PLANS} 2>&1 | tee "$res/bench.txt"
fi
for iv in ${INTERVALS:-}; do  # finer samples for short stages: sampled at $iv us, against ncu again
  step "sampled at $iv us"
  $py -m tests.benchmark.bench_sampling "$res/bench-$iv" ${PLANS:+--plans=$PLANS} --interval-us=$iv --no-off 2>&1 | tee "$res/bench-$iv.txt"
done
if [ "${WARM:-0}" = 1 ]; then
  step "warm loop, sampling on"
  $py -m tests.benchmark.bench_turnaround --warm 2>&1 | tee "$res/warm-on.txt" | tail -12
  step "warm loop, sampling off"
  KBENCH_SAMPLING=0 $py -m tests.benchmark.bench_turnaround --warm 2>&1 | tee "$res/warm-off.txt" | tail -12
fi
if [ "${RAGGED:-0}" = 1 ]; then  # uneven programs, no access run: the SM-busy evidence sampled in event mode
  for v in per_segment chunked; do
    $py -m kbench.kernel ragged $v --kernel-path tests/data/validation --prof_type=event --out "$res/ragged" > "$res/event-ragged-$v.md" 2> "$res/event-ragged-$v.err"
    echo "ragged $v event rc=$?; $(grep -m1 '^1\. ' "$res/event-ragged-$v.md" | cut -c1-200)"
  done
fi
step "done"
