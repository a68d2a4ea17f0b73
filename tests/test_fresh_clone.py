"""A fresh clone of this repository (committed results and weights, no DVC cache, no checkpoints): the documented DVC
commands work on it, and docs/plan.md's example study is added as that page says and planned. Its own module: under
`make test`'s two workers (tests/conftest.py) a module's tests run on one worker, and this test (one of the suite's
longest) then runs beside the tiny pipeline's module instead of after it."""
import re
import shlex
import subprocess
import sys
import textwrap

import pytest
import yaml
from tiny_pipeline import ROOT, _env


@pytest.mark.slow
def test_dvc_commands_work_on_a_fresh_clone(tmp_path):
    """git clone (committed results and weights, no DVC cache, no checkpoints): status, dag, exp show, and the
    documented `dvc exp run -S ...` examples together as one dry run of the whole pipeline (`dvc exp run --dry`
    plans every stage as `dvc repro --dry` does, with the examples' params applied, so a plain `dvc repro --dry`
    beside it would repeat the same 75 CPU-s of planning on the real pipeline); docs/plan.md's example study planned
    in the other clone. Two clones, each running its commands one after another, the two at once: each command is
    one single-threaded DVC process (8-120 s on the 2-core AMD EPYC, reading the whole pipeline), and two DVC
    processes in one repository would wait on its lock."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    from concurrent.futures import ThreadPoolExecutor

    env = _env()
    readme = "\n".join((ROOT / p).read_text() for p in ("README.md", "docs/pipeline.md", "docs/results.md"))
    examples = [shlex.split(m) for m in re.findall(r"dvc exp run ((?:-S (?:'[^']*'|[^\s`$]+) ?)+)", readme)]
    assert len(examples) >= 3  # the documented `dvc exp run -S ...` examples, each checked as a dry run below
    # the examples touch different keys, so one dry run applies them all at once (each DVC process reads the whole
    # pipeline first: one run instead of one per example saves that read per example)
    # per clone, in the order run; measured on a fresh clone (AMD EPYC, 2 cores, a training run beside): exp run
    # --dry 118 s, status 27 s; repro --dry my_ablation ~80 s, exp show 17 s, dag 8 s
    cmds = [[["dvc", "exp", "run", "--dry", *(a for args in examples for a in args)], ["dvc", "status"]],
            [["dvc", "exp", "show", "--no-pager"], ["dvc", "dag"]]]
    clones = [tmp_path / f"c{i}" for i in range(2)]
    for c in clones:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(c)], check=True)
    # docs/plan.md's example study, added as its "Adding a study" says: one block in plan.yaml, one command
    # (python -m odevit.repro.stages); then DVC plans its runs (`dvc repro --dry my_ablation`, among the commands)
    doc = (ROOT / "docs/plan.md").read_text()
    block = textwrap.dedent(doc[doc.index("```yaml", doc.index("## Adding a study")) + 7:].split("```")[0])
    example = yaml.safe_load(block)
    assert list(example) == ["my_ablation"]
    with open(clones[1] / "plan.yaml", "a") as f:
        f.write(textwrap.indent(block, "  "))
    plan = yaml.safe_load((clones[1] / "plan.yaml").read_text())
    assert plan["studies"]["my_ablation"] == example["my_ablation"]
    subprocess.run([sys.executable, "-m", "odevit.repro.stages"], cwd=clones[1], env=env, check=True)
    cmds[1].insert(0, ["dvc", "repro", "--dry", "my_ablation"])  # in the clone whose plan has it

    def run_half(i):
        out = []
        for cmd in cmds[i]:
            r = subprocess.run(cmd, cwd=clones[i], env=env, capture_output=True, text=True)
            out.append((cmd, r))
        return out

    with ThreadPoolExecutor(2) as pool:
        results = [x for half in pool.map(run_half, range(2)) for x in half]
    assert len(results) == sum(map(len, cmds)) == 5
    for cmd, r in results:
        assert r.returncode == 0, f"{' '.join(cmd)}: " + r.stdout[-2000:] + r.stderr[-2000:]
    dry = next(r for cmd, r in results if cmd[-1] == "my_ablation").stdout
    runs = [f"my_ablation@{c}-{s}" for c in example["my_ablation"]["cells"] for s in example["my_ablation"]["seeds"]]
    assert all(f"Running stage '{r}'" in dry for r in runs), dry[-2000:]
