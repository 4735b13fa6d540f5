#!/usr/bin/env bash
# Clock control's read-only side on a CUDA machine; it never changes clocks, power or modes: the lock/reset
# scripts' --dry-run against the real nvidia-smi, profiles with --no-lock-clocks (the sampled SM clock range and
# clock-event reasons in each report), and two kbench processes contending for one GPU (--no-wait refused at
# once, the next one waiting its turn).
# Usage: scripts/gpu-clocks.sh [RESULTS_DIR]   (default out/gpu-clocks; profiles go to out/profiles)
set -uo pipefail
res=${1:-out/gpu-clocks}
mkdir -p "$res"
py=$(command -v "${PYTHON:-python3}")
export PYTHONUNBUFFERED=1
export KBENCH_LOCK_CLOCKS=0  # and every command below also says --no-lock-clocks
step() { echo; echo "=== $* ==="; }

step "lock/reset scripts, dry run (nvidia-smi queries only)"
bash scripts/lock-gpu-clock.sh --dry-run; echo "lock --dry-run rc=$?"
bash scripts/lock-gpu-clock.sh --gpu 0 --sm 99999 --dry-run; echo "lock --sm 99999 rc=$?"
bash scripts/reset-gpu-clock.sh --dry-run; echo "reset --dry-run rc=$?"

step "profiles with --no-lock-clocks"
for spec in vector_add:event matmul:event vector_add:annotation fork_join:nsys; do
  name=${spec/:/_}
  /usr/bin/time -f "wall %e s" $py -m kbench.kernel "${spec%%:*}" --prof_type="${spec#*:}" --no-lock-clocks \
    > "$res/$name.md" 2> "$res/$name.err"
  echo "$spec rc=$? $(grep -E '^wall' "$res/$name.err") $(grep '^- Clocks' "$res/$name.md")"
done

step "two kbench processes on one GPU"
lockfile=${KBENCH_STATE_DIR:-/tmp/kbench-state}/gpu0.lock
# emptied only when it is a plain file of this user's: a link there is never written through
if [ -f "$lockfile" ] && [ ! -L "$lockfile" ] && [ -O "$lockfile" ]; then : > "$lockfile"; fi
$py -m kbench.kernel matmul --prof_type=event --no-lock-clocks --bench-runs=40000 > "$res/holder.md" 2> "$res/holder.err" &
holder=$!
for _ in $(seq 120); do [ -s "$lockfile" ] && break; sleep 0.5; done
echo "holder pid $holder; lock file: $(cat "$lockfile" 2>/dev/null)"
$py -m kbench.kernel vector_add --prof_type=event --no-lock-clocks --no-wait > /dev/null 2> "$res/nowait.err"
echo "--no-wait rc=$? $(cat "$res/nowait.err")"
start=$(date +%s)
$py -m kbench.kernel vector_add --prof_type=event --no-lock-clocks --bench-runs=20 > /dev/null 2> "$res/waiter.err"
echo "waiting run rc=$? after $(( $(date +%s) - start )) s; $(grep -E 'busy|wrote' "$res/waiter.err" | tr '\n' ' ')"
wait $holder; echo "holder rc=$? $(grep -E 'wrote' "$res/holder.err")"
