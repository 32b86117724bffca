#!/usr/bin/env bash
# Tests of the ccorun launcher, with small bash snippets as rank programs.
# Run by ctest with CCO_BIN=<build>/bin and CCO_SRC=<repo root>. Prints one
# line per check and ends with "N passed, N failed".
set -u

CCORUN="${CCO_BIN:?set CCO_BIN to the build bin directory}/ccorun"
if [ ! -x "$CCORUN" ]; then
  echo "FAIL - no launcher at $CCORUN"
  echo "0 passed, 1 failed"
  exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/test_ccorun.XXXXXX") || exit 1
# On the command line of every rank process started here (as bash's $0 or
# as sleep's argv[0]), so pgrep finds leftovers of this run and no other.
MARK="ccorun-test-$$-$RANDOM$RANDOM"

cleanup() {
  local pids
  pids=$(pgrep -f -- "$MARK")
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0
FAILED=0
pass() { echo "ok   - $1"; PASSED=$((PASSED + 1)); }
fail() {
  echo "FAIL - $1"
  [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/       /'
  FAILED=$((FAILED + 1))
}
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds; on failure the
# last ccorun run's status and output are shown.
check() {
  local what=$1
  shift
  if "$@"; then
    pass "$what"
  else
    fail "$what" "rc=$RC secs=$(secs); stdout: $(head -c 600 "$T/out"); stderr: $(head -c 600 "$T/err")"
  fi
}

now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v us="$ELAPSED_US" 'BEGIN { printf "%.2f", us / 1e6 }'; }
# elapsed_below SEC: the last run took less than SEC seconds.
elapsed_below() { [ "$ELAPSED_US" -lt $(($1 * 1000000)) ]; }

# run ARGS...: runs ccorun (killed after 20 s should it hang); sets RC and
# ELAPSED_US, output in $T/out and $T/err.
run() {
  local t0
  t0=$(now_us)
  timeout -s KILL 20 "$CCORUN" "$@" >"$T/out" 2>"$T/err" </dev/null
  RC=$?
  ELAPSED_US=$(($(now_us) - t0))
}
RC=0
ELAPSED_US=0

# gone MARKER: no process has MARKER on its command line. Allows half a
# second for processes that were sent SIGKILL to finish dying.
gone() {
  local i
  for i in 1 2 3 4 5; do
    pgrep -f -- "$1" >/dev/null || return 0
    sleep 0.1
  done
  pgrep -af -- "$1" | sed 's/^/       left: /'
  return 1
}
err_is() { [ "$(cat "$T/err")" = "$1" ]; }
err_has() { grep -qF -- "$1" "$T/err"; }
out_is() { [ "$(cat "$T/out")" = "$1" ]; }
is_id() { [[ $1 =~ ^[0-9a-f]{256}$ ]]; }

# A rank program that records its environment in $1/env.<rank>.
RECORD_ENV='echo "$CCO_RANK $CCO_NRANKS $CCO_LOCAL_RANK $CCO_LOCAL_SIZE $CCO_UNIQUE_ID" > "$1/env.$CCO_RANK"'
field() { cut -d' ' -f"$2" "$T/env.$1"; }

echo "# environment of each rank"
run -n 3 bash -c "$RECORD_ENV" x "$T"
check "3 ranks exit 0 -> ccorun exits 0" [ "$RC" = 0 ]
check "success prints nothing" [ ! -s "$T/err" ]
env_ok() {
  local r id
  id=$(field 0 5)
  is_id "$id" || return 1
  for r in 0 1 2; do
    [ "$(cut -d' ' -f1-4 "$T/env.$r")" = "$r 3 $r 3" ] || return 1
    [ "$(field $r 5)" = "$id" ] || return 1
  done
}
check "CCO_RANK/NRANKS/LOCAL_RANK/LOCAL_SIZE right, CCO_UNIQUE_ID 256 hex and the same" env_ok
FIRST_ID=$(field 0 5)
rm -f "$T"/env.*
run -n 1 bash -c "$RECORD_ENV" x "$T"
check "each job mints a fresh id" [ "$RC" = 0 -a "$(field 0 5)" != "$FIRST_ID" ]

echo "# --nranks, --rank-offset, --id"
rm -f "$T"/env.*
run -n 2 --nranks 5 --rank-offset 3 --id "$FIRST_ID" bash -c "$RECORD_ENV" x "$T"
offset_ok() {
  [ "$RC" = 0 ] && [ ! -e "$T/env.0" ] &&
    [ "$(cat "$T/env.3")" = "3 5 0 2 $FIRST_ID" ] && [ "$(cat "$T/env.4")" = "4 5 1 2 $FIRST_ID" ]
}
check "ranks 3,4 of 5 with local ranks 0,1 and the given id" offset_ok
run -n 1 --id "${FIRST_ID^^}" bash -c 'echo "$CCO_UNIQUE_ID"'
check "--id is handed out in canonical (lowercase) form" out_is "$FIRST_ID"
run -n 1 --id "${FIRST_ID:1}" true
check "--id with a bad id is refused (exit 1)" [ "$RC" = 1 ]
check "... saying why" err_has "--id does not hold a valid unique id"

echo "# -x"
run -n 2 -x FOO=bar -x EMPTY= -x CCO_RANK=99 bash -c 'echo "$CCO_RANK ${FOO-unset} ${EMPTY-unset}|"'
check "-x sets variables; CCO_RANK cannot be overridden" \
  [ "$RC" = 0 -a "$(sort "$T/out" | tr '\n' ';')" = "0 bar |;1 bar |;" ]

echo "# output"
run -n 2 bash -c 'echo "hello $CCO_RANK"'
check "without -p, output is passed through as is" [ "$(sort "$T/out" | tr '\n' ';')" = "hello 0;hello 1;" ]
# Each stdout line is written in two pieces, so that unprefixed lines of
# different ranks could interleave mid-line.
PRINT_LINES='x=$(printf "%0200d" 0)
for i in $(seq 300); do printf "r=%s i=%s " "$CCO_RANK" "$i"; printf "%s\n" "$x"; done
for i in $(seq 50); do echo "e r=$CCO_RANK i=$i" >&2; done
printf "tail %s" "$CCO_RANK"'
run -n 4 -p bash -c "$PRINT_LINES"
check "-p: ccorun exits 0" [ "$RC" = 0 ]
check "-p: all 4 x 301 stdout lines arrive" [ "$(wc -l <"$T/out")" = 1204 ]
check "-p: every stdout line is whole and carries its rank's prefix" \
  [ "$(grep -Ecv '^\[([0-3])\] (r=\1 i=[0-9]+ 0{200}|tail \1)$' "$T/out")" = 0 ]
check "-p: a final partial line is printed with a newline" [ "$(grep -c '^\[[0-3]\] tail [0-3]$' "$T/out")" = 4 ]
check "-p: stderr lines go to stderr, prefixed" \
  [ "$(wc -l <"$T/err")" = 200 -a "$(grep -Ecv '^\[([0-3])\] e r=\1 i=[0-9]+$' "$T/err")" = 0 ]
check "-p: lines of one rank keep their order" \
  [ "$(grep '^\[2\] r=' "$T/out" | sed 's/.* i=\([0-9]*\) .*/\1/' | tr '\n' ' ')" = "$(seq 300 | tr '\n' ' ')" ]

echo "# a failing rank"
run -n 4 bash -c '[ "$CCO_RANK" = 2 ] && { sleep 0.2; exit 7; }; exec -a "$0" sleep 100' "$MARK-exit"
check "exit 7 of one rank -> ccorun exits 1" [ "$RC" = 1 ]
check "... promptly (< 5 s) although the others sleep 100" elapsed_below 5
check "... with one line naming rank and status" \
  err_is "ccorun: rank 2 exited with status 7; stopped 3 other ranks"
check "... and no rank process left" gone "$MARK-exit"

run -n 3 bash -c '[ "$CCO_RANK" = 1 ] && { sleep 0.2; kill -KILL $$; }; exec -a "$0" sleep 100' "$MARK-kill"
check "a rank killed by SIGKILL -> ccorun exits 1 promptly" [ "$RC" = 1 ] && elapsed_below 5
check "... with one line naming rank and signal" \
  err_is "ccorun: rank 1 was killed by signal 9 (Killed); stopped 2 other ranks"
check "... and no rank process left" gone "$MARK-kill"

# Rank 0 starts a grandchild and waits for it; stopping rank 0 must stop it.
run -n 2 bash -c 'if [ "$CCO_RANK" = 0 ]; then (exec -a "$0-grandchild" sleep 100) & wait; fi
for i in $(seq 50); do pgrep -f -- "$0-grandchild" > "$1/grandchild.pid" && break; sleep 0.1; done
exit 3' "$MARK-gc" "$T"
check "a rank's grandchild was running while the job ran" [ -s "$T/grandchild.pid" ]
check "failing rank 1 -> exit 1, rank 0 stopped" err_is "ccorun: rank 1 exited with status 3; stopped 1 other rank"
check "... and the grandchild is gone too" gone "$MARK-gc"

echo "# exec failure"
run -n 2 "$T/no-such-program" arg
check "a program that cannot be run -> ccorun exits 1" [ "$RC" = 1 ]
check "... the child says why" err_has "ccorun: cannot run '$T/no-such-program': No such file or directory"
check "... and exits 127, which fails the job" \
  grep -Eq '^ccorun: rank [01] exited with status 127; stopped [01] other ranks?$' "$T/err"

echo "# time limit"
run -n 3 -t 0.5 bash -c 'exec -a "$0" sleep 100' "$MARK-limit"
check "--timeout 0.5 -> exit 124" [ "$RC" = 124 ]
check "... after about 0.5 s" [ "$ELAPSED_US" -ge 450000 ] && elapsed_below 3
check "... with its line" err_is "ccorun: time limit of 0.5 s passed; stopped 3 ranks"
check "... and no rank process left" gone "$MARK-limit"
# SIGTERM is ignored by the rank and its child: SIGKILL after --grace.
run -n 1 -t 1 --grace 0.5 bash -c 'trap "" TERM; (exec -a "$0-stubborn" sleep 100) & wait' "$MARK-grace"
check "ranks ignoring SIGTERM are killed after --grace (1 + 0.5 s)" \
  [ "$RC" = 124 -a "$ELAPSED_US" -ge 1450000 ] && elapsed_below 5
check "... grandchild included" gone "$MARK-grace"

echo "# signals to ccorun"
"$CCORUN" -n 2 bash -c 'exec -a "$0" sleep 100' "$MARK-sig" >"$T/out" 2>"$T/err" </dev/null &
PID=$!
for i in $(seq 50); do # until both ranks run
  [ "$(pgrep -cf -- "^$MARK-sig")" = 2 ] && break
  sleep 0.1
done
kill -TERM "$PID"
wait "$PID"
RC=$?
check "SIGTERM to ccorun -> exit 143" [ "$RC" = 143 ]
check "... with a one-line reason" err_is "ccorun: received SIGTERM; stopped 2 ranks"
check "... and the ranks are stopped" gone "$MARK-sig"

echo "# process hygiene"
# A rank must hold the same fds as the program started directly (ls lists
# its own fds: 0-2 and the one it reads /proc/self/fd through).
WANT_FDS=$(ls /proc/self/fd </dev/null 2>/dev/null | sort -n | tr '\n' ' ')
run -n 2 -p ls /proc/self/fd
fds_of() { grep "^\[$1\] " "$T/out" | sed 's/^\[[0-9]*\] //' | sort -n | tr '\n' ' '; }
check "no fds leak into the ranks (-p)" [ "$(fds_of 0)" = "$WANT_FDS" -a "$(fds_of 1)" = "$WANT_FDS" ]
run -n 1 ls /proc/self/fd
check "no fds leak into the ranks (without -p)" [ "$(sort -n "$T/out" | tr '\n' ' ')" = "$WANT_FDS" ]
run -n 1 --id-file "$T/fds.id" ls /proc/self/fd
check "no fds leak into the ranks of an id file's writer (its probe socket)" \
  [ "$(sort -n "$T/out" | tr '\n' ' ')" = "$WANT_FDS" ]
# Rank 0 exits at once; rank 1 then looks for zombies among ccorun's children.
run -n 2 bash -c '[ "$CCO_RANK" = 0 ] && exit 0; sleep 0.5; ps -o stat= --ppid "$PPID" | grep -c "^Z"'
check "an exited rank is reaped while the others run (no zombie)" out_is 0

echo "# --id-file hand-off between two launchers"
IDF="$T/job.id"
# Each rank records its environment, rank 0 also the id file as the ranks
# see it, and every rank stays until all four have recorded: the writer
# must outlive the reader's look at its file, as it does in a real job.
HANDOFF_RANK='echo "$CCO_RANK $CCO_NRANKS $CCO_LOCAL_RANK $CCO_LOCAL_SIZE $CCO_UNIQUE_ID" > "$1/env.$CCO_RANK"
[ "$CCO_RANK" = 0 ] && { stat -c %a "$2" > "$1/idf.mode"; head -n 1 "$2" > "$1/idf.id"; ls "$1" > "$1/idf.ls"; }
for i in $(seq 100); do [ -e "$1/env.0" -a -e "$1/env.1" -a -e "$1/env.2" -a -e "$1/env.3" ] && exit 0; sleep 0.1; done
exit 9'
# handoff DELAY: launcher B (ranks 2, 3) starts first, A (ranks 0, 1, the
# writer) DELAY seconds later. Sets RC_A and RC_B.
handoff() {
  rm -f "$T"/env.* "$T"/idf.*
  "$CCORUN" -n 2 --nranks 4 --rank-offset 2 --id-file "$IDF" -t 20 bash -c "$HANDOFF_RANK" x "$T" "$IDF" \
    >"$T/b.out" 2>&1 </dev/null &
  local pid_b=$!
  sleep "$1"
  "$CCORUN" -n 2 --nranks 4 --id-file "$IDF" -t 20 bash -c "$HANDOFF_RANK" x "$T" "$IDF" \
    >"$T/a.out" 2>&1 </dev/null &
  local pid_a=$!
  wait "$pid_a"
  RC_A=$?
  wait "$pid_b"
  RC_B=$?
}
handoff_ok() {
  local r id
  id=$(cat "$T/idf.id") || return 1
  is_id "$id" || return 1
  for r in 0 1 2 3; do
    [ "$(cat "$T/env.$r")" = "$r 4 $((r % 2)) 2 $id" ] || return 1
  done
}
# Both launchers exited 0; else shows what they said.
both_ok() {
  [ "$RC_A" = 0 -a "$RC_B" = 0 ] && return 0
  echo "       A (rc $RC_A): $(cat "$T/a.out")"
  echo "       B (rc $RC_B): $(cat "$T/b.out")"
  return 1
}
handoff 0.2 # B is waiting for the file when A writes it
check "both launchers exit 0" both_ok
check "ranks 0-3 see nranks 4, their local ranks, and the id from the file" handoff_ok
check "the id file is private (0600) and no temporary file is left" \
  [ "$(cat "$T/idf.mode")" = 600 -a "$(grep -c '^job\.id' "$T/idf.ls")" = 1 ]
check "the writer removes the id file when its job ends" [ ! -e "$IDF" ]

echo "# stale id files"
# A writer killed by SIGKILL cannot remove its file: it stays behind.
"$CCORUN" -n 1 --nranks 2 --id-file "$IDF" bash -c 'exec -a "$0" sleep 100' "$MARK-stale" \
  >/dev/null 2>&1 </dev/null &
STALE_PID=$!
for i in $(seq 50); do [ -s "$IDF" ] && break; sleep 0.1; done
kill -KILL "$STALE_PID"
wait "$STALE_PID" 2>/dev/null
kill -KILL $(pgrep -f -- "^$MARK-stale") 2>/dev/null
cp "$IDF" "$T/stale.id"
check "a killed writer leaves its id file behind" [ -s "$IDF" ]
run -n 1 --nranks 2 --rank-offset 1 --id-file "$IDF" bash -c "$RECORD_ENV" x "$T/none"
check "a stale id file fails the job (exit 1), no rank started" [ "$RC" = 1 -a ! -e "$T/none" ]
check "... within a few seconds (< 6 s), not after a timeout" elapsed_below 6
check "... saying the file is stale, whose launcher is gone, and to remove it" \
  grep -Eq "^ccorun: id file '$T/job\.id' is stale: it names a root at [^ ]+, but the launcher that wrote it \(pid $STALE_PID on [^)]+\) does not answer at [^ ]+ \(Connection refused\), so its job has ended\. The file is probably left over from an earlier job: remove it$" "$T/err"
run -n 1 --nranks 2 --rank-offset 1 --id-file "$IDF" -t 1 true
check "... also when -t is shorter than the wait for a new file (exit 1)" \
  [ "$RC" = 1 ] && elapsed_below 3 && err_has "is stale"
# The reader starts first and finds the stale file; the new job's writer
# replaces it a second later, within the reader's wait.
handoff 1
check "a stale file replaced by the new job's writer is used: both launchers exit 0" both_ok
check "... and every rank has the new id" handoff_ok
check "... not the stale one" [ "$(cat "$T/idf.id")" != "$(head -n 1 "$T/stale.id")" ]
# SIGTERM to the writer stops its job, and the file goes with it.
"$CCORUN" -n 1 --nranks 2 --id-file "$IDF" bash -c 'exec -a "$0" sleep 100' "$MARK-term" \
  >/dev/null 2>&1 </dev/null &
TERM_PID=$!
for i in $(seq 50); do [ -s "$IDF" ] && break; sleep 0.1; done
kill -TERM "$TERM_PID"
wait "$TERM_PID"
check "SIGTERM to the writer removes its id file" [ "$?" = 143 -a ! -e "$IDF" ]
check "... and stops its rank" gone "$MARK-term"
# A file with the id alone (by hand, or from another tool) is taken as is.
printf '%s\n' "$FIRST_ID" >"$T/hand.id"
run -n 1 --nranks 2 --rank-offset 1 --id-file "$T/hand.id" bash -c 'echo "$CCO_UNIQUE_ID"'
check "an id file with the id alone is used as it is" [ "$RC" = 0 ] && out_is "$FIRST_ID"

printf 'this is not an id\n' >"$T/bad.id"
run -n 1 --nranks 2 --rank-offset 1 --id-file "$T/bad.id" bash -c "$RECORD_ENV" x "$T/none"
check "a corrupt id file is refused (exit 1), no rank started" [ "$RC" = 1 -a ! -e "$T/none" ]
check "... saying which file" err_has "id file '$T/bad.id' does not hold a valid unique id"
run -n 1 --nranks 2 --rank-offset 1 --id-file "$T/never.id" -t 0.3 true
check "an id file that never appears: --timeout applies (exit 124)" [ "$RC" = 124 ] && elapsed_below 3
check "... saying so" err_has "id file '$T/never.id' did not appear within 0.3 s"

echo "# usage"
usage_fails() {
  run "$@"
  [ "$RC" = 2 ] && grep -q '^Usage: ccorun' "$T/err"
}
check "no arguments -> 2" usage_fails
check "-n 0 -> 2" usage_fails -n 0 true
check "-n abc -> 2" usage_fails -n abc true
check "no program -> 2" usage_fails -n 2
check "unknown option -> 2" usage_fails -n 2 --bogus true
check "option without value -> 2" usage_fails -n 2 --timeout
check "rank offset + N > nranks -> 2" usage_fails -n 2 --nranks 4 --rank-offset 3 true
check "nranks > N without --id-file -> 2" usage_fails -n 2 --nranks 4 true
check "... saying so" err_has "--id-file"
check "-x without = -> 2" usage_fails -n 1 -x FOO true
check "negative timeout -> 2" usage_fails -n 1 -t -1 true
check "--id with --id-file -> 2" usage_fails -n 1 --id "$FIRST_ID" --id-file "$IDF" true
run --help
check "--help -> usage on stdout, exit 0" [ "$RC" = 0 ] && grep -q '^Usage: ccorun' "$T/out"
run -n 1 -- bash -c 'echo "$1"' x --not-an-option
check "-- ends the options; the program's own options are left alone" out_is "--not-an-option"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
