# Two commands on a fresh machine: `make fit` (set-up + the offline main job) and `make test`.
# `make setup` is idempotent: it installs only what is missing.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch 2.13 is what this project is tested with on laptops; GPU nodes bring their own.
TORCH  ?= torch==2.13.0
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup fit test bench clean

setup: $(VENV)/.installed renderer/node_modules/.installed chromium

$(VENV)/.installed: pyproject.toml
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

renderer/node_modules/.installed: renderer/package.json renderer/package-lock.json
	cd renderer && npm ci --no-audit --no-fund
	touch $@

# Debian's chromium; elsewhere point LIT_WATERCOLOUR_CHROMIUM at any Chromium or use Playwright's own.
chromium:
	@if [ -n "$$LIT_WATERCOLOUR_CHROMIUM" ] || command -v chromium >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; \
	else echo "no chromium: set LIT_WATERCOLOUR_CHROMIUM or run 'playwright install chromium'"; fi

fit: setup
	$(PY) -m lit_watercolour fit

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) scripts/bench_render.py

clean:
	rm -rf $(VENV) renderer/node_modules runs
