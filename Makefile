# `make demo` and `make test` work on a fresh machine: they create .venv and install hf-ext with every extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
export HF_HUB_OFFLINE := 1

.PHONY: install demo test test-fast test-assets bench docs lint readme clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[all,dev]' -c constraints.txt
	touch $(STAMP)

install: $(STAMP)

# The suite also runs the RLlib test, so `make test` adds the `rllib` extra (outside `all`: ray[rllib] pins
# gymnasium 1.2.2, which the whole suite passes under).
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all,dev,rllib]' -c constraints.txt
	touch $(TEST_STAMP)

# The tour runs every method's quick benchmark (a slice of its full run); the total includes the install.
demo:
	@start=$$(date +%s); $(MAKE) --no-print-directory install && $(BIN)/hf-ext tour; rc=$$?; \
	echo "make demo: $$(( $$(date +%s) - start )) s in all, install included"; exit $$rc

# Two pytest processes: Triton's interpreter flag must be set before any kernel is defined.
test: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not triton_interpret and not asset_rebuild" --durations=15
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -m triton_interpret -q || [ $$? -eq 5 ]

# Every test not marked slow (each takes under 5 seconds here); `make test` runs them all.
test-fast: install
	$(BIN)/python -m pytest -m "not slow and not triton_interpret and not asset_rebuild" -q

# Rebuilds shipped assets from their recipes and compares the bytes (the Vegas model: about 13 minutes).
test-assets: install
	$(BIN)/python -m pytest -m asset_rebuild -q

bench: install
	@for id in $$($(BIN)/hf-ext list --ids); do $(BIN)/hf-ext bench $$id --quick --json bench-out/$$id.json || exit 1; done

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: install
	$(BIN)/ruff check hf_ext benchmarks tests
	$(BIN)/ruff format --check hf_ext benchmarks tests
	$(BIN)/mypy hf_ext benchmarks

readme: install
	$(BIN)/python -c "from hf_ext._readme import update_readme; update_readme()"

clean:
	rm -rf $(VENV) site bench-out build *.egg-info
