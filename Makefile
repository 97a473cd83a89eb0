# The two commands: `make run` starts RigSpark, `make test` runs every check.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Libraries a real Qt window needs on Debian/Ubuntu (offscreen tests need the first four),
# and poppler-utils, whose pdftotext the tests read the PDF report with.
SYSTEM_PACKAGES := libegl1 libgl1 libfontconfig1 libxkbcommon0 libdbus-1-3 \
	libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 \
	libxcb-render-util0 libxcb-image0 libxcb-randr0 libxcb-xinerama0 libxcb-xkb1 \
	poppler-utils

.PHONY: run test lint system-deps bench validate clean bundle fuzz

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]" --config-settings editable_mode=compat
	touch $(STAMP)

# Installs missing system libraries with apt-get when run as root on Debian; otherwise
# prints the one command to run.
system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && command -v apt-get >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else echo "please run: sudo apt-get install$$missing"; fi; fi

run: $(STAMP) system-deps
	$(BIN)/rigspark

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy rigspark_gui/core
	$(BIN)/lint-imports

test: $(STAMP) system-deps lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_benchmarks.py

# The full fuzz campaign over every reader of outside files (docs/reliability.md):
# FUZZ_INPUTS inputs, one worker per CPU; failing inputs go to fuzz/failures/.
FUZZ_INPUTS ?= 120000
FUZZ_SEED ?= 1
fuzz: $(STAMP)
	$(BIN)/python -m fuzz --inputs $(FUZZ_INPUTS) --seed $(FUZZ_SEED)

# A one-folder bundle, dist/RigSpark/, with both commands; see docs/packaging.md.
# Rebuilt from scratch each time, then smoke-tested. Not part of `make test` (minutes).
bundle: $(STAMP) system-deps
	$(BIN)/python -c "import PyInstaller" 2>/dev/null || $(BIN)/python -m pip install -q "pyinstaller>=6.10"
	$(BIN)/python packaging/metadata.py --check
	rm -rf build/RigSpark build/rigspark dist/RigSpark
	$(BIN)/pyinstaller --noconfirm --clean --log-level WARN \
		--distpath dist --workpath build packaging/rigspark.spec
	packaging/smoke_test.sh dist/RigSpark

# Loads synthetic GGUFs with llama.cpp itself and compares its buffers with RigSpark's
# figures (validation/run_validation.py -> validation/cases.json, docs/validation.md).
# Slow: builds llama-cpp-python (CPU) into its own environment on first use.
LLAMA_VENV ?= $(HOME)/.cache/rigspark/llama-venv
validate: $(STAMP)
	$(LLAMA_VENV)/bin/python -c "import llama_cpp" 2>/dev/null || { \
		test -x $(LLAMA_VENV)/bin/python || $(PYTHON) -m venv $(LLAMA_VENV); \
		$(LLAMA_VENV)/bin/python -m pip install llama-cpp-python gguf numpy; }
	$(BIN)/python validation/run_validation.py --llama-python $(LLAMA_VENV)/bin/python

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
