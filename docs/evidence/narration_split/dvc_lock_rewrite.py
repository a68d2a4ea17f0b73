"""Rewrite dvc.lock for issue 53's move: md5/size of changed .py deps; new deps files.py (where pipeline.py is a dep)
and results.py (where study.py is a dep); the evidence stage: pipeline.py replaced by files.py and results.py."""
import hashlib, os, re, sys
CHANGED = sys.argv[1:]  # .py paths changed by the commit
def entry(path):
    b = open(path, 'rb').read()
    return [f"    - path: {path}", "      hash: md5", f"      md5: {hashlib.md5(b).hexdigest()}", f"      size: {len(b)}"]
lines = open('dvc.lock').read().split('\n')
out, i, n = [], 0, len(lines)
stats = {"md5": 0, "files": 0, "results": 0, "removed": 0}
stage = None
while i < n:
    l = lines[i]
    m = re.match(r'^  (\S.*):$', l)
    if m:
        stage = m.group(1)
    if l == '    deps:':
        out.append(l); i += 1
        entries = []
        while i < n and lines[i].startswith('    - '):
            e = [lines[i]]; i += 1
            while i < n and lines[i].startswith('      '):
                e.append(lines[i]); i += 1
            entries.append(e)
        paths = [e[0][len('    - path: '):] for e in entries]
        assert paths == sorted(paths), stage
        new = []
        for p, e in zip(paths, entries):
            if p in CHANGED:
                if stage == 'evidence' and p == 'odevit/repro/pipeline.py':
                    stats["removed"] += 1
                    continue
                assert len(e) == 4 and e[2].startswith('      md5: ') and e[3].startswith('      size: '), (stage, e)
                e = entry(p); stats["md5"] += 1
            new.append(e)
        add = []
        if 'odevit/repro/pipeline.py' in paths:
            add.append('odevit/repro/files.py')
        if 'odevit/repro/study.py' in paths or stage == 'evidence':
            add.append('odevit/repro/results.py')
        if stage == 'evidence':
            add.append('odevit/repro/files.py')
        for a in add:
            assert a not in paths, (stage, a)
            stats["files" if a.endswith('files.py') else "results"] += 1
            new.append(entry(a))
        new.sort(key=lambda e: e[0][len('    - path: '):])
        for e in new:
            out.extend(e)
        continue
    out.append(l); i += 1
open('dvc.lock', 'w').write('\n'.join(out))
print(stats)
