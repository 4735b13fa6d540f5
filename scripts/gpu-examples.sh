#!/usr/bin/env bash
# Regenerate docs/examples' live run folders with today's code on a CUDA machine, clocks left alone
# (KBENCH_LOCK_CLOCKS=0; ncu gets --clock-control none). Each run writes under RESULTS_DIR/<example>/ (its own --out);
# scripts/examples-in.py then copies each run folder into docs/examples/<example>/ (what is kept: that script's
# docstring). nsys runs want elfutils' libdw/libelf on LD_LIBRARY_PATH (../shared/tools/nsys-libs.sh; NSYSLIB names
# the folder, default .nsyslib). Usage: scripts/gpu-examples.sh [RESULTS_DIR] (default out/examples); ONLY=<grep -E
# pattern> picks examples by name.
set -uo pipefail
res=${1:-out/examples}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0 KBENCH_RESIDENT=0
[ -d "${NSYSLIB:-.nsyslib}" ] && export LD_LIBRARY_PATH="$PWD/${NSYSLIB:-.nsyslib}:${LD_LIBRARY_PATH:-}"
val=tests/data/validation
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee "$res/device.txt"
# example|mode|kernel version params...|extra options[|environment for that run]
runs=(
  "event-vector_add-v2|event|vector_add v2|"
  "event-matmul-v2|event|matmul v2|"
  "event-matmul-base-unlocked|event|matmul|"
  "event-fork_join-base|event|fork_join|"
  "annotation-vector_add-base|annotation|vector_add|"
  "annotation-vector_add-base-unlocked|annotation|vector_add|"
  "annotation-matmul-base|annotation|matmul|"
  "ncu-matmul-base|ncu|matmul|"
  "nsys-fork_join-base|nsys|fork_join|--timeline-backend=nsys"
  "nsys-vector_add-base|nsys|vector_add|--timeline-backend=nsys"
  "nsys-fork_join-base-fallback|nsys|fork_join|--timeline-backend=torch"
  "nsys-vector_add-base-fallback|nsys|vector_add|--timeline-backend=torch"
  "nsys-fork_join-base-nsys-failed|nsys|fork_join --bench-runs=20||LD_LIBRARY_PATH="
  "instruction-mix-h100/event-matmul-v2|event|matmul v2|"
  "instruction-mix-h100/event-mla_decode-v2|event|mla_decode v2 --b=32 --s=16 --t=4096|"
  "instruction-mix-h100/event-mla_decode-v3|event|mla_decode v3 --b=32 --s=16 --t=4096|"
  "instruction-mix-h100/event-vector_add-base|event|vector_add|"
)
for m in event annotation; do
  runs+=("diagnosis-h100/$m-matmul-v2|$m|matmul v2|")
  runs+=("diagnosis-h100/$m-mla_decode-v2-s16|$m|mla_decode v2 --b=32 --s=16 --t=4096|")
  runs+=("diagnosis-h100/$m-rowloop-long_narrow|$m|rowloop long_narrow --rows=264 --cols=1048576|--kernel-path=$val")
  runs+=("diagnosis-h100/$m-rowloop-long_wide|$m|rowloop long_wide --rows=264 --cols=1048576|--kernel-path=$val")
  runs+=("diagnosis-h100/$m-stream-few|$m|stream few|--kernel-path=$val")
  runs+=("diagnosis-h100/$m-tile_mm-narrow|$m|tile_mm narrow|--kernel-path=$val")
done
for spec in "${runs[@]}"; do
  IFS='|' read -r name mode what extra envs <<< "$spec"
  echo "$name" | grep -qE "${ONLY:-.}" || continue
  start=$(date +%s)
  # shellcheck disable=SC2086
  env $envs $py -m kbench.kernel $what --prof_type="$mode" $extra --out "$res/$name" > "$res/${name//\//_}.md" 2> "$res/${name//\//_}.err"
  echo "$name rc=$? $(( $(date +%s) - start )) s"
done 2>&1 | tee "$res/runs.txt"
$py tests/contract/check_report.py $(find "$res" -name report.md) | tail -1
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$res/device.txt"
