# Sourced by lock-gpu-clock.sh and reset-gpu-clock.sh: the state folder they share with kbench ($KBENCH_STATE_DIR,
# default /tmp/kbench-state) and the checks kbench makes of it (kbench.fsutil.doubt): the folder and a record in it
# count only when no one but root or you can have written or swapped them.
state=${KBENCH_STATE_DIR:-/tmp/kbench-state}

# Why $1 cannot be trusted (nothing printed when it can); with $2 = folder, $1 is the folder itself, which others may
# write when it has the sticky bit, as /tmp does.
doubt() {
  local kind=${2:-file} uid mode links
  if [ -L "$1" ]; then echo "is a symbolic link"; return; fi
  if [ "$kind" = folder ] && [ ! -d "$1" ]; then echo "is not a folder"; return; fi
  if [ "$kind" = file ] && [ ! -f "$1" ]; then echo "is not a plain file"; return; fi
  read -r uid mode links < <(stat -c '%u %a %h' "$1")
  if [ "$uid" != 0 ] && [ "$uid" != "$(id -u)" ]; then echo "belongs to uid $uid, neither you nor root"; return; fi
  if (( 8#$mode & 8#022 )) && ! { [ "$kind" = folder ] && (( 8#$mode & 8#1000 )); }; then
    echo "is writable by others (mode $mode)"; return
  fi
  if [ "$kind" = file ] && [ "$links" != 1 ]; then echo "has other names (hard links)"; fi
}

# Stop (exit 1) unless the state folder can be trusted.
trusted_state() {
  local why
  why=$(doubt "$state" folder)
  [ -z "$why" ] || die "the state folder $state $why, so the clock records in it cannot be trusted: remove it or set KBENCH_STATE_DIR to a folder of your own" 1
}
