# The two commands of the README do all the set-up themselves:
#   make run    the live screen (on a box with no GPU and no server: the demo tour)
#   make test   the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint typecheck demo e2e bench snapshots mutate fuzz clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/infertop --or-demo $(ARGS)

demo: $(STAMP)
	$(BIN)/infertop demo $(ARGS)

# the whole suite, with the 15 slowest tests and every skip's reason
test: $(STAMP)
	$(BIN)/python -m pytest -q -rs --durations=15

# the quick loop while working (under 3 minutes on two cores): leaves out the tests marked
# slow (the whole app driven, scenarios played whole) and integration (outside programs),
# and the property suite tries 5 inputs a property (tests/conftest.py's hypothesis profile
# "fast"); `make test` still runs everything with the full counts
# Bytecode is cached under .venv/pycache even where the environment sets
# PYTHONDONTWRITEBYTECODE (this workplace does): without it every run compiles ~700 modules
# and rewrites each test module's asserts again (collection 12-16 s -> 2 s), and each
# `python -m infertop` child a test starts compiles its imports anew (~0.3 s of CPU each).
# Serial on purpose: pytest-xdist -n 2 (--dist loadfile) was no faster on the shared
# two-core box (4:05 wall, 165 s CPU; serial 2:53-4:56, 126-163 s CPU, 2026-12-02, under
# other users' load): each worker imports, collects and builds session fixtures again.
FAST_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache
test-fast: $(STAMP)
	$(FAST_ENV) $(BIN)/python -m pytest -q -rs --durations=15 \
		-m "not slow and not integration" --hypothesis-profile=fast

# Lint (ruff, lint only: no formatter) and type check (mypy): configured in pyproject.toml,
# both run by .ci/run before the tests.
lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/python scripts/typecheck.py

# Real vLLM (CPU build) end to end: installs it on first use (about 7 minutes, 3.4 GB).
e2e: $(STAMP)
	scripts/e2e-vllm.sh

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation run of the core (tools/mutate.py): do the fast unit tests notice a planted bug?
# Slow (about 20 min on two cores), so a tool to run by hand, not part of `make test`;
# ARGS="-m derive" for one module, ARGS=--help for the rest.
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py $(ARGS)

# Coverage-guided fuzzing of every parser (tools/fuzz, atheris): FUZZ_SECONDS each (default
# 10 min), new inputs kept in .fuzz/TARGET (not the repo), crashes in .fuzz/crashes/;
# `make test` runs each for a few seconds (tests/test_fuzz.py).  FUZZ_TARGETS= for some.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= metrics_text recording_lines kv_batch prometheus_answer toml_config command_line
fuzz: $(STAMP)
	@mkdir -p .fuzz/crashes
	for t in $(FUZZ_TARGETS); do mkdir -p .fuzz/$$t; echo "== $$t"; \
		$(BIN)/python tools/fuzz/run.py $$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 \
			-rss_limit_mb=2048 -artifact_prefix=.fuzz/crashes/$$t- \
			-print_final_stats=1 .fuzz/$$t tools/fuzz/corpus/$$t || exit 1; done

# Each seed corpus cut to what libFuzzer's -merge=1 keeps (same coverage, fewest and smallest
# inputs); after a long `make fuzz`, copy what it found into tools/fuzz/corpus/TARGET first.
.PHONY: fuzz-minimise
fuzz-minimise: $(STAMP)
	$(BIN)/python tools/fuzz/run.py --minimise $(FUZZ_TARGETS)

snapshots: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_tui_snapshots.py --snapshot-update

clean:
	rm -rf $(VENV) build *.egg-info
