#!/bin/bash
# A third machine type for confirm_3k (trained on one NVIDIA H100, one seed per process, 2026-11-25, torch 2.11.0+cu130
# as installed there; cells ref and free of seeds 100-102 re-run on a 2-core AMD EPYC CPU: docs/evidence/replicate_cpu_3k):
# all of its cells (ref, ce, free) and seeds (100-104), trained again by the same odevit code (training source
# 4cf0caf6, equivalent to the H100 runs' f95e7b27: docs/evidence/source_equivalence.json) on a 2-core Intel Xeon CPU
# (AVX-512 with FP16/BF16 units: other vector units than the AMD EPYC's), 2 threads, one run at a time, torch of
# requirements.lock, in a clone of the repository, through the runs' own stage commands (the runner). The students'
# teacher is 02_teacher's best.pt rebuilt from its published weights (python -m odevit.repro.restore: the same
# tensors, checked by sha256 and by its test Acc@1), because this machine's DVC cache does not hold it. Registered in
# plan.yaml (replicates) and committed before any of its runs started. Results folders are then copied here
# (verdicts.collect reads RESULTS/studies/STUDY) and `dvc repro -s evidence` + `python -m odevit.repro.readme` compare
# them seed by seed (results/evidence/machine_shift.csv, the README's "Does the machine move the results?").
#
#     docs/evidence/replicate_xeon_3k/run.sh /path/to/fresh/clone      # PY=... picks another interpreter
#
# The committed runs were made by this script as first committed (e7fa9cc), in a fresh clone (/work/xeon), so the
# restore ran there too; after a review it was made safer: it now always rebuilds the teacher, keeps restore's output
# with the file's sha256 (restore.txt; for the committed runs written from that run's log and the clone's file) and
# lscpu (lscpu.txt, read on the same machine afterwards), and clears a results folder before copying into it. A failed
# run stops it (set -e) before anything is copied. Those edits were saved while the first version still ran, which bash
# reads as it goes: its runs all finished, then its copy step failed on the changed file ("syntax error"), and the
# results were copied by hand with the copy loop below.
set -eu
CLONE=${1:?usage: run.sh CLONE (a fresh clone of this repository)}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
PY=${PY:-"$REPO/.venv/bin/python"}
[ "$(cd "$CLONE" && pwd -P)" != "$(cd "$REPO" && pwd -P)" ] || { echo "CLONE must not be this repository" >&2; exit 2; }
cd "$CLONE"
export PYTHONPATH="$PWD"   # the clone's code, not an editable install's
OUT="$REPO/docs/evidence/replicate_xeon_3k"
rm -f checkpoints/02_teacher/best.pt && "$PY" -m odevit.repro.restore | tee "$OUT/restore.txt"   # the students' teacher, checked
sha256sum checkpoints/02_teacher/best.pt >> "$OUT/restore.txt"
lscpu > "$OUT/lscpu.txt"   # the CPU model and its vector units (flags), which the runs' provenance names only in part
for c in ref ce free; do for s in 100 101 102 103 104; do rm -rf results/studies/confirm_3k/$c/s$s checkpoints/studies/confirm_3k/$c/s$s; done; done
"$PY" -m odevit.repro.runner confirm_3k --cells ref,free --jobs 1 --threads 2   # ts_minus_free's cells first
"$PY" -m odevit.repro.runner confirm_3k --cells ce --jobs 1 --threads 2
for c in ref ce free; do for s in 100 101 102 103 104; do
  mkdir -p "$OUT/studies/confirm_3k/$c" && rm -rf "$OUT/studies/confirm_3k/$c/s$s"
  cp -r results/studies/confirm_3k/$c/s$s "$OUT/studies/confirm_3k/$c/"
done; done
