#!/bin/bash
# Plan v3's runs on one lent GPU machine (torch there; no network, DVC or apt): run from the repository root of a copy
# of the working tree, carrying .gpu/fmnist/ (Fashion-MNIST's four files, the training images as .xz) and, to go on
# from an earlier call, .gpu/resume.tgz (that call's $OUT/v3_runs.tgz). It runs the trainer the notebooks 03-05 call
# (what `dvc repro` runs there), for the studies named:
#   python -m odevit.repro.fast --studies $STUDIES --deadline $DEADLINE
# Name only studies with no run finished on another machine type: rules.machine binds a study to the type of its
# first finished run, and the trainer refuses the rest (exit 2, one line). Every group stops after the epoch that
# passes DEADLINE seconds and resumes from its last.pt on the next call. PROFILE=1 first measures one fast-path step
# at K = 8, 16, 32 seeds (benchmarks/bench.py profile: results/bench). Brings back $OUT/v3_runs.tgz (results/v3, results/bench
# and checkpoints/v3's last.pt files) and $OUT/log.txt; commit the finished cells (folders with key.json) with the
# device and date, then `dvc repro` re-executes the notebooks on them.
# usage: STUDIES="v3_10k" DEADLINE=470 [PROFILE=1] bash docs/evidence/v3_gpu.sh
set -uo pipefail
: "${DEADLINE:=470}" "${PROFILE:=0}" "${STUDIES:?STUDIES: the plan v3 studies to make here, e.g. v3_10k}"
: "${OUT:?OUT: the folder whose files come back}"
export PYTHONUNBUFFERED=1
FM=/usr/share/datasets/fashion-mnist
if [ ! -f "$FM/t10k-labels-idx1-ubyte.gz" ]; then  # the training images travel as .xz (smaller: the carry limit)
  mkdir -p "$FM" && cp .gpu/fmnist/*.gz "$FM/"
  python3 -c "import lzma, gzip, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), gzip.open(sys.argv[2], 'wb', 1))" \
    .gpu/fmnist/train-images-idx3-ubyte.xz "$FM/train-images-idx3-ubyte.gz"
fi
[ -f .gpu/resume.tgz ] && tar xzf .gpu/resume.tgz && echo "resumed from .gpu/resume.tgz"
nvidia-smi -L; python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)"
t0=$(date +%s)
[ "$PROFILE" = 1 ] && python3 benchmarks/bench.py profile 2>&1 | tee "$OUT/log.txt"
left=$(( DEADLINE - ($(date +%s) - t0) ))
# shellcheck disable=SC2086  # STUDIES is a list of names
python3 -m odevit.repro.fast --studies $STUDIES --deadline "$left" 2>&1 | tee -a "$OUT/log.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] && [ "$rc" != 2 ] && [ "$rc" != 3 ]; then  # 3: the deadline came first (resumable); 2: refused
  left=$(( DEADLINE - ($(date +%s) - t0) ))                 # else the CUDA-graph path failed: said in the log, and
  echo "FAST PATH FAILED (rc $rc): the remaining ${left} s run eagerly (--no-graphs)" | tee -a "$OUT/log.txt"
  python3 -m odevit.repro.fast --studies $STUDIES --no-graphs --deadline "$left" 2>&1 | tee -a "$OUT/log.txt"
  rc=${PIPESTATUS[0]}                                       # the rest made eagerly, never silently
fi
keep=(results/v3)
[ -d results/bench ] && keep+=(results/bench)
[ -d checkpoints/v3 ] && mapfile -t -O "${#keep[@]}" keep < <(find checkpoints/v3 -name last.pt)  # a group's, or a remedy seed's
tar czf "$OUT/v3_runs.tgz" "${keep[@]}" && echo "$OUT/v3_runs.tgz: ${keep[*]}"
exit "$rc"
