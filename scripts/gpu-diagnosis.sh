#!/usr/bin/env bash
# Capture the diagnosis validation set (tests/data/validation: each defective version beside its fixed twin) on a
# CUDA machine, clocks left alone (KBENCH_LOCK_CLOCKS=0; ncu --clock-control none): event and annotation mode for
# every version, ncu mode for the defective ones; one line per run (exit, wall time, SM clock, the Stages table's
# first row, Top 3's first item). Optional steps: ACCESS=1 access mode then event and annotation mode under the same
# --out for ragged (a folder .acc of access runs made elsewhere is used as it is); EXTRA=1 the other GPU modes on a
# stage of two kernels and an undeclared conversion, and what per-line collection costs annotation mode; TRACES=1
# real traces for the CPU tests (scripts/census-trace.py) and SASS with line info of the compiled kernels (nvdisasm
# -g); COST=1 what per-line collection costs ncu.
# Usage: scripts/gpu-diagnosis.sh [RESULTS_DIR [PATTERN]]   (default out/gpu-diagnosis; PATTERN: a grep -E pattern
# on "<package> <version>" selecting which runs to make, default all; MODES=event,annotation in the environment keeps
# only those modes)
res=${1:-out/gpu-diagnosis}
only=${2:-.}
. "$(dirname "$0")/gpu-common.sh"
val=tests/data/validation
profile() {  # package version mode
  local start rc
  start=$(date +%s%N)
  $py -m kbench.kernel "$1" "$2" --kernel-path "$val" --prof_type="$3" --out "$res/profiles" > "$res/$3-$1-$2.md" 2> "$res/$3-$1-$2.err"
  rc=$?
  echo "$1 $2 $3 rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms; sm $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader); $(grep -h '^| ' "$res/$3-$1-$2.md" | sed -n 4p | cut -c1-120); $(grep -m1 '^1\. ' "$res/$3-$1-$2.md" | cut -c1-160)"
  [ $rc -eq 0 ] || tail -3 "$res/$3-$1-$2.err"
}
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
  "convert torch_cast:event,annotation,ncu" "convert in_kernel:event,annotation"
  "absmax torch_abs:event,annotation,ncu" "absmax fused:event,annotation"
  "hostsync per_chunk:event,annotation,ncu" "hostsync no_sync:event,annotation"
  "sfu per_term:event,annotation,ncu" "sfu factored:event,annotation"
  "divmod modulo:event,annotation,ncu" "divmod compare:event,annotation"
  "ragged per_segment:event,annotation,ncu" "ragged chunked:event,annotation"
  "scalar_atomic per_program:event,annotation,ncu" "scalar_atomic wide:event,annotation"
  "splitk serial_combine:event,annotation,ncu" "splitk parallel_combine:event,annotation"
)
for r in "${runs[@]}"; do
  spec=${r%%:*}; set -- $spec; modes=${r#*:}
  echo "$spec" | grep -Eq "$only" || continue
  for mode in ${modes//,/ }; do
    [ -z "${MODES:-}" ] || [[ ",$MODES," == *",$mode,"* ]] || continue
    profile "$1" "$2" "$mode"
  done
done
if [ "${ACCESS:-0}" = 1 ]; then
  # uneven programs predicted on CPU: an access run, then event and annotation mode under the same --out. A folder
  # .acc of access runs made elsewhere is used as it is (Triton 3.6's interpreter cannot run ragged's loop bounds
  # loaded from memory; 3.9's can)
  if [ -d .acc ]; then cp -r .acc "$res/access"; fi
  for v in per_segment chunked; do
    [ -d .acc ] || $py -m kbench.kernel ragged $v --kernel-path "$val" --prof_type=access --out "$res/access" > "$res/access-ragged-$v.md" 2>&1
    for mode in event annotation; do
      $py -m kbench.kernel ragged $v --kernel-path "$val" --prof_type=$mode --out "$res/access" > "$res/$mode-ragged-$v-access.md" 2>&1
      echo "ragged $v $mode after an access run rc=$?; $(grep -m1 '^1\. ' "$res/$mode-ragged-$v-access.md" | cut -c1-160)"
    done
  done
fi
if [ "${EXTRA:-0}" = 1 ]; then
  # the other GPU modes on a stage of two kernels and on an undeclared conversion; what per-line collection costs
  # annotation mode (KBENCH_ANNOTATION_LINES=0 leaves it out); a shipped plan of two kernels (mla_decode v3, s=1)
  profile splitk serial_combine nsys
  profile convert torch_cast nsys
  KBENCH_ANNOTATION_LINES=0 profile divmod modulo annotation
  mv "$res/annotation-divmod-modulo.md" "$res/annotation-divmod-modulo-nolines.md"
  profile divmod modulo annotation
  for mode in event annotation; do
    start=$(date +%s%N)
    $py -m kbench.kernel mla_decode v3 --s=1 --prof_type=$mode --out "$res/profiles" > "$res/$mode-mla_decode-v3.md" 2>&1
    echo "mla_decode v3 s=1 $mode rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -m1 '^1\. ' "$res/$mode-mla_decode-v3.md" | cut -c1-160)"
  done
fi
if [ "${TRACES:-0}" = 1 ]; then
  $py scripts/census-trace.py "$res/traces" "$val" convert:torch_cast absmax:torch_abs hostsync:per_chunk \
    splitk:serial_combine scalar_atomic:per_program matmul:torch_mm mla_decode:base 2>&1 | tail -12
  mkdir -p "$res/sass"
  find "$res/profiles/event" -name '*.cubin' | while read -r c; do
    pkg=$(echo "$c" | sed -E 's#.*/event/([^/]+)/.*#\1#')
    nvdisasm -g -c "$c" > "$res/sass/$pkg-$(basename "$c" .cubin).sass" 2>&1 || echo "nvdisasm failed on $c"
  done
  ls -la "$res/sass" | head -20
fi
if [ "${COST:-0}" = 1 ]; then
  # per-line collection in ncu: what the SourceCounters section adds to a metric run, passes and seconds
  for sec in "" "--section SourceCounters" "--section WarpStateStats --section SourceCounters"; do
    start=$(date +%s%N)
    ncu --clock-control none --target-processes all $sec --metrics smsp__inst_executed.sum -k regex:window_kernel -c 1 \
      -o "$res/cost-$(echo "$sec" | tr -dc 'A-Za-z')" -f $py scripts/census-trace.py /tmp/cost "$val" divmod:modulo \
      > "$res/cost.log" 2>&1
    echo "ncu $sec: $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -o '[0-9]* passes' "$res/cost.log" | head -1)"
  done
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$res/device.txt"
