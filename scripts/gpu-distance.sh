#!/usr/bin/env bash
# Capture issue 51's design-distance pairs (tests/data/validation: scores, epilogue, splitk_gemm, splitkv, fdiv,
# twopass, persist, gather; each before and after) and mla_decode v6 -> v7 (the fused Triton kernel whose warpgroups
# repeat a product, against the Gluon rewrite) on a CUDA machine, clocks untouched (KBENCH_LOCK_CLOCKS=0; ncu
# --clock-control none): MODES (default event,annotation) for each; event mode samples counters where cupti-python
# imports. One line per run (exit, wall time, SM clock, Top 1). PATTERN (a grep -E pattern on "<package> <version>")
# picks runs; MLA=0 leaves mla_decode out.
# Usage: [MODES=event,annotation] [MLA=1] scripts/gpu-distance.sh [RESULTS_DIR [PATTERN]]   (default out/gpu-distance)
res=${1:-out/gpu-distance}
only=${2:-.}
. "$(dirname "$0")/gpu-common.sh"
MODES=${MODES:-event,annotation}
profile() {  # package version mode [kbench arguments...]
  local pkg=$1 ver=$2 mode=$3 start rc name
  shift 3
  name="$mode-$pkg-$ver"
  start=$(date +%s%N)
  $py -m kbench.kernel "$pkg" "$ver" --prof_type="$mode" --out "$res/profiles" "$@" > "$res/$name.md" 2> "$res/$name.err"
  rc=$?
  echo "$pkg $ver $mode rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms; sm $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader); $(grep -m1 '^1\. ' "$res/$name.md" | cut -c1-150)"
  [ $rc -eq 0 ] || tail -3 "$res/$name.err"
}
pairs=(scores epilogue splitk_gemm splitkv fdiv twopass persist gather)
for m in ${MODES//,/ }; do
    for pkg in "${pairs[@]}"; do
      for ver in before after; do
        echo "$pkg $ver" | grep -Eq "$only" || continue
        profile "$pkg" "$ver" "$m" --kernel-path tests/data/validation
      done
    done
    if [ "${MLA:-1}" = 1 ]; then
      for ver in v6 v7; do
        echo "mla_decode $ver" | grep -Eq "$only" || continue
        profile mla_decode "$ver" "$m" --b=32 --s=16 --t=4096 --h=16
      done
    fi
done
