# The two commands: `make run` starts RigSpark, `make test` runs every check.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Libraries a real Qt window needs on Debian/Ubuntu (offscreen tests need the first four).
SYSTEM_PACKAGES := libegl1 libgl1 libfontconfig1 libxkbcommon0 libdbus-1-3 \
	libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 \
	libxcb-render-util0 libxcb-image0 libxcb-randr0 libxcb-xinerama0 libxcb-xkb1

.PHONY: run test lint system-deps bench validate clean

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

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
