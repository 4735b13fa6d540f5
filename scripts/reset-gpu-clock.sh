#!/usr/bin/env bash
# Reset the clocks that lock-gpu-clock.sh locked, on one or all GPUs: exactly what its state file
# ($KBENCH_STATE_DIR/gpu<N>.clocks, default /tmp/kbench-state) records (SM, and memory if it was locked), then
# remove the record. Also clears a lock that a killed kbench run left behind; a record neither root nor you wrote
# counts for nothing. Idempotent; prints every nvidia-smi command it runs. Needs root, except with --dry-run.
# NVIDIA_SMI overrides the nvidia-smi used.
# Usage: reset-gpu-clock.sh [--gpu N] [--dry-run]
set -euo pipefail
prog=$(basename "$0")
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "$prog: $1" >&2; exit "${2:-2}"; }
uint() { [[ $1 =~ ^[0-9]+$ ]]; }

smi=${NVIDIA_SMI:-nvidia-smi}
gpu=all dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --gpu) [ $# -ge 2 ] || die "--gpu needs a value (see --help)"; gpu=$2; shift 2 ;;
    --gpu=*) gpu=${1#*=}; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$gpu" = all ] || uint "$gpu" || die "--gpu takes a GPU index (0, 1, ...) or all, not '$gpu'"
command -v "$smi" >/dev/null 2>&1 || die "nvidia-smi not found (install the NVIDIA driver, or set NVIDIA_SMI)" 1
[ "$dry" = 1 ] || [ "$(id -u)" = 0 ] || die "resetting GPU clocks needs root: run it with sudo, or add --dry-run to see the commands" 1

all=$("$smi" --query-gpu=index --format=csv,noheader,nounits | tr -d ' ' | tr '\n' ' ')
if [ "$gpu" = all ]; then targets=$all; else
  [[ " $all " == *" $gpu "* ]] || die "no GPU $gpu here (GPUs: ${all% })"
  targets=$gpu
fi
. "$(dirname "${BASH_SOURCE[0]}")/state-folder.sh"
[ ! -e "$state" ] && [ ! -L "$state" ] || trusted_state
run() { echo "+ $*"; [ "$dry" = 1 ] || "$@"; }

for i in $targets; do
  file=$state/gpu$i.clocks
  if [ ! -e "$file" ] && [ ! -L "$file" ]; then
    echo "GPU $i: no lock recorded in $file; nothing to reset (nvidia-smi -i $i -rgc resets by hand)"
    continue
  fi
  why=$(doubt "$file")
  if [ -n "$why" ]; then
    echo "GPU $i: ignoring $file: it $why; nothing reset (nvidia-smi -i $i -rgc resets by hand)"
    continue
  fi
  owner=$(sed -n 's/^owner=//p' "$file"); pid=$(sed -n 's/^pid=//p' "$file")
  sm=$(sed -n 's/^sm_mhz=//p' "$file"); mem=$(sed -n 's/^mem_mhz=//p' "$file"); since=$(sed -n 's/^since=//p' "$file")
  if [ "$owner" = kbench ] && kill -0 "$pid" 2>/dev/null; then
    die "GPU $i: kbench (pid $pid) holds its clocks now and resets them when it ends" 1
  fi
  run "$smi" -i "$i" -rgc
  [ "$mem" = none ] || run "$smi" -i "$i" -rmc
  if [ "$dry" = 1 ]; then echo "GPU $i: would reset SM ($sm MHz)${mem:+, memory ($mem)} locked by $owner since $since (dry run: nothing changed)"; continue; fi
  rm -f "$file"
  echo "GPU $i: reset SM ($sm MHz) and memory ($mem) locked by $owner since $since"
done
