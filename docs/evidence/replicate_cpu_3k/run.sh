#!/bin/bash
# Second machine type for confirm_3k (trained on one NVIDIA H100, one seed per process, 2026-11-25, torch 2.11.0+cu130
# as installed there): its cells ref and free, seeds 100-102, trained again by the same odevit code (training source
# 4cf0caf6, equivalent to the H100 runs' f95e7b27: docs/evidence/source_equivalence.json) on this 2-core CPU (AMD
# EPYC, 2 threads, one run at a time, torch of requirements.lock), in a clone of the repository, through the runs' own
# stage commands (the runner). Their results folders are then copied here (verdicts.collect reads
# RESULTS/studies/STUDY) and `dvc repro -s evidence` + `python -m odevit.repro.readme` compare them seed by seed
# (results/evidence/machine_shift.csv, the README's "Does the machine move the results?").
#
#     docs/evidence/replicate_cpu_3k/run.sh /path/to/fresh/clone      # PY=... picks another interpreter
#
# The committed runs were made on 2026-11-26 by these steps typed by hand (the clone /work/runs3, main's .venv, the
# clone as the working directory); this script was written down from them afterwards and made safer (interpreter,
# PYTHONPATH, the guard below). Each run's metrics.json records the source that trained it (4cf0caf6).
set -eu
CLONE=${1:?usage: run.sh CLONE (a fresh clone of this repository)}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
PY=${PY:-"$REPO/.venv/bin/python"}
[ "$(cd "$CLONE" && pwd -P)" != "$(cd "$REPO" && pwd -P)" ] || { echo "CLONE must not be this repository" >&2; exit 2; }
mkdir -p "$CLONE/checkpoints" && cp -r "$REPO/checkpoints/02_teacher" "$CLONE/checkpoints/"  # the students' teacher
cd "$CLONE"
export PYTHONPATH="$PWD"   # the clone's code, not an editable install's
for c in ref free; do for s in 100 101 102; do rm -rf results/studies/confirm_3k/$c/s$s checkpoints/studies/confirm_3k/$c/s$s; done; done
"$PY" -m odevit.repro.runner confirm_3k --cells ref,free --jobs 1 --threads 2 --other-machine   # skips the seeds still present (103, 104)
# (--other-machine added 2026-11-26, after its runs: the runner now leaves out a study's runs on another device than
# its finished ones, here the H100's ce and seeds 103-104, unless told the runs are a replicate)
for c in ref free; do for s in 100 101 102; do
  mkdir -p "$REPO/docs/evidence/replicate_cpu_3k/studies/confirm_3k/$c"
  cp -r results/studies/confirm_3k/$c/s$s "$REPO/docs/evidence/replicate_cpu_3k/studies/confirm_3k/$c/"
done; done
