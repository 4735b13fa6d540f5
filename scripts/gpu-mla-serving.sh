#!/usr/bin/env bash
# mla_decode at issue 52's rows on a CUDA machine, clocks untouched (KBENCH_LOCK_CLOCKS=0). CHECK=1 (default): `kbench
# check mla_decode v9` at its check shapes (ragged, paged, split) in bf16 and fp16 and at CHECK_ARGS's other shapes;
# BENCH=1 (default): tests/benchmark/bench_mla_decode.py --points serving (VERSIONS=v7,v9; ONLY= row numbers) with
# the peers where installed; REPORTS=1: event-mode reports of REPORT_VERSIONS (v9) at REPORT_POINT (h=128 s=1) into
# $res/reports.tgz (REPORT_RUNS, REPORT_MODE); TIER=1: the GPU tier (TESTS= narrows it: a pytest -k expression).
# Usage: scripts/gpu-mla-serving.sh [RESULTS_DIR]   (default out/gpu-mla-serving)
res=${1:-out/gpu-mla-serving}
. "$(dirname "$0")/gpu-common.sh"
if [ "${CHECK:-1}" = 1 ]; then
  for v in ${CHECK_VERSIONS:-v9}; do
    for args in "" "--dtype=float16" ${CHECK_ARGS:-"--t_min=0 --page=0 --b=100 --t=70" "--t_min=0 --page=0 --b=3 --s=1 --h=128 --d=512 --p=64 --t=2000" "--b=5 --s=2 --h=64 --d=512 --p=64 --t=3000 --t_min=100 --page=128"}; do
      step "kbench check mla_decode $v $args"
      timeout 240 $py -m kbench check mla_decode $v $args 2>&1 | tee -a "$res/check.txt" | grep -v "^  .*PASS" | tail -4
    done
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  step "bench_mla_decode --points serving"
  timeout "${BENCH_TIMEOUT:-560}" $py -m tests.benchmark.bench_mla_decode --points serving --versions "${VERSIONS:-v7,v9}" ${ONLY:+--only "$ONLY"} \
    --bench-runs "${RUNS:-30}" --out /tmp/bench-profiles 2>&1 | tee "$res/bench.txt" | tail -60
  step "done"
fi
if [ "${REPORTS:-0}" = 1 ]; then  # REPORT_RUNS: "version params...;version params..." in REPORT_MODE (annotation)
  IFS=';' read -ra runs <<< "${REPORT_RUNS:-v7 --b=32 --s=1 --t=4096 --h=128;v9 --b=32 --s=1 --t=4096 --h=128}"
  for r in "${runs[@]}"; do
    set -- $r; v=$1; shift; tag="$v$(echo "$*" | tr -d ' -')"
    step "${REPORT_MODE:=annotation} report mla_decode $v $*"
    timeout 240 $py -m kbench.kernel mla_decode $v "$@" --prof_type=$REPORT_MODE --out /tmp/reports/$tag > "$res/report-$tag.md" 2> "$res/report-$tag.err"
    echo "rc=$?"; grep -A5 -m1 '^## Top' "$res/report-$tag.md" | cut -c1-400
  done
  (cd /tmp/reports && find . \( -name '*.ncu-rep' -o -name '*.cubin' \) -delete; tar czf "$res/reports.tgz" .)
fi
if [ "${TIER:-0}" = 1 ]; then
  step "GPU tier"
  $py -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors ${TESTS:+-k "$TESTS"} 2>&1 | tee "$res/gpu-tier.log" | tail -25
fi
