#!/bin/bash
# Plan v2's runs on one lent GPU machine (torch there, no network, DVC or apt): run from the repository root of a
# copy of the working tree with .gpu/fmnist/ (Fashion-MNIST's four files, the training images as .xz) carried along
# (plan 1's teacher, the weak cell's, is rebuilt from weights/ by odevit.repro.restore), and .gpu/resume.tgz
# (an earlier call's $OUT/v2_runs.tgz) to go on from. The runs are the command of plan_v2.yaml (rules.made_by):
#   python -m odevit.repro.fast plan_v2.yaml --deadline DEADLINE
# Every group stops after the epoch that passes DEADLINE seconds and resumes from its last.pt next time. Brings back
# $OUT/v2_runs.tgz (results/v2 and the teacher seeds' best.pt) and $OUT/log.txt.
# JOBS=N (> 1): the teacher first, then N processes sharing the GPU under MPS, each a shard of the cell groups
# (--shard i/N; logs $OUT/log_i.txt). A run resumes only on the device kind it started on.
# usage: [JOBS=3] DEADLINE=470 bash docs/evidence/v2_gpu.sh
set -uo pipefail
: "${DEADLINE:=470}" "${JOBS:=1}" "${OUT:?OUT: the folder whose files come back}"
export PYTHONUNBUFFERED=1
FM=/usr/share/datasets/fashion-mnist
if [ ! -f "$FM/t10k-labels-idx1-ubyte.gz" ]; then  # the training images travel as .xz (smaller: the 64 MiB limit)
  mkdir -p "$FM" && cp .gpu/fmnist/*.gz "$FM/"
  python3 -c "import lzma, gzip, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), gzip.open(sys.argv[2], 'wb', 1))" \
    .gpu/fmnist/train-images-idx3-ubyte.xz "$FM/train-images-idx3-ubyte.gz"
fi
[ -f .gpu/resume.tgz ] && tar xzf .gpu/resume.tgz && echo "resumed from .gpu/resume.tgz"
[ -f checkpoints/02_teacher/best.pt ] || python3 -m odevit.repro.restore
nvidia-smi -L; python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)"
t0=$(date +%s)
if [ "$JOBS" -gt 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
  mkdir -p /tmp/mps /tmp/mpslog
  command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS on"
  python3 -m odevit.repro.fast plan_v2.yaml --teacher-only --deadline "$DEADLINE" 2>&1 | tee "$OUT/log.txt"
  rc=${PIPESTATUS[0]}
  left=$(( DEADLINE - ($(date +%s) - t0) ))
  pids=()
  for i in $(seq 0 $((JOBS - 1))); do
    python3 -m odevit.repro.fast plan_v2.yaml --shard "$i/$JOBS" --deadline "$left" >"$OUT/log_$i.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  tail -n 3 "$OUT"/log_*.txt
else
python3 -m odevit.repro.fast plan_v2.yaml --deadline "$DEADLINE" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
fi
if [ "$JOBS" = 1 ] && [ "$rc" != 0 ] && [ "$rc" != 3 ]; then  # 3 = the deadline came first (resumable); else the CUDA-graph path failed:
  left=$(( DEADLINE - ($(date +%s) - t0) ))   # said in the log, and the rest made eagerly, never silently
  echo "FAST PATH FAILED (rc $rc): the remaining ${left} s run eagerly (--no-graphs)" | tee -a "$OUT/log.txt"
  python3 -m odevit.repro.fast plan_v2.yaml --no-graphs --deadline "$left" 2>&1 | tee -a "$OUT/log.txt"
  rc=${PIPESTATUS[0]}
fi
keep=(results/v2)
ls checkpoints/v2/teacher/s*/best.pt >/dev/null 2>&1 && keep+=(checkpoints/v2/teacher/s*/best.pt)
tar czf "$OUT/v2_runs.tgz" "${keep[@]}" && echo "$OUT/v2_runs.tgz: ${keep[*]}"
exit $rc
