# Everything a fresh machine needs: `make run` (the main job) and `make test` (the suite).
# PY_VERSION chooses the interpreter and its environment: 3.11, the default, in .venv; another in .venv-<version>,
# e.g. `make test-fast PY_VERSION=3.10`.
PY_VERSION ?= 3.11
PYENV_ROOT ?= $(HOME)/.pyenv
VENV := $(if $(filter 3.11,$(PY_VERSION)),.venv,.venv-$(PY_VERSION))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The exact versions of the development environment, for every supported Python (`make lock` writes it).
LOCK := requirements/dev.lock

# The first of python<version> on PATH and pyenv's <version>.* that runs: a pyenv shim of a version that is not
# selected is on PATH but fails. Evaluated only when a recipe needs it.
find_python = $(firstword $(foreach candidate,python$(1) $(wildcard $(PYENV_ROOT)/versions/$(1).*/bin/python$(1)), \
	$(shell $(candidate) -c '' >/dev/null 2>&1 && echo $(candidate))))
PYTHON ?= $(call find_python,$(PY_VERSION))
# The Pythons a release has a wheel for (make dist), each found as above (a missing one is named as python<version>,
# which the build then reports).
DIST_PYTHON_VERSIONS := 3.10 3.11 3.12 3.13
DIST_PYTHONS = $(foreach version,$(DIST_PYTHON_VERSIONS),$(or $(call find_python,$(version)),python$(version)))

# Executors run PYSPARK_PYTHON, not the driver's interpreter: point Spark at this environment.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup run run-s3 test test-fast dist test-dist bench bench-peer lint lock clean

setup: $(STAMP)

# The checkout is installed in compat editable mode: a plain path entry in a .pth file, not setuptools' import hook,
# so that pkgutil.iter_modules() lists pyspark_pysparklog and Spark registers format("pysparklog") by itself from any
# working directory, and a module added to the checkout imports without a reinstall. setuptools warns that compat
# mode is transitional, and pip prints that as a banner on every set-up; the filter drops that one warning (by its
# first words) in the build backend, which pip runs in a process of its own, and nothing else. (Comments here, not
# in the recipe, where make would print them.)
$(STAMP): pyproject.toml $(LOCK)
	@test -n "$(PYTHON)" || { echo "No Python $(PY_VERSION): python$(PY_VERSION) is not on PATH (or does not run) and" \
		"$(PYENV_ROOT)/versions/$(PY_VERSION).*/bin/python$(PY_VERSION) does not exist; install it, or name it with" \
		"PYTHON=/path/to/python$(PY_VERSION)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "$(PYTHON) is older than Python 3.10," \
		"the oldest pysparklog supports" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r $(LOCK)
	PYTHONWARNINGS='ignore:Compat editable installs' \
		$(PY) -m pip install --quiet --no-deps -e . --config-settings editable_mode=compat
	touch $(STAMP)

run: setup
	$(PY) -m examples.demo

# The quickstart, the main job and an example with their log directory on s3:// (a loopback S3 server).
run-s3: setup
	$(PY) -m examples.on_object_store

test: setup
	# Two workers: most of the suite waits on JVMs, subprocesses and servers, so two share the two cores well (15 min
	# against 19 in one process, on a machine other work was loading). The jars they need are fetched first, once.
	$(PY) -m tests.warm_caches
	$(PY) -m pytest -q -n 2 -m 'not dist'

test-fast: setup
	$(PY) -m pytest -q -n 2 -m 'not slow and not interop and not spark and not dist'

# What a release publishes, in dist/: the sdist, and from it a manylinux wheel per supported Python, each with the
# kernels compiled (release/dist.py). Every Python of DIST_PYTHON_VERSIONS must be installed.
dist: setup
	$(PY) -m release.dist $(addprefix --python ,$(DIST_PYTHONS))

# Each wheel of dist/ installed into a new environment of its Python beside a user's pyspark 4.2, and read and
# written through Spark (tests/test_packaging.py). The runtime's pyspark, published as an sdist only, is built into
# a wheel first, once per machine, as set-up rather than as part of the tests' time.
test-dist: dist
	$(PY) -m tests.test_packaging
	PYSPARKLOG_DIST_PYTHONS="$(DIST_PYTHONS)" $(PY) -m pytest -q -n 2 -m dist tests/test_packaging.py

bench: setup
	$(PY) -m benchmarks

# pysparklog against Spark's Kafka connector and a real Kafka broker (several minutes; java and mvn needed), apart
# from `make bench` for its length: e.g. `make bench-peer BENCH_PEER_ARGS='--records 2000000'` for a quicker run.
BENCH_PEER_ARGS ?=
bench-peer: setup
	$(PY) -m benchmarks.bench_peer $(BENCH_PEER_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .

# Rewrites the lock from pyproject.toml: one file for Python 3.10 and up (versions fork per Python where a package
# dropped an older one), with the dev and examples extras and Spark 4.2.x (requirements/constraints.txt). Versions
# already in the lock are kept where they still fit; LOCK_ARGS=--upgrade takes the newest of everything.
# uv is needed only here, in an environment of its own.
LOCK_ARGS ?=
lock:
	@test -n "$(PYTHON)" || { echo "No Python $(PY_VERSION) to run uv with (PYTHON=/path/to/python)" >&2; exit 1; }
	$(PYTHON) -m venv .cache/uv
	.cache/uv/bin/python -m pip install --quiet --upgrade uv
	.cache/uv/bin/uv pip compile pyproject.toml --universal --python-version 3.10 --extra dev --extra examples \
		--constraint requirements/constraints.txt --custom-compile-command 'make lock' --quiet $(LOCK_ARGS) \
		--output-file $(LOCK)

clean:
	rm -rf .venv .venv-* .cache data
