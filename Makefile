# Everything a fresh machine needs: `make run` (the main job) and `make test` (the suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Executors run PYSPARK_PYTHON, not the driver's interpreter: point Spark at this environment.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup run run-s3 test test-fast bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat: a plain path entry in a .pth file, not setuptools' import hook, so that pkgutil.iter_modules()
	# lists pyspark_pysparklog and Spark registers format("pysparklog") by itself from any working directory.
	$(PY) -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

run: setup
	$(PY) -m examples.demo

# The quickstart, the main job and an example with their log directory on s3:// (a loopback S3 server).
run-s3: setup
	$(PY) -m examples.on_object_store

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m 'not slow and not interop and not spark'

bench: setup
	$(PY) -m benchmarks

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .

clean:
	rm -rf $(VENV) .cache data
