#!/usr/bin/env bash
# mla_decode's Gluon versions (v7 and after) on a CUDA machine, clocks untouched (KBENCH_LOCK_CLOCKS=0). VARIANTS=1
# (default) times v7's variants against v6's kernels with the matmul ceiling in the same run
# (scripts/mla-decode-gluon.py); CHECK=1 (default) runs `kbench check mla_decode v7` (the GPU numerics at the check's
# shapes); TIER=1 the GPU tier (TESTS= narrows it: a pytest -k expression); PAIR=1 the v7_fa3 -> v7 pair in
# annotation mode (PAIR_VERSIONS= others); EXAMPLES=1 event and ncu reports of EXAMPLE_VERSIONS (v7); BENCH=1
# tests/benchmark/bench_mla_decode.py (VERSIONS=v6,v7 by default).
# Usage: scripts/gpu-mla-decode-gluon.sh [RESULTS_DIR]   (default out/gpu-mla-decode-gluon)
res=${1:-out/gpu-mla-decode-gluon}
. "$(dirname "$0")/gpu-common.sh"
if [ "${VARIANTS:-1}" = 1 ]; then
  step "v7 variants against v6"
  timeout 300 $py scripts/mla-decode-gluon.py ${POINTS:-} 2>&1 | tee "$res/variants.txt"
fi
if [ "${CHECK:-1}" = 1 ]; then
  step "kbench check mla_decode v7"
  timeout 200 $py -m kbench check mla_decode v7 2>&1 | tee "$res/check.txt" | tail -8
fi
if [ "${TIER:-0}" = 1 ]; then
  step "GPU tier"
  $py -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors ${TESTS:+-k "$TESTS"} 2>&1 | tee "$res/gpu-tier.log" | tail -25
fi
if [ "${PAIR:-0}" = 1 ]; then  # the pipeline-starvation pair: v7_fa3 -> v7 in annotation mode (source lines)
  for v in ${PAIR_VERSIONS:-v7_fa3 v7}; do
    step "annotation mode, mla_decode $v"
    $py -m kbench.kernel mla_decode $v --b=32 --s=16 --t=4096 --prof_type=annotation --out /tmp/pair-$v > "$res/annotation-$v.md" 2> "$res/annotation-$v.err"
    echo "rc=$?"; grep -m3 '^[123]\. ' "$res/annotation-$v.md" | cut -c1-300
    run=$(ls -d /tmp/pair-$v/annotation/mla_decode/*/*/ | tail -1); dst="$res/pair/mla_decode-$v/annotation"; mkdir -p "$dst/compiled/attention"
    cp "$run"/{params.json,result.json,report.md} "$dst/"; cp -r "$run/tiling" "$dst/"; cp "$run"/compiled/attention/*.{ptx,ttgir} "$dst/compiled/attention/" 2>/dev/null
    [ -d "$run/source" ] && cp -r "$run/source" "$dst/"
    $py -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.compress(open(sys.argv[1],'rb').read()))" "$run/profile.ncu-rep" "$dst/profile.ncu-rep.xz"
  done
  (cd "$res" && tar czf pair.tgz pair && rm -rf pair)  # one file back: the folders are deeper than a copy returns
fi
if [ "${BENCH:-0}" = 1 ]; then
  step "bench_mla_decode"
  $py -m tests.benchmark.bench_mla_decode --versions "${VERSIONS:-v6,v7}" --out "$res/profiles" 2>&1 | tee "$res/bench.txt" | tail -40
fi
if [ "${EXAMPLES:-0}" = 1 ]; then  # reports at the compute-bound point, one tarball each (docs/examples/issue44-h100)
  for v in ${EXAMPLE_VERSIONS:-v7}; do
    for mode in event ncu; do
      step "$mode mode, mla_decode $v"
      $py -m kbench.kernel mla_decode $v --b=32 --s=16 --t=4096 --prof_type=$mode --out /tmp/ex-$v-$mode > /dev/null 2> "$res/$mode-$v.err"
      echo "rc=$?"; run=$(ls -d /tmp/ex-$v-$mode/$mode/mla_decode/*/*/ | tail -1)
      (cd "$run" && tar czf "$res/$mode-mla_decode-$v.tgz" report.md report.json $(ls kernels.json source/attention.md compiled/attention/*.ttgir compiled/attention/*.ptx 2>/dev/null))
      grep -m3 '^[123]\. ' "$run/report.md" | cut -c1-250
    done
  done
fi
step "done"
