#!/usr/bin/env bash
# Issue 34's proof on a CUDA machine, clocks left alone (KBENCH_LOCK_CLOCKS=0; ncu --clock-control none): for each
# before/after pair, access mode (Triton's CPU interpreter, this machine's Triton), then event mode (which reads the
# access run's predictions) and annotation mode, then ncu's own counts of the same kernel's global loads and stores:
# sectors, bytes used per sector, warp- and thread-level instruction counts (the lanes that ran each load and store).
# Usage: scripts/gpu-access.sh [RESULTS_DIR] (default out/access-h100); ONLY=<grep -E pattern> picks pairs by
# "<package>|<version>".
set -uo pipefail
res=${1:-out/access-h100}
mkdir -p "$res/ncu"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0 KBENCH_RESIDENT=0
val=tests/data/validation
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee "$res/device.txt"
ncu=${KBENCH_NCU:-$(command -v ncu)}
lanes=smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_st.sum
lanes+=,smsp__sass_thread_inst_executed_op_global_ld.sum,smsp__sass_thread_inst_executed_op_global_st.sum
lanes+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
lanes+=,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
lanes+=,smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio
lanes+=,smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio
lanes+=,smsp__thread_inst_executed_pred_on.sum,smsp__thread_inst_executed.sum,smsp__inst_executed.sum
lanes+=,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum
pred=smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum,smsp__sass_thread_inst_executed_op_global_st_pred_on.sum
# package|version|kernel name (ncu -k)|parameters
pairs=(
  "transpose|naive|column_copy_kernel|"
  "transpose|tiled|tile_transpose_kernel|"
  "masked|before|row_map_kernel|"
  "masked|after|row_map_kernel|"
  "halfrow|before|half_sum_kernel|"
  "halfrow|after|half_sum_kernel|"
)
for p in "${pairs[@]}"; do
  [ -n "${ONLY:-}" ] && ! grep -qE "$ONLY" <<<"$p" && continue
  IFS='|' read -r pkg ver kern params <<<"$p"
  for mode in access event annotation; do
    echo "== $pkg $ver $mode"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e s wall" $py -m kbench.kernel "$pkg" "$ver" $params --kernel-path "$val" --prof_type=$mode \
      --out "$res/runs" 2>&1 | grep -E "^(1\.|2\.|3\.|   change|\| $pkg|\| transpose|\| row_map|Bottleneck|kbench: (wrote|error))|s wall" | head -14
  done
  # the annotation run's child spec, pointed at a folder of its own (the run folder stays as it was)
  made=$(ls -d "$res"/runs/annotation/"$pkg"/*/*/ | sort | tail -1)child-spec.json
  mkdir -p "$res/ncu/$pkg-$ver-run"
  spec="$res/ncu/$pkg-$ver-run/child-spec.json"
  $py -c "import json,sys; s=json.load(open(sys.argv[1])); s.update(run_dir=sys.argv[2], audit=False); json.dump(s, open(sys.argv[3], 'w'))" \
    "$made" "$res/ncu/$pkg-$ver-run" "$spec"
  for m in "$lanes" "$pred"; do
    name=$([ "$m" = "$pred" ] && echo pred || echo lanes)
    "$ncu" --clock-control none --metrics "$m" -k "regex:$kern" -c 1 -f -o "$res/ncu/$pkg-$ver-$name" \
      $py -m kbench.capture.child "$spec" >"$res/ncu/$pkg-$ver-$name.log" 2>&1 || echo "ncu $name failed: $(grep -m1 ERROR "$res/ncu/$pkg-$ver-$name.log")"
  done
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$res/device.txt"
