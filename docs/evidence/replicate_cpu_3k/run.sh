#!/bin/bash
# second machine type for confirm_3k (trained on one NVIDIA H100, one seed per process, 2026-11-25): its cells ref and
# free, seeds 100-102, trained again by the same code (training source 4cf0caf6, equivalent to the H100 runs'
# f95e7b27: docs/evidence/source_equivalence.json) on this 2-core CPU (AMD EPYC, 2 threads, one run at a time), in a
# clone of the repository: the runs' own stage commands through the runner. Then their results folders are copied here
# (collect() reads RESULTS/studies/STUDY), and verdicts.machine_shift compares them run by run.
set -eu
CLONE=${1:?usage: run.sh CLONE (a fresh clone of this repository)}
REPO=$(git rev-parse --show-toplevel)
mkdir -p "$CLONE/checkpoints" && cp -r "$REPO/checkpoints/02_teacher" "$CLONE/checkpoints/"  # the students' teacher
cd "$CLONE"
for c in ref free; do for s in 100 101 102; do rm -rf results/studies/confirm_3k/$c/s$s checkpoints/studies/confirm_3k/$c/s$s; done; done
python -m odevit.repro.runner confirm_3k --cells ref,free --jobs 1 --threads 2   # skips the seeds still present (103, 104)
mkdir -p "$REPO/docs/evidence/replicate_cpu_3k/studies/confirm_3k"
for c in ref free; do for s in 100 101 102; do
  mkdir -p "$REPO/docs/evidence/replicate_cpu_3k/studies/confirm_3k/$c"
  cp -r results/studies/confirm_3k/$c/s$s "$REPO/docs/evidence/replicate_cpu_3k/studies/confirm_3k/$c/"
done; done
