# Two commands: `make repro` (the whole pipeline, offline default) and `make test`. Both bootstrap .venv from the
# hashed lock (requirements.lock); `make lock` refreshes the lock from pyproject.toml.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lock test repro quick plan-v2 evidence evidence-gpu study data clean-venv

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

# `make repro`: every notebook and verdict again from the committed runs (nothing committed is trained again: the
# stages below only read results), then a slice of committed plan-v2 runs retrained here and set beside them
# (odevit.repro.slice: the first SLICE_EPOCHS epochs of v2_1k's ref and free, seeds 2100 and 2101). 06_dynamics reads
# plan v2's published models (params.yaml dynamics.weights: published, weights/v2, in git). The stages that
# train (02_teacher, the quick run's cells, the plans' studies) keep their committed outputs; the full retraining is
# `make plan-v2` (on a GPU: docs/evidence/v2_gpu.sh) and `make evidence` (plan 1). The reading stages run by their
# dvc.yaml commands (odevit.repro.reread: no DVC work between them); dvc.lock is left as committed (recording the new
# outputs, `dvc commit` of those stages, took 5 min of a 20.8-min make repro on 2 cores, 2026-11-27, before 4 of its
# notebooks were removed). results/repro_time.json: the wall.
READ_STAGES := 01_data evidence 03_v2_teacher 04_v2_budget 05_v2_steps 06_dynamics 07_v2_design 08_v2_verdicts html
SLICE_EPOCHS ?= 3
repro: $(STAMP) data
	t0=$$(date +%s) && $(BIN)/python -m odevit.repro.verdicts2 && \
	  PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m odevit.repro.reread $(READ_STAGES) && \
	  $(BIN)/python -m odevit.repro.slice --epochs $(SLICE_EPOCHS) && \
	  $(BIN)/python -m odevit.repro.readme && \
	  $(BIN)/python -m odevit.repro.slice --record-wall $$t0

# the quick run (plan 1's teacher, the study cells of params.yaml, 06_dynamics on them and weights/quick, on a CPU budget
# where no student finishes learning: the code path, no verdicts; docs/results.md); results/run.json: this machine and
# the wall time of the dvc repro
quick: $(STAMP) data
	t0=$$(date +%s) && PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro 06_dynamics publish html && $(BIN)/python -m odevit.repro.readme --record-run $$t0
	$(BIN)/python -m odevit.repro.readme

# plan v2 in full (plan_v2.yaml rules.made_by): every run, resumable from each group's last.pt; on the GPU if any
plan-v2: $(STAMP) data
	$(BIN)/python -m odevit.repro.fast plan_v2.yaml
	$(BIN)/python -m odevit.repro.verdicts2
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc commit -f v2_verdicts $$($(BIN)/python -c "import yaml; \
	  from odevit.repro.stages import v2_run_stages; print(*v2_run_stages(yaml.safe_load(open('plan_v2.yaml'))))")
	$(BIN)/python -m odevit.repro.publish --v2
	$(BIN)/python -m odevit.repro.readme

# the evidence: every study of plan.yaml (one cached, resumable DVC stage per study, cell and seed) and the verdicts
# computed from the plan (results/evidence/; docs/plan.md), and the plan's runs published as weights (weights/evidence).
# The runs not finished yet are trained by their stages' own commands through the runner (odevit.repro.runner, which
# lists and leaves out what this machine must not make: a study whose runs were made on another machine type, cells
# of a study teacher that is not here), then recorded in dvc.lock (runner --commit, which refuses a run trained by
# other code), then the evidence stages. Not a plain `dvc repro`: a fresh clone has no checkpoints (no DVC remote), so
# DVC would train 02_teacher again and every study after it on that other teacher; the checked rebuild of its
# checkpoint from the DVC cache where this machine has it, else from the published weights (odevit.repro.restore),
# comes first instead. Hours of training on a 2-core CPU
# where runs are pending (one at a time, all cores); a stopped command resumes each run from its last.pt.
EVIDENCE_RUN ?= --jobs 1 --threads $$(nproc)
evidence: $(STAMP) data
	test -f checkpoints/02_teacher/best.pt || PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc checkout 02_teacher 2>/dev/null || \
	  $(BIN)/python -m odevit.repro.restore  # from this machine's DVC cache, else rebuilt from the published weights
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m odevit.repro.runner all $(EVIDENCE_RUN)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m odevit.repro.runner all --commit
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro -s evidence publish_evidence
	$(BIN)/python -m odevit.repro.readme  # the README's result sections, from the evidence just computed

# a new study, after its block in plan.yaml (docs/plan.md, "Adding a study"): `make study NAME=my_ablation` generates
# its dvc.yaml stages, trains its pending runs (stopped, it resumes each from its last.pt), records them in dvc.lock
# and writes the verdicts and the README's result sections, as `make evidence` does for every study.
ifneq ($(filter study,$(MAKECMDGOALS)),)  # checked when the Makefile is read: before any install or data step
ifeq ($(strip $(NAME)),)
$(error make study NAME=STUDY: the name of a study in plan.yaml)
endif
ifneq ($(words $(NAME)),1)
$(error make study NAME=$(NAME): one study name)
endif
ifeq ($(NAME),all)
$(error make study NAME=all: every study is `make evidence`)
endif
endif
study: $(STAMP) data
	$(BIN)/python -m odevit.repro.stages
	test -f checkpoints/02_teacher/best.pt || PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc checkout 02_teacher 2>/dev/null || \
	  $(BIN)/python -m odevit.repro.restore
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m odevit.repro.runner $(NAME) $(EVIDENCE_RUN)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m odevit.repro.runner $(NAME) --commit
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro -s evidence
	$(BIN)/python -m odevit.repro.readme

# the same on one CUDA GPU, the fast way (README "Two commands"): up to TOGETHER seeds of a cell trained as one batched
# model per process (runner --together) and JOBS processes sharing the GPU under MPS. A failed run stops it before
# the commit (runner exits 1; its log.txt says why).
TOGETHER ?= 16
JOBS ?= 4
evidence-gpu: $(STAMP) data
	@$(BIN)/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'evidence-gpu: torch sees no CUDA GPU here (make evidence trains the same stages on any machine)')"
	command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d 2>/dev/null || true  # processes share the GPU (MPS daemon: stays up; echo quit | nvidia-cuda-mps-control stops it)
	$(MAKE) evidence EVIDENCE_RUN="--together $(TOGETHER) --jobs $(JOBS) --threads 2"

clean-venv:
	rm -rf $(VENV)
