import pandas as pd, numpy as np, pickle, math
from scipy import stats
mine = pd.read_csv('/tmp/audit/mine.csv')
cl = pd.read_csv('/work/main/results/v2/claims.csv')
st = pickle.load(open('/tmp/audit/state.pkl','rb'))
TOL = 1e-3
out = []
allok = 0
for _, r in mine.iterrows():
    c = cl[cl.question == r.question]
    assert len(c) == 1, r.question
    c = c.iloc[0]
    res = {}
    def num(field, mv, cv):
        if (pd.isna(mv) and pd.isna(cv)): return True
        if pd.isna(mv) or pd.isna(cv): return False
        return abs(mv - cv) <= TOL
    res['n'] = int(r.n) == int(c.n)
    for f in ['mean', 'sd', 'ci_low', 'ci_high', 'margin']:
        res[f] = num(f, r[f], c[f])
    res['alpha_each'] = abs(r.alpha_each - c.alpha_each) <= 1e-4
    res['converged'] = r.conv_mine == c.converged
    res['verdict'] = r.verdict == c.verdict
    vt_c = '' if pd.isna(c.verdict_test) else c.verdict_test
    vt_m = '' if pd.isna(r.verdict_test) else r.verdict_test
    res['verdict_test'] = vt_m == vt_c
    if not pd.isna(r.get('teacher_minus_free', np.nan)) or not pd.isna(c.teacher_minus_free):
        res['teacher_minus_free'] = num('tmf', r.get('teacher_minus_free'), c.teacher_minus_free)
        res['fair'] = str(r.get('fair')) == str(c.fair)
    ok = all(res.values())
    allok += ok
    out.append((r, c, res, ok))
    if not ok: print('MISMATCH', r.question, {k: v for k, v in res.items() if not v})
print('all-field matches', allok, 'of', len(out))
# holds_across_families check (bonus): verdict_test at alpha_each/4 equals verdict_test at alpha_each, for rows with a test verdict
print('\nholds_across_families (bonus):')
for r, c, res, ok in out:
    print(r.question, c.holds_across_families)
pickle.dump(out, open('/tmp/audit/out.pkl', 'wb'))
