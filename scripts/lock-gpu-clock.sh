#!/usr/bin/env bash
# Lock the SM clock (and, where the GPU supports it, the memory clock) of one or all GPUs: by default to the base
# clock (the default applications clock) and the highest memory clock, or to the MHz you give. What is locked is
# recorded in $KBENCH_STATE_DIR/gpu<N>.clocks (default /tmp/kbench-state), so reset-gpu-clock.sh undoes exactly that;
# kbench reads the same file and leaves such clocks alone (a record neither root nor you wrote counts for nothing).
# Idempotent; prints every nvidia-smi command it runs. Needs root, except with --dry-run. NVIDIA_SMI overrides the
# nvidia-smi used.
# Usage: lock-gpu-clock.sh [--gpu N] [--sm MHZ] [--mem MHZ | --no-mem] [--dry-run]
set -euo pipefail
prog=$(basename "$0")
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "$prog: $1" >&2; exit "${2:-2}"; }
uint() { [[ $1 =~ ^[0-9]+$ ]]; }

smi=${NVIDIA_SMI:-nvidia-smi}
args="$*"
gpu=all sm="" mem=max dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --gpu|--sm|--mem) [ $# -ge 2 ] || die "$1 needs a value (see --help)"; declare "${1#--}=$2"; shift 2 ;;
    --gpu=*|--sm=*|--mem=*) k=${1%%=*}; declare "${k#--}=${1#*=}"; shift ;;
    --no-mem) mem=none; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$gpu" = all ] || uint "$gpu" || die "--gpu takes a GPU index (0, 1, ...) or all, not '$gpu'"
[ -z "$sm" ] || uint "$sm" || die "--sm takes a clock in MHz (digits only), not '$sm'"
[ "$mem" = max ] || [ "$mem" = none ] || uint "$mem" || die "--mem takes a clock in MHz (digits only), not '$mem'"
command -v "$smi" >/dev/null 2>&1 || die "nvidia-smi not found (install the NVIDIA driver, or set NVIDIA_SMI)" 1
[ "$dry" = 1 ] || [ "$(id -u)" = 0 ] || die "locking GPU clocks needs root: run it with sudo, or add --dry-run to see the commands" 1

q() { "$smi" "$@" --format=csv,noheader,nounits | tr -d ' '; }
all=$(q --query-gpu=index | tr '\n' ' ')
if [ "$gpu" = all ]; then targets=$all; else
  [[ " $all " == *" $gpu "* ]] || die "no GPU $gpu here (GPUs: ${all% })"
  targets=$gpu
fi
. "$(dirname "${BASH_SOURCE[0]}")/state-folder.sh"
if [ "$dry" = 0 ]; then
  # the record is what lets reset-gpu-clock.sh (and kbench) undo the lock: no usable folder, no lock
  # plain mkdir, never -p on the folder itself: a link planted after the look fails it and is never chmodded
  if [ ! -e "$state" ] && [ ! -L "$state" ] && mkdir -p "$(dirname "$state")" 2>/dev/null &&
    mkdir -m 700 "$state" 2>/dev/null; then chmod 1777 "$state"; fi
  trusted_state
  [ -w "$state" ] ||
    die "cannot write the state folder $state (KBENCH_STATE_DIR), so the lock could not be recorded; nothing was locked" 1
fi
run() { echo "+ $*"; [ "$dry" = 1 ] || "$@"; }

for i in $targets; do
  supported=$(q -i "$i" --query-supported-clocks=graphics | sort -n); lo=${supported%%$'\n'*} hi=${supported##*$'\n'}
  want=${sm:-$(q -i "$i" --query-gpu=clocks.default_applications.graphics)}
  uint "$want" || die "GPU $i: the driver reports no base clock; give one with --sm MHZ"
  [ "$want" -ge "$lo" ] && [ "$want" -le "$hi" ] || die "GPU $i: --sm $want is outside its supported $lo-$hi MHz"
  want_mem=none
  if [ "$mem" != none ]; then
    supported=$(q -i "$i" --query-supported-clocks=memory | sort -n); mlo=${supported%%$'\n'*} mhi=${supported##*$'\n'}
    want_mem=$([ "$mem" = max ] && echo "$mhi" || echo "$mem")
    [ "$want_mem" -ge "$mlo" ] && [ "$want_mem" -le "$mhi" ] || die "GPU $i: --mem $want_mem is outside its supported $mlo-$mhi MHz"
  fi
  file=$state/gpu$i.clocks
  why=$( [ ! -e "$file" ] && [ ! -L "$file" ] || doubt "$file")
  [ -z "$why" ] || echo "GPU $i: ignoring $file: it $why"
  if [ -f "$file" ] && [ -z "$why" ]; then
    owner=$(sed -n 's/^owner=//p' "$file"); pid=$(sed -n 's/^pid=//p' "$file")
    if [ "$owner" = kbench ] && kill -0 "$pid" 2>/dev/null; then
      die "GPU $i: kbench (pid $pid) holds its clocks now and resets them when it ends; lock after that" 1
    fi
    if [ "$owner" = script ] && [ "$(sed -n 's/^sm_mhz=//p' "$file")" = "$want" ] && [ "$(sed -n 's/^mem_mhz=//p' "$file")" = "$want_mem" ]; then
      echo "GPU $i: already locked at SM $want MHz, memory $want_mem (since $(sed -n 's/^since=//p' "$file")); nothing to do"
      continue
    fi
  fi
  run "$smi" -i "$i" -lgc "$want,$want"
  locked_mem=none
  if [ "$want_mem" != none ]; then
    if run "$smi" -i "$i" -lmc "$want_mem,$want_mem"; then locked_mem=$want_mem
    else echo "GPU $i: this GPU does not lock its memory clock; the SM clock is locked alone"; fi
  fi
  if [ "$dry" = 1 ]; then echo "GPU $i: would lock SM at $want MHz, memory $locked_mem (dry run: nothing changed)"; continue; fi
  # a fresh temp file (mktemp: never one planted under a guessable name), renamed over the record
  tmp=
  if ! { tmp=$(mktemp "$state/.gpu$i.clocks.XXXXXX") &&
        printf 'owner=script\npid=%s\nsm_mhz=%s\nmem_mhz=%s\nsince=%s\ncommand=%s\n' \
          "$$" "$want" "$locked_mem" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$prog $args" > "$tmp" &&
        chmod 644 "$tmp" && mv -fT "$tmp" "$file"; } 2>/dev/null; then
    [ -z "$tmp" ] || rm -f "$tmp"
    run "$smi" -i "$i" -rgc || true
    [ "$locked_mem" = none ] || run "$smi" -i "$i" -rmc || true
    die "GPU $i: could not record the lock in $file, so it was reset again" 1
  fi
  echo "GPU $i: locked SM at $want MHz, memory $locked_mem; recorded in $file (scripts/reset-gpu-clock.sh undoes it)"
done
