# cco — top-level entry points.
#   make         build into build/ (programs in build/bin, libraries in build/lib)
#   make demo    the main job: 4 ranks through ccorun
#   make test    every test: gcc build, ASan+UBSan build, TSan build, clang build
#   make bench   the benchmarks that run on this machine
#   make install the library, headers, ccorun, cco-info, CMake package and
#                cco.pc under PREFIX (default /usr/local; DESTDIR for staging)
# Each target installs missing system packages first (as root). Builds print
# a line each (scripts/build.sh); their whole output is in <folder>/build.log.

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_TYPE ?= RelWithDebInfo
# nvcc is often installed outside PATH; CMake builds CUDA sources when it exists.
NVCC       := $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
CMAKE_ENV  := $(if $(NVCC),CUDACXX=$(NVCC))
# Tests run one more at a time than there are cores (TEST_JOBS): most of a
# multi-rank test's time is ranks waiting for each other, and the compile
# checks are one compiler at a time, so the cores stay busy (on 2 cores the
# ASan suite took 273 s two at a time, 209 s three at a time). The
# timing-sensitive fault tests are RUN_SERIAL (tests/CMakeLists.txt).
TEST_JOBS  ?= $(shell echo $$(( $(JOBS) + 1 )))
CTEST      := ctest --output-on-failure --progress --timeout 600 -j $(TEST_JOBS)
# cmake's own makes would print two 'Entering/Leaving directory' lines per step.
MAKEFLAGS  += --no-print-directory

.PHONY: all deps configure build demo test test-main test-asan test-tsan test-clang bench install clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@$(CMAKE_ENV) cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@bash scripts/build.sh $(BUILD) $(JOBS)

# The demo needs the launcher and itself, not the whole tree.
demo: configure
	@bash scripts/build.sh $(BUILD) $(JOBS) ccorun cco-demo
	$(BUILD)/bin/ccorun -n 4 --virtual-hosts 2 -t 120 $(BUILD)/bin/cco-demo

test: test-main test-asan test-tsan test-clang

test-main: build
	cd $(BUILD) && $(CTEST)

# The CPU code again, under checkers. Nothing of the CUDA side builds here
# (CUDA programs, the collectives' fatbin): no test of these builds runs it,
# and the main build compiles it once, in a third of test's time otherwise.
CPU_ONLY = -DCCO_BUILD_CUDA=OFF -DCCO_COLL_KERNELS=OFF
# The checkers' builds at -O1, as the sanitizers' own documentation advises:
# the same reports, and their tests (most of CI's time) ran about 25% faster
# than at -O0.
CHECKED = -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" $(CPU_ONLY)

# Sanitizers catch what a passing test can hide: leaks, overflows, UB. The
# compile checks of the headers, the device blocks, the torch extension and
# the device bitcode, and the wheel's and install's own builds, make programs
# of their own (nvcc, clang, g++, pip, without sanitizers): the main build
# runs them. The device blocks' 8-rank run repeats the code of the 2-4-rank
# ones at 5x their time under ASan: the main build runs it. The type check
# runs mypy on the Python sources: no C of the build takes part. The GDA
# and SDMA scripts' ordering stress runs a quarter of its iterations here
# (CCO_TEST_LIGHT): memory errors show on the first ones, the main build
# runs them all.
test-asan: deps
	@$(CMAKE_ENV) cmake -S . -B $(BUILD)-asan -DCCO_SANITIZE=ON $(CHECKED) >/dev/null
	@bash scripts/build.sh $(BUILD)-asan $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 CCO_TEST_LIGHT=1 $(CTEST) -LE '^(install|device)$$' \
	  -E '^(script\.(test_headers|test_coll_device|test_torch_ext|test_typecheck)|mp\.mp_coll_device\.8)$$'

# Races: the ranks-as-threads tests, the unit tests, and the liveness monitor
# against the calling thread in a few fault-test phases, and the GDA proxy
# against the kernels' threads and its own teardown (the MoE op and the
# collectives across two virtual hosts, a peer killed under GDA and MoE
# traffic) under ThreadSanitizer. The network engine's own accesses to
# window memory are left out of the check (net_ofi.c says why).
TSAN_TESTS = unit\.|mp\.mp_threads|mp\.mp_fault\.(barrier|devwait|sdma|gda|moe)|ops\.mp_moe\.(two_hosts|two_hosts_staged|four_ranks_two_hosts)$$|coll\.mp_coll_hier\.(n2h2|n4h2_staged)$$
test-tsan: deps
	@$(CMAKE_ENV) cmake -S . -B $(BUILD)-tsan -DCCO_TSAN=ON $(CHECKED) >/dev/null
	@bash scripts/build.sh $(BUILD)-tsan $(JOBS)
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1 $(CTEST) -R "$(TSAN_TESTS)"

# Warnings are errors under clang too.
test-clang: deps
	@CC=clang $(CMAKE_ENV) cmake -S . -B $(BUILD)-clang -DCMAKE_BUILD_TYPE=Release $(CPU_ONLY) >/dev/null
	@bash scripts/build.sh $(BUILD)-clang $(JOBS)
	cd $(BUILD)-clang && $(CTEST) -L unit

# The CPU benchmarks through the perf driver (docs/perf.md); GPU machines: tests/gpu/gpu_machine.sh.
bench: build
	python3 bench/cco_perf.py bootstrap --bin $(BUILD)/bin -o $(BUILD)/bench/bootstrap.jsonl
	python3 bench/cco_perf.py gda_host --bin $(BUILD)/bin -o $(BUILD)/bench/gda_host.jsonl

# Builds only what is installed (cco_dist), not the tests and examples.
PREFIX ?= /usr/local
install: deps
	@$(CMAKE_ENV) cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target cco_dist
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-clang
