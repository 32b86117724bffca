# Helpers shared by the test scripts; source it after setting `tmp` (a
# scratch directory) and `passed=0 failed=0`.

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# check NAME COMMAND...: passes when COMMAND succeeds; prints its time, and
# its output's tail on failure. The output stays in $tmp/last.out.
check() {
  local name=$1; shift
  local t0; t0=$(now)
  if "$@" >"$tmp/last.out" 2>&1; then
    passed=$((passed + 1)); echo "ok   $name ($(elapsed "$t0") s)"
  else
    failed=$((failed + 1)); echo "FAIL $name ($(elapsed "$t0") s)"; tail -25 "$tmp/last.out" | sed 's/^/    /'
  fi
}
skip() { echo "SKIP $1"; }
# Prints the lines of the last check's output that match a pattern, indented.
show() { grep -E "$1" "$tmp/last.out" | sed 's/^/    /'; }

# The clang that compiles C to NVPTX bitcode (the Triton path), newest first.
# Sets nvptx_cc (empty when none) and nvptx_arch (sm_90, or the newest sm_*
# an older clang knows, with a note in nvptx_note; the inline PTX does not
# depend on it).
find_nvptx_clang() {
  nvptx_cc="" nvptx_arch="" nvptx_note="" nvptx_flags=()
  local cc sm
  for cc in clang-21 clang-20 clang-19 clang-18 clang-17 clang-16 clang-15 clang; do
    command -v "$cc" >/dev/null || continue
    for sm in sm_90 sm_89 sm_87 sm_86 sm_80; do
      if echo 'int x;' | "$cc" --target=nvptx64-nvidia-cuda -march="$sm" -std=c11 -nostdlibinc -x c \
        -emit-llvm -c - -o /dev/null 2>/dev/null; then
        nvptx_cc=$cc nvptx_arch=$sm
        break 2
      fi
    done
  done
  [ -n "$nvptx_cc" ] || return 0
  [ "$nvptx_arch" = sm_90 ] || nvptx_note="($nvptx_cc knows no sm_90; bitcode for $nvptx_arch)"
  # A clang older than the CUDA toolkit it finds warns that it does not know
  # that version, which -Werror turns into a failure; the headers need
  # nothing of the toolkit, so that warning is off where clang has it.
  nvptx_flags=()
  if echo 'int x;' | "$nvptx_cc" --target=nvptx64-nvidia-cuda -march="$nvptx_arch" -std=c11 -nostdlibinc \
    -Werror -Wno-unknown-cuda-version -x c -emit-llvm -c - -o /dev/null 2>/dev/null; then
    nvptx_flags=(-Wno-unknown-cuda-version)
  fi
  return 0
}
# nvcc on PATH or in /usr/local/cuda; sets nvcc (empty when none).
find_nvcc() {
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || nvcc=""
}
