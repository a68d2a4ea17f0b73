#!/bin/bash
# Runs of a plan study on a lent GPU machine that has torch but no network, DVC or apt (this project's `device`
# tool): run from the repository root of a copy of the working tree, with .gpu/fmnist/*.gz (Fashion-MNIST's four
# files, e.g. from /usr/share/datasets/fashion-mnist) carried along, and .gpu/resume.tgz (a previous call's
# $OUT/runs.tgz) to go on where that call stopped. It
#   1. installs the data where odevit.repro.data looks for Debian's package, and untars .gpu/resume.tgz if any;
#   2. rebuilds 02_teacher's best.pt from the published weights, checked (python -m odevit.repro.restore), where
#      it is missing;
#   3. starts MPS, so the runner's processes share the GPU;
#   4. runs `python -m odevit.repro.runner STUDY --cells CELLS` (it refuses, before anything starts, a study whose
#      runs were made on another device: plan.yaml rules.machine) until DEADLINE seconds; a run stopped there
#      resumes from its last.pt next time;
#   5. leaves the cells' results and checkpoints in $OUT/runs.tgz.
# Then, in a clone on a machine with DVC: `tar xzf runs.tgz`, `python -m odevit.repro.runner STUDY --commit`,
# `dvc repro -s evidence publish_evidence`, `python -m odevit.repro.readme`; commit results, dvc.lock and README.
#
# usage: [TOGETHER=3 JOBS=2 THREADS=2 DEADLINE=480] bash docs/evidence/device_runs.sh STUDY CELL[,CELL...]
# e.g. the one cell left for a GPU (README, "Runs not made yet"), on an NVIDIA H200 as its study's other runs:
#   bash docs/evidence/device_runs.sh confirm_55k_40ep ce
set -euo pipefail
study=${1:?usage: device_runs.sh STUDY CELL[,CELL...]}
cells=${2:?usage: device_runs.sh STUDY CELL[,CELL...]}
: "${TOGETHER:=3}" "${JOBS:=2}" "${THREADS:=2}" "${DEADLINE:=480}" "${OUT:?OUT: the folder whose files come back}"
PY=${PY:-python3}
FMNIST=/usr/share/datasets/fashion-mnist

if [ ! -f "$FMNIST/t10k-labels-idx1-ubyte.gz" ]; then
  ls .gpu/fmnist/*.gz >/dev/null 2>&1 || { echo "error: no $FMNIST and no .gpu/fmnist/*.gz carried" >&2; exit 2; }
  mkdir -p "$FMNIST" && cp .gpu/fmnist/*.gz "$FMNIST/"
fi
if [ -f .gpu/resume.tgz ]; then
  tar xzf .gpu/resume.tgz && echo "resumed from .gpu/resume.tgz"
fi
[ -f checkpoints/02_teacher/best.pt ] || "$PY" -m odevit.repro.restore   # a second call on a warm machine has it

export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p /tmp/mps /tmp/mpslog
if command -v nvidia-cuda-mps-control >/dev/null; then
  nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on" || echo "MPS already on, or not started"
fi

rc=0
"$PY" -m odevit.repro.runner "$study" --cells "$cells" --together "$TOGETHER" --jobs "$JOBS" --threads "$THREADS" \
  --deadline "$DEADLINE" || rc=$?

IFS=, read -ra cs <<< "$cells"
keep=()
for c in "${cs[@]}"; do
  for d in "results/studies/$study/$c" "checkpoints/studies/$study/$c"; do
    [ -d "$d" ] && keep+=("$d")
  done
done
if [ ${#keep[@]} -gt 0 ]; then
  tar czf "$OUT/runs.tgz" "${keep[@]}" && echo "$OUT/runs.tgz: ${keep[*]}"
else
  echo "no run of $study cells $cells here: nothing to bring back"
fi
exit $rc
