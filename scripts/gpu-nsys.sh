#!/usr/bin/env bash
# nsys mode on a CUDA machine, clocks untouched: the concurrent plan (fork_join) and a shipped single-stream plan
# (vector_add) captured by Nsight Systems, then again with nsys hidden (the PyTorch-profiler fallback), then with
# nsys present but unable to import its capture (no libdw on LD_LIBRARY_PATH: the automatic fallback), event mode
# on the concurrent plan, and the GPU tests of the timeline path.
# Usage: [HIDE_NSYS=1] [SKIP_TESTS=1] scripts/gpu-nsys.sh [RESULTS_DIR]   (default out/gpu-nsys; profiles go to
# out/profiles; SKIP_TESTS=1: no pytest)
set -uo pipefail
res=${1:-out/gpu-nsys}
mkdir -p "$res"
py=$(command -v "${PYTHON:-python3}")
export PYTHONUNBUFFERED=1
export KBENCH_LOCK_CLOCKS=0  # never lock a shared GPU's clocks: kbench only samples them
step() { echo; echo "=== $* ==="; }
profile() {  # NAME ARGS...: one profile, its wall time and last lines
  local name=$1; shift
  /usr/bin/time -f "wall %e s" "$@" > "$res/$name.md" 2> "$res/$name.err"
  echo "$name rc=$? $(grep -E '^(wall|kbench: (wrote|error|nsys))' "$res/$name.err" | tr '\n' ' ')"
}

step "device (read-only query)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
$py -c "from kbench.capture import tools; n = tools.find_nsys(); print('nsys', n, tools.version(n))"

step "nsys mode with Nsight Systems"
profile nsys_fork_join $py -m kbench.kernel fork_join --prof_type=nsys
profile nsys_vector_add $py -m kbench.kernel vector_add --prof_type=nsys

step "nsys mode with nsys hidden (PATH and CUDA_HOME without it; HIDE_NSYS=1 also renames the nsys kbench found)"
hidden=""
if [ -n "${HIDE_NSYS:-}" ]; then  # for a throw-away machine: the binary is put back on exit
  hidden=$($py -c "from kbench.capture import tools; print(tools.find_nsys())" 2>/dev/null)
  [ -n "$hidden" ] && mv "$hidden" "$hidden.hidden-by-kbench" && trap 'mv "$hidden.hidden-by-kbench" "$hidden"' EXIT
fi
for plan in fork_join vector_add; do
  profile "hidden_$plan" env -u KBENCH_NSYS -u KBENCH_NCU PATH=/usr/bin:/bin CUDA_HOME=/nonexistent \
    $py -m kbench.kernel $plan --prof_type=nsys
done
if [ -n "$hidden" ]; then mv "$hidden.hidden-by-kbench" "$hidden"; trap - EXIT; fi

step "nsys that cannot import its capture (LD_LIBRARY_PATH without libdw)"
profile broken_nsys_fork_join env LD_LIBRARY_PATH= $py -m kbench.kernel fork_join --prof_type=nsys --bench-runs=20

step "event mode on the concurrent plan, and its serial version"
profile event_fork_join_serial $py -m kbench.kernel fork_join serial --prof_type=event
profile event_fork_join $py -m kbench.kernel fork_join --prof_type=event

[ -n "${SKIP_TESTS:-}" ] && exit 0
step "GPU tests of the timeline path"
$py -m pytest -q -p no:cacheprovider -m gpu -k "nsys or concurrent or every_tuning" 2>&1 | tail -15
