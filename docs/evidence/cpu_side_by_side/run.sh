#!/bin/bash
# Side by side on one CPU: the quick-run cells ref and free (seed 0, 6,000 images x 2 epochs, params.yaml as committed)
# trained by the code BEFORE a change and by this checkout's (AFTER), alternating ORDER (default A B B A A B B A) per
# cell so that drift in the machine's speed falls on both, each run alone on the machine at THREADS threads. Each run's history.csv,
# timing.json and metrics.json go to raw/ROUND_VERSION_CELL/; extract.py makes runs.csv and summary.md.
#   bash docs/evidence/cpu_side_by_side/run.sh ce4d61d [THREADS]     # from the repository root; minutes
set -eu
BEFORE=$1; THREADS=${2:-2}
ROOT=$PWD; HERE=$ROOT/docs/evidence/cpu_side_by_side; PY=${PY:-$ROOT/.venv/bin/python}
rm -rf "$HERE/raw" && mkdir -p "$HERE/raw"
for v in before after; do
  rm -rf /tmp/sbs_$v; git worktree remove --force /tmp/sbs_$v 2>/dev/null || true
  git worktree add -q /tmp/sbs_$v $([ $v = before ] && echo $BEFORE || echo HEAD)
  ln -s $ROOT/data /tmp/sbs_$v/data; mkdir -p /tmp/sbs_$v/checkpoints
  cp -r $ROOT/checkpoints/02_teacher /tmp/sbs_$v/checkpoints/
done
[ -z "$(git status --porcelain --untracked-files=no -- odevit)" ] || echo "note: AFTER = HEAD, not the uncommitted odevit/"
(git rev-parse --short $BEFORE; git rev-parse --short HEAD) > $HERE/raw/revisions.txt
for cell in ref free; do
  r=0
  for v in $(echo ${ORDER:-ABBAABBA} | sed 's/A/before /g; s/B/after /g'); do
    r=$((r + 1)); w=/tmp/sbs_$v
    rm -rf $w/checkpoints/cells $w/results/cells/$cell/s0
    uptime > $HERE/raw/load_${r}_${v}_${cell}.txt
    (cd $w && OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS $PY -m odevit.repro.study $cell 0 > /dev/null 2>&1)
    mkdir -p $HERE/raw/${r}_${v}_${cell}
    cp $w/results/cells/$cell/s0/{history.csv,timing.json,metrics.json} $HERE/raw/${r}_${v}_${cell}/
    mv $HERE/raw/load_${r}_${v}_${cell}.txt $HERE/raw/${r}_${v}_${cell}/load_before.txt
    echo "$cell round $r $v: $(tail -n 1 $w/results/cells/$cell/s0/history.csv | cut -c1-80)"
  done
done
$PY -c "from odevit.repro.machine import machine_info; import json; print(json.dumps(machine_info(), indent=1, default=str))" > $HERE/raw/machine.json
for v in before after; do git worktree remove --force /tmp/sbs_$v; done
$PY $HERE/extract.py
