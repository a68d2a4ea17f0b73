# Two commands: `make repro` (the whole pipeline, offline default) and `make test`. Both bootstrap .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test repro data clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (odevit)" >/dev/null
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP) data  # data: the published-weights test evaluates on the real Fashion-MNIST test set
	$(BIN)/python -m pytest -q

# Fashion-MNIST comes from Debian's dataset-fashion-mnist package where apt and root are available
data:
	@test -d /usr/share/datasets/fashion-mnist || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1)) || \
	  echo "dataset-fashion-mnist not installed (no apt/root): the pipeline will try torchvision's download"; }

repro: $(STAMP) data  # results/run.json: this machine and the wall time of the dvc repro (README's run time)
	t0=$$(date +%s) && PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro && $(BIN)/python -m odevit.readme --record-run $$t0
	$(BIN)/python -m odevit.readme  # the README's result sections, from the results files just written

clean-venv:
	rm -rf $(VENV)
