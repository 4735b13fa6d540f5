#!/usr/bin/env bash
# Issue 42 on a CUDA machine, clocks untouched (KBENCH_LOCK_CLOCKS=0, ncu --clock-control none): the new before/after
# pairs of tests/data/validation in event and annotation mode (MODES overrides; ncu mode for the defective versions
# with NCU=1), real traces for the CPU tests (scripts/census-trace.py, TRACES=1), SASS with line info of the compiled
# kernels (nvdisasm -g), and what per-line collection costs ncu (COST=1). Prints one line per run: its first Top 3 item.
# Usage: scripts/gpu-issue42.sh [RESULTS_DIR [PATTERN]]   (PATTERN: grep -E on "<package> <version>")
set -uo pipefail
res=${1:-out/gpu-issue42}
only=${2:-.}
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
val=tests/data/validation
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee "$res/device.txt"
before="convert:torch_cast absmax:torch_abs hostsync:per_chunk sfu:per_term divmod:modulo ragged:per_segment scalar_atomic:per_program splitk:serial_combine"
after="convert:in_kernel absmax:fused hostsync:no_sync sfu:factored divmod:compare ragged:chunked scalar_atomic:wide splitk:parallel_combine"
profile() {  # package version mode
  local start rc
  start=$(date +%s%N)
  $py -m kbench.kernel "$1" "$2" --kernel-path "$val" --prof_type="$3" --out "$res/profiles" > "$res/$3-$1-$2.md" 2> "$res/$3-$1-$2.err"
  rc=$?
  echo "$1 $2 $3 rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms; sm $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader); $(grep -m1 '^1\. ' "$res/$3-$1-$2.md" | cut -c1-160)"
  [ $rc -eq 0 ] || tail -3 "$res/$3-$1-$2.err"
}
for mode in ${MODES:-event annotation}; do
  for spec in $before $after; do
    echo "${spec/:/ }" | grep -Eq "$only" || continue
    profile "${spec%%:*}" "${spec#*:}" "$mode"
  done
done
if [ -n "${ACCESS:-}" ]; then
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
if [ -n "${EXTRA:-}" ]; then
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
if [ -n "${NCU:-}" ]; then
  for spec in $before; do
    echo "${spec/:/ }" | grep -Eq "$only" || continue
    profile "${spec%%:*}" "${spec#*:}" ncu
  done
fi
if [ -n "${TRACES:-}" ]; then
  $py scripts/census-trace.py "$res/traces" "$val" convert:torch_cast absmax:torch_abs hostsync:per_chunk \
    splitk:serial_combine scalar_atomic:per_program matmul:torch_mm mla_decode:base 2>&1 | tail -12
  mkdir -p "$res/sass"
  find "$res/profiles/event" -name '*.cubin' | while read -r c; do
    pkg=$(echo "$c" | sed -E 's#.*/event/([^/]+)/.*#\1#')
    nvdisasm -g -c "$c" > "$res/sass/$pkg-$(basename "$c" .cubin).sass" 2>&1 || echo "nvdisasm failed on $c"
  done
  ls -la "$res/sass" | head -20
fi
if [ -n "${COST:-}" ]; then
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
