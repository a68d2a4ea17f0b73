#!/bin/bash
# second machine type: the 55k headline cells ref and free, same seeds, same code, in a copy of the tree
set -u
mkdir -p /usr/share/datasets/fashion-mnist && cp .gpu/fmnist/*.gz /usr/share/datasets/fashion-mnist/
mkdir -p checkpoints/02_teacher && cp .gpu/teacher/best.pt checkpoints/02_teacher/best.pt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog; mkdir -p /tmp/mps /tmp/mpslog
nvidia-cuda-mps-control -d && echo "MPS on"
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/rep && mkdir /tmp/rep && cp -r odevit plan.yaml params.yaml presets results checkpoints /tmp/rep/ && cd /tmp/rep && rm -rf results/studies
export PYTHONPATH=/tmp/rep PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
for c in ref free; do for s in 100 101 102 103 104; do echo "$c $s"; done; done | \
  timeout 500 xargs -P 10 -L1 sh -c 'python3 -m odevit.repro.study $0 $1 --study confirm_55k > /tmp/log_$0_$1.txt 2>&1; echo "$0 $1 rc=$?"'
tail -n 2 /tmp/log_*.txt | grep -E "==>|epoch" | tail -30
tar czf $OUT/replicate.tgz results/studies && ls -la $OUT
