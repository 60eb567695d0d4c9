# The two commands of the README: `make train` (main job) and `make test` (test suite); `make lint` runs ruff.
# Both create and fill the virtual environment .venv idempotently first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CONSTRAINTS := config/constraints-test.txt
# Isaac Lab 3.0, kit-less (Newton and standalone PhysX, no Isaac Sim), on this Python 3.11 + CPU torch: see docs/isaaclab.md.
ISAACLAB_PINS := config/isaaclab/isaaclab.txt config/isaaclab/requirements.txt
STAMP := $(VENV)/.installed-$(shell cat setup.py extension.toml $(CONSTRAINTS) $(ISAACLAB_PINS) 2>/dev/null | sha1sum | cut -c1-12)

.PHONY: setup train test test-slow lint benchmark clean

setup: $(STAMP)

$(STAMP):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU torch first (a wheel on this machine's disk), so nothing else pulls a CUDA build.
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) torch
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e ".[test]"
	# Isaac Lab 3.0 declares Python >= 3.12 and pins a CUDA torch: the wheel without its dependencies, then the
	# packages it needs here (the constraints keep torch, warp-lang, mujoco and rsl-rl-lib at the project's pins).
	$(PY) -m pip install --quiet --no-deps --ignore-requires-python -c $(CONSTRAINTS) -r config/isaaclab/isaaclab.txt
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -r config/isaaclab/requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

train: setup
	# The main job (README): SHAC on DiffLoco-Velocity-Flat-AnymalD, export, validation in hard contact and MuJoCo.
	$(PY) scripts/main_job.py $(ARGS)

test: setup
	$(PY) -m pytest -q tests $(ARGS)

test-slow: setup
	$(PY) -m pytest -q -m slow tests $(ARGS)

lint: setup
	# ruff.toml: pyflakes, pycodestyle, import order
	$(VENV)/bin/ruff check .

benchmark: setup
	$(PY) scripts/benchmark_sim.py $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
