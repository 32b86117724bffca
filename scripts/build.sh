#!/usr/bin/env bash
# Builds a configured build folder with a short report: cmake's whole output
# goes to DIR/build.log, and the terminal gets the percentage done while it
# builds (when it is a terminal), one line when it is over, and then the
# compilers' warnings, or on failure the errors and the end of the log.
#
#   scripts/build.sh DIR JOBS [TARGET...]     (the make targets use it)
set -u -o pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/build.sh DIR JOBS [TARGET...]" >&2
  exit 2
fi
dir=$1 jobs=$2
shift 2
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
what=$dir/${1:+ ($*)}
log=$dir/build.log
start=$SECONDS
on_tty=false
[ -t 1 ] && on_tty=true

exec 3>"$log" || exit 1
cmake --build "$dir" -j "$jobs" "${targets[@]}" 2>&1 | while IFS= read -r line; do
  printf '%s\n' "$line" >&3
  if $on_tty && [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
    printf '\rbuilding %s: %3d%%' "$what" "${BASH_REMATCH[1]}"
  fi
done
rc=$?
exec 3>&-
$on_tty && printf '\r\033[K'

if [ "$rc" -ne 0 ]; then
  echo "building $what failed (exit $rc); the errors, then the end of $log:"
  grep -E "error:|Error:|undefined reference|No rule to make" "$log" | head -n 40
  echo "..."
  tail -n 15 "$log"
  exit "$rc"
fi
warnings=$(grep -c "warning:" "$log")
if [ "$warnings" -eq 0 ]; then
  echo "built $what in $((SECONDS - start)) s"
else
  echo "built $what in $((SECONDS - start)) s, with $warnings warning lines (all in $log):"
  grep "warning:" "$log" | sort -u | head -n 20
fi
