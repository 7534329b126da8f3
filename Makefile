# Burst: `make run` trains the demo, `make test` runs every test through CTest.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# The sanitizer build (ASan + UBSan, no libtorch; with clang it has the
# libFuzzer targets too).
SAN_DIR ?= build-san
# The ThreadSanitizer build (clang, no libtorch): the concurrent libraries'
# unit tests.
TSAN_DIR ?= build-tsan
# How long `make fuzz` runs each target, and how many run at once.
FUZZ_SECONDS ?= 60
# ... and within `make test`, which must fit in 30 minutes on 2 cores.
TEST_FUZZ_SECONDS ?= 10
FUZZ_JOBS ?= 2

.PHONY: all deps deps-run configure build run loops cookbook gang test format format-check tidy sanitize tsan fuzz bench bench-train bench-runtime base-model clean

all: build

deps:
	@scripts/install-deps.sh
	@scripts/install-npm-deps.sh web || echo "npm packages unavailable: the dashboard is built without its charts"

# What `make run` needs alone: no test servers, browser or sanitizers.
deps-run:
	@scripts/install-deps.sh --run
	@scripts/install-npm-deps.sh web || echo "npm packages unavailable: the dashboard is built without its charts"

# ON: the unit tests of the libraries without libtorch too (`make test`
# runs those in the sanitizer build instead).
TORCH_FREE_TESTS ?= ON
# ON: the benchmark tools too (`make test` builds without them).
BENCH_TOOLS ?= ON

configure:
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DBURST_TORCH_FREE_TESTS=$(TORCH_FREE_TESTS) -DBURST_BENCH=$(BENCH_TOOLS) > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)

build: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# Fine-tune the shipped base model on the support-ticket demo and print
# baseline vs fine-tuned accuracy on the held-out split. Builds only the two
# binaries the demo runs (`burst`, `burst-engine`); `make test` builds the rest.
run: deps-run
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target burst burst-engine
	@scripts/demo.sh

# Training loops as a service: the RL loop of examples/loops/rl.py (reward =
# the right label) against the embedded control plane; prints reward and
# held-out label accuracy per step (120 steps, ~10.5 min on 2 cores).
# LOOPS_ARGS passes flags to rl.py (e.g. LOOPS_ARGS="--steps 20").
loops: build
	@scripts/loops.sh $(LOOPS_ARGS)

# The Tinker cookbook's own supervised and RL loops (tinker-cookbook from
# PyPI) against the embedded control plane, on a Qwen 3 model with random
# weights made here; changed only by configuration (examples/cookbook).
cookbook: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target burst burst-engine
	@scripts/cookbook.sh

# One job on two workers: the same LoRA job on 1 worker with grad_accum 2 and
# on 2 workers over c10d and over the store channel, the loss curves side by
# side (equal to 1e-5), then the estimate for 1-8 workers (~1.5 min).
gang: build
	@scripts/gang.sh

# Every C++ file to the one style (.clang-format, clang-format 14), or, as
# `make test` does first, only a check that names each file that differs.
format:
	@scripts/format.sh

format-check:
	@scripts/format.sh --check

# clang-tidy 14 with .clang-tidy's checks over the libraries without libtorch
# and their tests (scripts/tidy.sh; build-tidy/ holds its compile database).
tidy:
	@scripts/install-deps.sh --system
	@scripts/tidy.sh

# Debian's packages and the C++ format check first (seconds); then the lint
# (clang-tidy, a few minutes of CPU) starts in the background at the lowest
# CPU priority, so it runs in the time the stages below leave a core idle,
# and its result is the main suite's last test, `lint`
# (scripts/lint-result.sh). Then the project's venv and the npm reference
# packages, the unit tests of the libraries without libtorch under ASan +
# UBSan, those of the libraries with threads under ThreadSanitizer, every
# fuzz target for TEST_FUZZ_SECONDS, then the main build (without the
# benchmark tools, which no test runs) with the rest of the suite (JOBS at
# a time, but at most one test with a control plane and one of the engine
# alone at once: CMakeLists.txt, burst_test_locks). Every test runs once;
# each stage stops here on failure with its CTest summary (a lint still
# running then finishes on its own, into build-tidy.out), and the main
# suite's summary ends a passing run.
test:
	@scripts/install-deps.sh --system
	@scripts/format.sh --check
	@rm -f build-tidy.rc build-tidy.pid; \
	  (nice -n 19 scripts/tidy.sh & echo $$! > build-tidy.pid; wait $$!; echo $$? > build-tidy.rc) \
	  > build-tidy.out 2>&1 < /dev/null & \
	  echo "lint: running in the background (build-tidy.out); its result is the test \`lint\`"
	@$(MAKE) --no-print-directory deps
	@scripts/install-npm-deps.sh || echo "npm packages unavailable: tokenizer reference tests will skip"
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory tsan
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)
	@$(MAKE) --no-print-directory build TORCH_FREE_TESTS=OFF BENCH_TOOLS=OFF
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1500 -j$(JOBS)

# The libraries without libtorch (core, store, db, runtime, formats, api)
# and their unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
# clang: it compiles these about twice as fast as g++ with the sanitizers,
# and its UBSan also checks float-to-integer overflow.
sanitize: deps
	@cmake -S . -B $(SAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DBURST_TORCH=OFF -DBURST_SANITIZE=ON > $(SAN_DIR).configure.log 2>&1 || (cat $(SAN_DIR).configure.log; exit 1)
	@cmake --build $(SAN_DIR) -j$(JOBS)
	@cd $(SAN_DIR) && ctest --output-on-failure -L sanitize -j$(JOBS)

# The libraries with threads of their own or called from many (runtime, HTTP
# server, API and its loops pump, metadata and object stores) and their unit
# tests under ThreadSanitizer (CMakeLists.txt, BURST_TSAN_TESTS); a race or a
# lock-order inversion fails its test with both stacks.
tsan: deps
	@cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DBURST_TSAN=ON > $(TSAN_DIR).configure.log 2>&1 || (cat $(TSAN_DIR).configure.log; exit 1)
	@cmake --build $(TSAN_DIR) -j$(JOBS) --target tsan_tests
	@cd $(TSAN_DIR) && ctest --output-on-failure -L tsan -j$(JOBS)

# Each libFuzzer target (fuzz/) for FUZZ_SECONDS, FUZZ_JOBS at a time; a
# finding fails naming the reproducer and the command that replays it. The
# targets live in the sanitizer build (its libraries carry coverage), so
# after `make sanitize` this builds nothing more.
fuzz: deps
	@cmake -S . -B $(SAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DBURST_TORCH=OFF -DBURST_SANITIZE=ON > $(SAN_DIR).configure.log 2>&1 || (cat $(SAN_DIR).configure.log; exit 1)
	@cmake --build $(SAN_DIR) -j$(JOBS) --target fuzz_targets
	@cd $(SAN_DIR) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -L fuzz -j$(FUZZ_JOBS)

# The engine against PyTorch eager (scripts/bench.sh), then training as users
# meet it: `burst train` on real data against TRL's SFTTrainer, the padding
# peer and the hot-step peer eager and compiled, and the demo recipe to the end (bench/train_real.py; docs/bench.md).
bench: build
	@scripts/install-deps.sh --bench
	@scripts/bench.sh
	@.venv/bin/python bench/train_real.py $(TRAIN_REAL_ARGS)

# The real-data part alone; TRAIN_REAL_ARGS passes flags (e.g. "--configs small --repeats 1").
bench-train: build
	@scripts/install-deps.sh --bench
	@.venv/bin/python bench/train_real.py $(TRAIN_REAL_ARGS)

# The serverless runtime: submissions/s through the API, dispatch latency,
# submit to first training step cold and warm (docs/bench.md); ~5 min.
bench-runtime: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)
	@cmake --build $(BUILD_DIR) -j$(JOBS) --target burst burst_runtime_bench burst_nodelay_preload
	@bench/runtime_bench.sh

# Rebuild models/burst-small from scratch (tokenizer + pretraining); ~1 h on 2 cores.
base-model: build
	@scripts/make_base_model.sh

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR).configure.log $(SAN_DIR) $(SAN_DIR).configure.log $(TSAN_DIR) $(TSAN_DIR).configure.log \
	  build-fuzz build-fuzz.configure.log build-tidy build-tidy.configure.log build-tidy.out build-tidy.rc build-tidy.pid
