# Two commands: `make repro` (the whole pipeline, offline default) and `make test`. Both bootstrap .venv from the
# hashed lock (requirements.lock); `make lock` refreshes the lock from pyproject.toml.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lock test repro data clean-venv

# The lock (docs/reproducibility.md): uv's `pip compile --generate-hashes` over pyproject.toml's dependencies and
# its extras, a plain requirements file that pip installs itself with --require-hashes (no extra tool at install
# time; conda's pip section reads it too). uv, not pip-tools: here pip-compile had not finished hashing after 40 min
# (it downloads every candidate file an index gives no hash for), uv took 20 s. CPython 3.11.7, Linux x86_64
# glibc >= 2.34 (manylinux_2_34): the committed run's platform.
LOCK := requirements.lock

$(STAMP): $(LOCK) pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet pip==26.3  # the pip that made the lock (the venv's own may predate its cache)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (odevit)" >/dev/null
	touch $(STAMP)

install: $(STAMP)

# re-resolve the lock after a pyproject.toml change (existing pins kept where they still satisfy it; add
# LOCK_ARGS=--upgrade to move everything to the newest releases; a machine whose pip reads local indexes passes
# them too, e.g. LOCK_ARGS='--extra-index-url file:///opt/pypi/simple'), then stamp pyproject's dependency hash
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet "uv>=0.5"  # the lock's maker, not a dependency of odevit
	$(BIN)/uv pip compile --quiet --generate-hashes --extra pipeline --extra dev --python-version 3.11.7 \
	  --python-platform x86_64-manylinux_2_34 --index-strategy unsafe-best-match --custom-compile-command "make lock" \
	  $(LOCK_ARGS) -o $(LOCK) pyproject.toml
	$(BIN)/python -m odevit.repro.machine --stamp-lock $(LOCK)

# when make started (read as it parses this file, before any install): tests/make_wall.py adds `make test`'s wall,
# the install included where it ran, to results/tests/suite.json
MAKE_T0 := $(shell date +%s.%N)
test: $(STAMP) data  # data: the published-weights test evaluates on the real Fashion-MNIST test set
	$(BIN)/python -m pytest -q; rc=$$?; $(BIN)/python tests/make_wall.py $(MAKE_T0); exit $$rc

# Fashion-MNIST comes from Debian's dataset-fashion-mnist package where apt and root are available
data:
	@test -d /usr/share/datasets/fashion-mnist || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1)) || \
	  echo "dataset-fashion-mnist not installed (no apt/root): the pipeline will try torchvision's download"; }

# `make repro` is DVC: every numbered notebook again (`dvc repro --force`: each stage re-executed; the trainer reuses
# every committed run whose run key matches params.yaml, so nothing committed is trained again), then `dvc status`.
# The full retraining is the same pipeline with results/v2's run folders moved away (resumable from each group's last.pt).
repro: $(STAMP) data
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro --force
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc status

clean-venv:
	rm -rf $(VENV)
