#!/usr/bin/env bash
# Validate kbench on a CUDA machine without touching its clocks, power or modes: the full test suite
# (GPU tier included), `kbench check`, event-mode profiles of every version of every shipped plan, annotation
# and ncu mode on the base versions, nsys mode (scripts/gpu-nsys.sh), clock sampling and the GPU lock
# (scripts/gpu-clocks.sh),
# event vs do_bench, the benchmark table, and the device's measured copy / matmul ceilings.
# Usage: scripts/gpu-validate.sh [RESULTS_DIR]   (default out/gpu-validate; profiles go to out/profiles)
set -uo pipefail
res=${1:-out/gpu-validate}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export KBENCH_LOCK_CLOCKS=0  # never lock a shared GPU's clocks: kbench only samples them
step() { echo; echo "=== $* ==="; }

step "device (read-only query)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
$py -c "import torch, triton, typer, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'typer', typer.__version__, 'pydantic', pydantic.__version__)"

step "pytest (both tiers)"
$py -m pytest -q -p no:cacheprovider 2>&1 | tee "$res/pytest.log" | tail -25

step "kbench check on the GPU"
for spec in vector_add:base vector_add:v2 matmul:base matmul:v2 matmul:torch_mm fork_join:base fork_join:serial; do
  $py -m kbench check "${spec%%:*}" "${spec#*:}" 2>&1 | tail -1
done

step "event mode, every version, default parameters"
for spec in vector_add:base vector_add:v2 matmul:torch_mm matmul:base matmul:v2 fork_join:serial fork_join:base; do
  /usr/bin/time -f "wall %e s" $py -m kbench.kernel "${spec%%:*}" "${spec#*:}" --prof_type=event > "$res/event_${spec/:/_}.md" 2> "$res/event_${spec/:/_}.err"
  echo "$spec rc=$? $(tail -2 "$res/event_${spec/:/_}.err" | tr '\n' ' ')"
done

step "annotation and ncu modes (ncu --clock-control none)"
for spec in vector_add:base matmul:base; do
  for mode in annotation ncu; do
    /usr/bin/time -f "wall %e s" $py -m kbench.kernel "${spec%%:*}" "${spec#*:}" --prof_type=$mode > "$res/${mode}_${spec/:/_}.md" 2> "$res/${mode}_${spec/:/_}.err"
    echo "$spec $mode rc=$? $(tail -2 "$res/${mode}_${spec/:/_}.err" | tr '\n' ' ')"
  done
done

step "nsys mode: Nsight Systems, then the PyTorch-profiler fallback (scripts/gpu-nsys.sh)"
SKIP_TESTS=1 bash "$(dirname "$0")/gpu-nsys.sh" "$res/nsys" | grep -E '^(nsys|hidden|broken|event)'

step "clocks, read-only: scripts' --dry-run, unlocked profiles' sampled clocks, two kbench on one GPU (scripts/gpu-clocks.sh)"
bash "$(dirname "$0")/gpu-clocks.sh" "$res/clocks" | grep -E '^(lock|reset|GPU|vector_add|matmul|fork_join|--no-wait|waiting|holder)'

step "event vs do_bench"
$py -m tests.benchmark.compare_do_bench 2>&1 | tee "$res/do_bench.txt" | grep -v '^kbench:'

step "benchmarks"
$py -m tests.benchmark.bench_all 2>&1 | tee "$res/bench_all.txt" | grep -v '^kbench:'

step "measured ceilings (device copy, torch.mm)"
$py - <<'PY' 2>&1 | tee "$res/ceilings.txt"
from kbench.capture import ceilings
for p, c in ceilings.measure(["bf16", "fp16", "fp32", "tf32"]).items():
    print(f"{p}: {c.tflops:.1f} TFLOP/s; copy {c.gbps:.0f} GB/s")
PY
tar czf "$res/profiles.tgz" out/profiles
