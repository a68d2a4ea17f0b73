import json, math, os
import numpy as np, pandas as pd, yaml
from scipy import stats

ROOT = '/work/main'
R = f'{ROOT}/results/v2'
plan = yaml.safe_load(open(f'{ROOT}/plan_v2.yaml'))
rules = plan['rules']; alpha = rules['alpha']; se_mult = rules['convergence']['se_multiple']

# families across ALL studies
fam_count = {}
qs = []
for sname, st in plan['studies'].items():
    for q in st['questions']:
        fam = q.get('family', st['family'])
        fam_count[fam] = fam_count.get(fam, 0) + 1
        qs.append((sname, st, q, fam))

# teacher
tseeds = plan['teacher']['seeds']
tm = {s: json.load(open(f'{R}/teacher/s{s}/metrics.json')) for s in tseeds}
vals = [tm[s]['val_acc1'] for s in tseeds]
best_val = max(vals)
tied = [s for s in tseeds if tm[s]['val_acc1'] == best_val]
sel = tied[0]  # first in plan order on a tie
t_acc = tm[sel]['acc1'] * 100
t_accs = np.array([tm[s]['acc1'] * 100 for s in tseeds])
t_sd = t_accs.std(ddof=1)
p = tm[sel]['acc1']
ret_margin = max(2 * t_sd, 2 * 100 * math.sqrt(p * (1 - p) / 10000))

def conv_check(run_dir, m):
    h = pd.read_csv(f'{run_dir}/history.csv')
    epochs = m.get('epochs', len(h))
    k = max(2, int(round(0.25 * epochs)))
    tail = h.tail(k)
    x = tail['epoch'].to_numpy(float); y = tail['val_acc1'].to_numpy(float) * 100
    slope = np.polyfit(x, y, 1)[0]
    gain = slope * k
    pbest = h['val_acc1'].max()
    thr = se_mult * 100 * math.sqrt(pbest * (1 - pbest) / 5000)
    return dict(k=k, gain=gain, thr=thr, conv=bool(gain < thr), stored=m.get('converged'),
                stored_gain=m.get('gain_floor_pts'), stored_thr=m.get('threshold_pts'),
                pbest=pbest, mval=m.get('val_acc1'), hist_len=len(h), epochs=epochs,
                epochs_run=m.get('epochs_run'))

runs = {}   # (study, cell, seed) -> metrics or None
conv = {}
def get(study, cell, seed):
    key = (study, cell, seed)
    if key not in runs:
        d = f'{R}/{study}/{cell}/s{seed}'
        if os.path.exists(f'{d}/metrics.json'):
            m = json.load(open(f'{d}/metrics.json'))
            runs[key] = m
            conv[key] = conv_check(d, m) if os.path.exists(f'{d}/history.csv') else None
        else:
            runs[key] = None
    return runs[key]

# teacher convergence too
tconv = {s: conv_check(f'{R}/teacher/s{s}', tm[s]) for s in tseeds}

UNSEEN = {'acc1_min_unseen': [4, 5, 7, 9, 10], 'acc1_min_inside': [7, 9, 10], 'acc1_min_below': [4, 5]}
metric_mismatch = []
def metric(m, name, key):
    v = m[name]
    if name in UNSEEN:
        v2 = min(m['robustness'][f'n{n}'] for n in UNSEEN[name])
        if abs(v - v2) > 1e-12: metric_mismatch.append((key, name, v, v2))
    if name.startswith('acc1_n'):
        v2 = m['robustness'][name[5:]]
        if abs(v - v2) > 1e-12: metric_mismatch.append((key, name, v, v2))
    return v * 100

rows = []
for sname, st, q, fam in qs:
    a_each = alpha / fam_count[fam]
    seeds = st['seeds']
    kind = q['kind']
    cells = [q['a']] + ([q['b']] if kind == 'paired' else [])
    d = []; missing = 0; run_keys = []
    for s in seeds:
        ms = [get(sname, c, s) for c in cells]
        for c, m in zip(cells, ms):
            if m is not None: run_keys.append((sname, c, s))
        if any(m is None for m in ms):
            missing += 1; continue
        ma = ms[0]
        if kind == 'paired':
            d.append(metric(ma, q['metric'], (sname, q['a'], s)) - metric(ms[1], q['metric'], (sname, q['b'], s)))
        elif kind == 'within':
            d.append(metric(ma, q['metric'], (sname, q['a'], s)) - metric(ma, q['metric_b'], (sname, q['a'], s)))
        elif kind == 'teacher_gap':
            d.append(metric(ma, q['metric'], (sname, q['a'], s)) - t_acc)
    margin = ret_margin if q.get('margin_rule') == 'teacher_spread' else float(q.get('margin', 0.0) or 0.0)
    # convergence over runs of all complete rows' cells (and separately all existing runs)
    all_keys = [(sname, c, s) for s in seeds for c in cells]
    existing = [k for k in all_keys if runs.get(k) is not None]
    nconv = sum(conv[k]['conv'] for k in existing)
    nconv_stored = sum(bool(runs[k]['converged']) for k in existing)
    row = dict(question=q['id'], study=sname, family=fam, test=q['test'], alpha_each=a_each,
               n=len(d), margin=margin, conv_mine=f'{nconv}/{len(existing)}',
               conv_stored=f'{nconv_stored}/{len(existing)}', expected_runs=len(all_keys))
    if missing > 0:
        row.update(mean=np.nan, sd=np.nan, ci_low=np.nan, ci_high=np.nan,
                   verdict=f'not measured yet ({len(seeds)-missing} of {len(seeds)} seeds)')
        row['verdict_test'] = ''
    else:
        d = np.array(d); n = len(d); mean = d.mean(); sd = d.std(ddof=1); se = sd / math.sqrt(n)
        t2 = stats.t.ppf(1 - a_each / 2, n - 1)
        lo, hi = mean - t2 * se, mean + t2 * se
        row.update(mean=mean, sd=sd, ci_low=lo, ci_high=hi)
        if q['test'] == 'superiority':
            vt = 'supports' if lo > 0 else 'contradicts' if hi < 0 else 'inconclusive'
        elif q['test'] == 'non_inferiority':
            vt = 'supports' if lo > -margin else 'contradicts' if hi < -margin else 'inconclusive'
        elif q['test'] == 'equivalence':
            t1 = stats.t.ppf(1 - a_each, n - 1)
            tl, th = mean - t1 * se, mean + t1 * se
            row.update(tost_low=tl, tost_high=th)
            if tl > -margin and th < margin: vt = 'supports'
            elif lo > margin or hi < -margin: vt = 'contradicts'
            else: vt = 'inconclusive'
        row['verdict_test'] = vt
        notconv = len(existing) - nconv
        fair_note = None
        if kind == 'paired':
            bcell = st['cells'][q['b']]
            if bcell and bcell.get('free'):
                free_mean = np.mean([runs[(sname, q['b'], s)]['acc1'] * 100 for s in seeds])
                row['teacher_minus_free'] = t_acc - free_mean
                row['fair'] = bool(t_acc > free_mean)
        if notconv > 0:
            row['verdict'] = f'not converged ({notconv} of {len(existing)} runs)'
        elif row.get('fair') is False:
            row['verdict'] = 'unfair (teacher below free)'
        else:
            row['verdict'] = vt
    rows.append(row)

mine = pd.DataFrame(rows)
mine.to_csv('/tmp/audit/mine.csv', index=False)
pd.set_option('display.width', 250); pd.set_option('display.max_columns', 30)
print(mine[['question','alpha_each','n','mean','sd','ci_low','ci_high','margin','conv_mine','conv_stored','verdict','verdict_test']].to_string())
print('teacher sel', sel, 'tied', tied, 't_acc', t_acc, 'sd', t_sd, 'margin', ret_margin)
print('metric mismatches', metric_mismatch)
# per-run convergence
allc = [(k, v) for k, v in conv.items() if v is not None]
dis = [(k, v) for k, v in allc if v['conv'] != bool(v['stored'])]
print('runs checked', len(allc), 'mine conv', sum(v['conv'] for _, v in allc), 'stored conv', sum(bool(v['stored']) for _, v in allc), 'disagree', len(dis))
for k, v in dis: print(k, v)
gd = max(abs(v['gain'] - v['stored_gain']) for _, v in allc); td = max(abs(v['thr'] - v['stored_thr']) for _, v in allc)
print('max |gain-stored|', gd, 'max |thr-stored|', td)
print('pbest vs metrics val', max(abs(v['pbest'] - v['mval']) for _, v in allc))
print('hist len/epochs', set((v['hist_len'], v['epochs'], v['epochs_run'], v['k']) for _, v in allc))
for s, v in tconv.items(): print('teacher', s, v)
import pickle; pickle.dump(dict(conv=conv, tconv=tconv, runs=runs, sel=sel, tied=tied, t_acc=t_acc, t_sd=t_sd, ret_margin=ret_margin, fam_count=fam_count, metric_mismatch=metric_mismatch), open('/tmp/audit/state.pkl','wb'))
