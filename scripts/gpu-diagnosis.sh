#!/usr/bin/env bash
# Capture the diagnosis validation set (tests/data/validation) and healthy references on a CUDA machine, clocks
# left alone: event and annotation mode for every version, ncu mode for the defective ones.
# Usage: scripts/gpu-diagnosis.sh [RESULTS_DIR [PATTERN]]   (default out/gpu-diagnosis; PATTERN: a grep -E pattern
# on "<package> <version>" selecting which runs to make, default all; MODES=event,annotation in the environment keeps
# only those modes)
set -uo pipefail
res=${1:-out/gpu-diagnosis}
only=${2:-.}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
val=tests/data/validation
runs=(
  "underfilled before:event,annotation,ncu" "underfilled after:event,annotation"
  "tile_mm cudacore:event,annotation,ncu" "tile_mm spilling:event,annotation,ncu" "tile_mm fma:event,annotation"
  "tile_mm base:event,annotation,ncu"
  "vector_add base:event,annotation" "matmul v2:event,annotation"
  "softmax three_pass:event,annotation" "softmax fused:event,annotation"
  "launches per_row:event,annotation" "launches one_launch:event,annotation"
  "transpose naive:event,annotation,ncu" "transpose tiled:event,annotation"
  "tail before:event,annotation" "tail after:event,annotation"
  "tile_mm nostage:event,annotation" "tile_mm mmasync:event,annotation" "tile_mm narrow:event,annotation"
  "tile_mm tf32:event,annotation"
  "stream few:event,annotation" "stream many:event,annotation"
  "rowloop narrow:event,annotation" "rowloop wide:event,annotation"
  "misalign offset:event,annotation" "misalign aligned:event,annotation"
  "trimm full:event,annotation" "trimm skip:event,annotation"
  "atomics per_element:event,annotation" "atomics per_cta:event,annotation"
  "fp64 double:event,annotation" "fp64 single:event,annotation"
  "syncs per_iter:event,annotation" "syncs at_end:event,annotation"
  "ilp serial:event,annotation" "ilp parallel:event,annotation"
)
for r in "${runs[@]}"; do
  spec=${r%%:*}; set -- $spec; modes=${r#*:}
  echo "$spec" | grep -Eq "$only" || continue
  for mode in ${modes//,/ }; do
    [ -z "${MODES:-}" ] || [[ ",$MODES," == *",$mode,"* ]] || continue
    start=$(date +%s%N)
    $py -m kbench.kernel "$1" "$2" --kernel-path "$val" --prof_type="$mode" --out "$res/profiles" \
      > "$res/$mode-$1-$2.md" 2> "$res/$mode-$1-$2.err"
    echo "$1 $2 $mode rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -h '^| ' "$res/$mode-$1-$2.md" | sed -n 4p)"
  done
done
