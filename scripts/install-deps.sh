#!/usr/bin/env bash
# Installs what building and testing cco needs on a fresh Debian/Ubuntu
# machine. As root it runs apt-get for whatever is missing; otherwise it
# names the packages and fails.
set -eu
# command:package. clang builds with warnings as errors (make test); clang-19
# compiles the device headers to NVPTX bitcode (the Triton path, checked by
# the header tests); iproute2 makes the network namespaces of the two-host
# tests; procps gives pgrep to the launcher tests; openmpi-bin (about 10 s to
# install) gives mpirun for the Python test of examples/python/01_barrier.py.
# pkg-config builds the installed-library test's consumer (tests/install/).
# llvm-19 gives llvm-link, opt and llvm-nm to the device bitcode checks.
# README.md lists the same packages: keep the two in step.
needs="cmake:cmake make:make gcc:gcc g++:g++ clang:clang clang-19:clang-19 ip:iproute2 pgrep:procps mpirun:openmpi-bin python3:python3 pkg-config:pkg-config llvm-link-19:llvm-19"
missing=""
for pair in $needs; do
  cmd=${pair%%:*} pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
done
# libfabric-dev has no command: look for its header. The network engine needs the
# headers at build time only (libfabric itself is loaded at run time).
[ -f /usr/include/rdma/fabric.h ] || missing="$missing libfabric-dev"
# The Python tests run in a virtual environment under the build folder
# (tests/scripts/pyvenv.sh), and the wheel test installs into fresh ones;
# both need ensurepip, which Debian and Ubuntu ship apart from python3, in
# python3-venv.
python3 -c "import ensurepip" >/dev/null 2>&1 || missing="$missing python3-venv"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "install-deps: missing packages:$missing (install them as root: apt-get install$missing)" >&2
  exit 1
fi
