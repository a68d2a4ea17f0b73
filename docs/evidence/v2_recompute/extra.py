import pandas as pd, numpy as np, pickle, math, json
from scipy import stats
st = pickle.load(open('/tmp/audit/state.pkl','rb'))
mine = pd.read_csv('/tmp/audit/mine.csv'); cl = pd.read_csv('/work/main/results/v2/claims.csv')
m = mine.merge(cl, on='question', suffixes=('_m','_c'))
for f in ['mean','sd','ci_low','ci_high','margin','alpha_each']:
    print(f, 'max abs diff', np.nanmax(np.abs(m[f+'_m']-m[f+'_c'])))
print('tmf diff', np.nanmax(np.abs(m['teacher_minus_free_m']-m['teacher_minus_free_c'])))
print(mine[['question','tost_low','tost_high','teacher_minus_free','fair']].to_string())
# non-converged runs and closest calls
conv = st['conv']
rows = sorted([(k, v) for k, v in conv.items() if v], key=lambda kv: abs(kv[1]['gain']-kv[1]['thr']))
print('not converged runs:')
for k, v in conv.items():
    if v and not v['conv']: print(' ', k, round(v['gain'],4), round(v['thr'],4))
print('closest 6 to threshold:')
for k, v in rows[:6]: print(' ', k, round(v['gain'],4), round(v['thr'],4), v['conv'])
# alternative k (half-up vs banker's) irrelevant: 37.5 -> 38 both ways; check k=37 sensitivity for 1k
import pandas as pd
for k, v in conv.items():
    if v and v['epochs']==150:
        h = pd.read_csv(f'/work/main/results/v2/{k[0]}/{k[1]}/s{k[2]}/history.csv')
        for kk in (37,):
            t = h.tail(kk); s = np.polyfit(t.epoch, t.val_acc1*100, 1)[0]
            if (s*kk < v['thr']) != v['conv']: print('k=37 would flip', k)
# alternative gain = slope*(k-1)
flip = [k for k, v in conv.items() if v and ((v['gain']/v['k']*(v['k']-1) < v['thr']) != v['conv'])]
print('flips if gain=slope*(k-1):', flip)
# holds_across_families bonus
plan_alpha = 0.05
for q in ['ce_minus_free_1k','unseen_free']:
    r = mine[mine.question==q].iloc[0]
    a4 = r.alpha_each/4; n=int(r.n); se=r.sd/math.sqrt(n)
    t2 = stats.t.ppf(1-a4/2, n-1); lo, hi = r['mean']-t2*se, r['mean']+t2*se
    print('alpha/4', q, a4, lo, hi)
# teacher tie sensitivity
tm = {s: json.load(open(f'/work/main/results/v2/teacher/s{s}/metrics.json')) for s in (2900,2901,2902)}
for s in (2900,2901):
    p = tm[s]['acc1']; print('if teacher', s, 'margin', max(2*st['t_sd'], 200*math.sqrt(p*(1-p)/10000)), 'acc', p*100)
    h = pd.read_csv(f'/work/main/results/v2/teacher/s{s}/history.csv'); print('  hist max val', h.val_acc1.max(), 'epoch', h.val_acc1.idxmax()+1, 'best_epoch', tm[s]['best_epoch'])
sel = json.load(open('/work/main/results/v2/teacher/selected.json')); print(sel['seed'], sel['acc1'], sel['seed_sd_pts'])
# student teacher hash
import glob
hs = set(json.load(open(f))['teacher_sha256'] for f in glob.glob('/work/main/results/v2/v2_*/*/s*/metrics.json'))
print('student teacher hashes', hs, 'teacher 2900 sha', tm[2900]['sha256'])
# extra seed dirs?
import os
for f in glob.glob('/work/main/results/v2/v2_*/*/s*'): pass
print(sorted(set(os.path.basename(f) for f in glob.glob('/work/main/results/v2/v2_*/*/s*'))))
# free means per study
for study in ['v2_1k','v2_3k','v2_10k']:
    fm = np.mean([json.load(open(f))['acc1']*100 for f in glob.glob(f'/work/main/results/v2/{study}/free/s*/metrics.json')])
    print(study, 'free mean', fm, 'teacher - free', st['t_acc']-fm)
