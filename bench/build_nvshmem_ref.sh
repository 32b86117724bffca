#!/usr/bin/env bash
# Builds bench/nvshmem_ref.cu against the NVSHMEM of the pip package
# nvidia-nvshmem-cu13 (headers, libnvshmem_device.a, libnvshmem_host.so.3)
# and the libcco of a cco build. Runs on the GPU machine.
#
#   bash bench/build_nvshmem_ref.sh [CCO_BUILD_DIR]     (default /tmp/cco-build)
#
# Writes CCO_BUILD_DIR/bin/nvshmem_ref. NVSHMEM_HOME overrides the package
# lookup; PYTHON picks the interpreter (default python3). Run it with
#   python3 bench/cco_perf.py nvshmem --bin CCO_BUILD_DIR/bin
# (or NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 ccorun -n N CCO_BUILD_DIR/bin/nvshmem_ref)
# under MPS.
set -eu
build=${1:-/tmp/cco-build}
src=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
py=${PYTHON:-python3}
if [ -z "${NVSHMEM_HOME:-}" ]; then
  # nvidia.nvshmem is a namespace package in the wheel (no __init__.py), so
  # __file__ may be None: fall back to __path__.
  NVSHMEM_HOME=$("$py" -c 'import os, nvidia.nvshmem as m
f = getattr(m, "__file__", None)
print(os.path.dirname(f) if f else list(m.__path__)[0])')
fi
inc=$NVSHMEM_HOME/include
lib=$NVSHMEM_HOME/lib
echo "nvshmem: $NVSHMEM_HOME"
ls -l "$lib"
[ -f "$inc/nvshmem.h" ] || { echo "no $inc/nvshmem.h" >&2; exit 1; }
[ -f "$lib/libnvshmem_device.a" ] || { echo "no $lib/libnvshmem_device.a" >&2; exit 1; }
# The wheel ships libnvshmem_host.so.3 without the unversioned link.
if [ -e "$lib/libnvshmem_host.so" ]; then host=-lnvshmem_host
elif [ -e "$lib/libnvshmem_host.so.3" ]; then host=-l:libnvshmem_host.so.3
else echo "no libnvshmem_host.so* in $lib" >&2; exit 1
fi
[ -e "$build/lib/libcco.so" ] || { echo "no $build/lib/libcco.so: build cco first" >&2; exit 1; }
# The benchmarks' command line and JSON lines (bench_args.c, bench_json.c), built by cmake.
[ -e "$build/lib/libcco_bench_util.a" ] || { echo "no $build/lib/libcco_bench_util.a: build cco first" >&2; exit 1; }
# libcuda: the driver's, or the toolkit's stub (its soname loads the driver's).
cudaroot=$(cd "$(dirname "$nvcc")/.." && pwd)
stubs=$(find "$cudaroot/" -name libcuda.so -path '*stubs*' 2>/dev/null | head -1)
stubdir=${stubs:+-L$(dirname "$stubs")}
mkdir -p "$build/bin"
out=$build/bin/nvshmem_ref
set -x
"$nvcc" -rdc=true -arch=sm_90 -O2 -std=c++17 -I"$inc" -I"$src/include" "$src/bench/nvshmem_ref.cu" -o "$out" \
  -L"$build/lib" -lcco -lcco_bench_util -L"$lib" "$host" -lnvshmem_device $stubdir -lcuda \
  -Xlinker -rpath,"$lib" -Xlinker -rpath,"$build/lib"
set +x
echo "built $out"
