# trainwatch: the two commands of the README, and the pieces they are made of.
#   make demo    install dependencies, build, run the demo training run under analysis
#   make check   install dependencies, build (-O2 and ASan+UBSan), run every test
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= 2

.PHONY: all deps deps-check build asan fuzz-build demo check eval unit e2e fuzz bench install clean format
PREFIX     ?= /usr/local

all: build

# What building and the demo need; the tests' tools and servers come with check.
deps:
	@bash scripts/install-deps.sh demo

deps-check:
	@bash scripts/install-deps.sh check

# Each build prints one line; the compilers' output is in BUILD/build.log
# (its errors are shown when a build fails).
build: deps
	@JOBS=$(JOBS) bash scripts/build.sh $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

asan: deps-check
	@JOBS=$(JOBS) bash scripts/build.sh $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTW_SANITIZE=ON

fuzz-build: deps-check
	@JOBS=$(JOBS) bash scripts/build.sh $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTW_FUZZ=ON

demo: build
	@bash scripts/demo.sh $(BUILD)

# The whole suite runs on the sanitized build; the -O2 build is built with
# -Werror too and runs the unit tests; the fuzzers get a short run.
check: deps-check build asan fuzz-build
	@cd $(BUILD) && ctest --output-on-failure -L 'unit|valgrind'
	@cd $(ASAN_BUILD) && ctest --output-on-failure
	@cd $(FUZZ_BUILD) && ctest --output-on-failure -j$(JOBS) -L fuzz
	@echo "the evaluation set (a report, not a gate; see tests/eval/README.md):"
	@/usr/bin/python3 tests/eval/run.py --build $(BUILD)

# analyze on the labelled real runs of tests/eval: a table and the score per
# half (tests/eval/SCORES.md keeps its history)
eval: deps-check build
	@/usr/bin/python3 tests/eval/run.py --build $(BUILD)

bench: deps-check build
	@/usr/bin/python3 bench/metrics.py $(BUILD)
	@bash bench/ingest.sh $(BUILD)
	@/usr/bin/python3 bench/supervise.py $(BUILD)
	@/usr/bin/python3 bench/log_compare.py $(BUILD)
	@/usr/bin/python3 bench/trace.py $(BUILD)
	@/usr/bin/python3 bench/python.py $(BUILD)
	@/usr/bin/python3 bench/history.py $(BUILD)

# libtrainwatch.so/.a, the public headers, trainwatch.pc, the trainwatch
# binary, its man page and bash completion under PREFIX
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
