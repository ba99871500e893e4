# The two commands of the README: `make run` and `make test`. Everything else is a helper.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PAGODA := $(BUILD)/src/cli/pagoda
DEMO ?= $(BUILD)/demo-model
FUZZ_SECONDS ?= 20
SOAK_SECONDS ?= 1800

.PHONY: run test deps build unit oracle fuzz soak bench format clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# `make run` serves the demo model (random weights); `make run MODEL=/path/to/Qwen3-8B` serves a real one.
MODEL ?=
run: build
	scripts/run-demo $(PAGODA) $(DEMO) $(MODEL)

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

oracle: build
	PAGODA_BIN=$(abspath $(PAGODA)) PAGODA_BUILD_DIR=$(abspath $(BUILD)) .venv/bin/python -m pytest -q tests

fuzz: deps
	scripts/run-fuzzers $(FUZZ_SECONDS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	PAGODA_BIN=$(abspath $(PAGODA)) PAGODA_BUILD_DIR=$(abspath $(BUILD)) .venv/bin/python -m pytest -q tests
	scripts/run-fuzzers $(FUZZ_SECONDS)

# Not in `make test`: mixed load with disconnects, bad requests and model reloads, then RSS, fds, KV blocks and the
# engine queues checked against their baseline (tests/oracle/server/soak.py; docs/benchmarks.md has a result).
soak: build
	SOAK_SECONDS=$(SOAK_SECONDS) PAGODA_BIN=$(abspath $(PAGODA)) .venv/bin/python tests/oracle/server/soak.py

bench: build
	@for b in $(BUILD)/bench/*_bench; do echo "== $$b"; $$b; done

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) build-fuzz
