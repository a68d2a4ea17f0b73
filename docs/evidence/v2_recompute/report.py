import pickle, pandas as pd, numpy as np
out = pickle.load(open('/tmp/audit/out.pkl','rb')); st = pickle.load(open('/tmp/audit/state.pkl','rb'))
def f(x, d=4):
    return '' if pd.isna(x) else f'{x:.{d}f}'
L = []
L.append('# Plan v2 independent recompute: results/v2/claims.csv\n')
L.append('Auditor: an independent script (/tmp/audit/recompute.py, compare.py, extra.py) that reads only plan_v2.yaml and the raw results/v2 files (metrics.json, history.csv, teacher files). It does not read or import anything under odevit/. Tolerance: 1e-3 pt.\n')
L.append('## Summary\n')
n_ok = sum(o[3] for o in out)
L.append(f'- **{n_ok} of {len(out)} rows match claims.csv on every field**: n, mean, sd, ci_low, ci_high, margin, alpha_each, converged count, verdict, verdict_test, and for the headline rows teacher_minus_free and fair. There are **no disagreements**. The largest absolute numeric difference is 4.8e-5 pt, which is within the 4-decimal rounding of claims.csv.')
L.append('- Per-run convergence from history.csv: 72 student runs plus 3 teacher runs. My decision agrees with the `converged` field on **75/75** runs (64/72 students converged, 8 not; 3/3 teachers converged). My gain matches `gain_floor_pts` to within 5e-14 and my threshold matches `threshold_pts` exactly. The best val_acc1 in history.csv equals val_acc1 in metrics.json for every run.')
L.append(f"- Teacher: the selected seed is {st['sel']} with test acc1 {st['t_acc']:.2f} pt. The SD of the three teacher seeds is {st['t_sd']:.4f} pt. The retention margin is max(2×0.2901, 2×100×sqrt(.9065×.0935/1e4)) = {st['ret_margin']:.4f} pt. **Seeds 2900 and 2901 tie exactly on val_acc1 (0.9094)**; see Ambiguities.")
L.append('- Bonferroni denominators are counted over all studies: v2_headline 9 (α_each 0.005556), v2_steps 10 (0.005), v2_design 2 (0.025), v2_teacher_strength 1 (0.05).')
L.append('- Every derived metric checks out against the robustness dict: acc1_n6, acc1_n12, acc1_n24, and acc1_min_unseen/inside/below, each recomputed as the min over n{4,5,7,9,10}, n{7,9,10} and n{4,5}. acc1 equals acc1_n12 in all 72 runs. Only the listed seeds exist on disk.')
L.append('- Fairness: no headline row is unfair. Teacher minus free mean is +16.27 pt at 1k, +10.32 at 3k and +5.60 at 10k; 55k is not measured.')
L.append('- Bonus check of holds_across_families (α_each/4): ce_minus_free_1k has interval [2.498, 4.102] and unseen_free has [−12.778, −2.229]. Both rows therefore hold, as claims.csv says.\n')
L.append('## Row table (mine / claims.csv)\n')
L.append('| question | family | α_each | n | mean | sd | ci_low | ci_high | margin | converged | verdict | verdict_test | match |')
L.append('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for r, c, res, ok in out:
    def pair(a, b, d=4): return f'{f(a,d)} / {f(b,d)}' if not (pd.isna(a) and pd.isna(b)) else '– / –'
    vt_c = '' if pd.isna(c.verdict_test) else c.verdict_test
    vt_m = '' if pd.isna(r.verdict_test) else r.verdict_test
    L.append(f'| {r.question} | {r.family} | {r.alpha_each:.6f} / {c.alpha_each} | {int(r.n)} / {int(c.n)} | {pair(r["mean"], c["mean"])} | {pair(r.sd, c.sd)} | {pair(r.ci_low, c.ci_low)} | {pair(r.ci_high, c.ci_high)} | {pair(r.margin, c.margin)} | {r.conv_mine} / {c.converged} | {r.verdict} / {c.verdict} | {vt_m or "–"} / {vt_c or "–"} | {"yes" if ok else "NO"} |')
L.append('\nTOST (1−2α) intervals for the equivalence rows (margin ±1 pt). Mine; claims.csv does not list them:\n')
L.append('| question | tost_low | tost_high |'); L.append('|---|---|---|')
mine = pd.read_csv('/tmp/audit/mine.csv')
for _, r in mine.iterrows():
    if not pd.isna(r.tost_low): L.append(f'| {r.question} | {r.tost_low:.4f} | {r.tost_high:.4f} |')
L.append('\nFairness (teacher 90.65 pt minus the free cell\'s mean acc1), mine / claims: 1k 16.2717 / 16.2717, 3k 10.3217 / 10.3217, 10k 5.6017 / 5.6017. All fair.\n')
L.append('## Disagreements\n')
L.append('None. No row differs on any compared field.\n')
L.append('## Per-run convergence check\n')
L.append('Method: take the last round(0.25×epochs) epochs, which is 38 at 150 epochs, 15 at 60 and 10 at 40. Fit an OLS slope of val_acc1×100 against epoch and set gain = slope×k. Threshold = 1.0×100×sqrt(p(1−p)/5000), with p the best val_acc1 in history. A run is converged iff gain < threshold.\n')
L.append('| group | runs | converged (mine) | converged (metrics.json) | disagreements |'); L.append('|---|---|---|---|---|')
conv = st['conv']
grp = {}
for k, v in conv.items():
    if v is None: continue
    g = grp.setdefault((k[0], k[1]), [0, 0, 0, 0]); g[0] += 1; g[1] += v['conv']; g[2] += bool(v['stored']); g[3] += v['conv'] != bool(v['stored'])
for (s, c), g in grp.items(): L.append(f'| {s}/{c} | {g[0]} | {g[1]} | {g[2]} | {g[3]} |')
L.append(f'| teacher | 3 | {sum(v["conv"] for v in st["tconv"].values())} | {sum(bool(v["stored"]) for v in st["tconv"].values())} | 0 |')
L.append('| **total** | **75** | **67** | **67** | **0** |\n')
L.append('Runs that are not converged (gain / threshold, pt):')
for k, v in conv.items():
    if v and not v['conv']: L.append(f'- {k[0]}/{k[1]}/s{k[2]}: {v["gain"]:.4f} / {v["thr"]:.4f}')
L.append('\nClosest calls: v2_1k/ref/s2104 is 0.5845 against 0.5860 (converged). v2_3k/ref/s2203 is 0.5411 against 0.5426 (converged). v2_10k/remedy/s2303 is 0.5345 against 0.5393 (converged). v2_10k/ref/s2302 is 0.5382 against 0.5195 (not converged).\n')
L.append('## Ambiguities in the plan (none changes a current verdict)\n')
L.append('1. **Teacher tie-break.** Teacher seeds 2900 and 2901 have identical val_acc1 (0.9094 = 4547/5000; both best at epoch 37). The plan says "the one with the best VALIDATION Acc@1 teaches" and gives no tie rule. selected.json and every student\'s teacher_sha256 use 2900, the first seed in plan order. 2900 also has the higher test acc1 (90.65 against 90.37), so a reader cannot tell from the outputs whether the test set broke the tie. The plan forbids using the test set for selection. If 2901 had been picked, the retention margin would be 0.5900 instead of 0.5823 and teacher minus free would fall by 0.28 pt at every budget. Fairness would be unchanged, and retention_55k is not measured yet. The students were in fact distilled from 2900, so the analysis is consistent with the training.')
L.append('2. **Converged count for a row with missing runs.** strong_minus_weak_teacher has no ref_weak runs. claims.csv reports "4/6", counting only the existing ref runs; I do the same. The plan does not say whether the denominator should be 12 (the runs the row needs) or whether the row should show nothing. The verdict is "not measured yet" regardless, because that status takes precedence.')
L.append('3. **Verdict precedence.** The plan lists "not converged", "unfair" and a test verdict without fixing an order. claims.csv, its commit message and I all use: not measured yet, then not converged, then unfair, then the test verdict. Under that order, several rows show "not converged" while their test verdict (kept in the verdict_test column) is decisive: ts_minus_free_1k supports, ts_minus_free_10k contradicts, and both design rows contradict, among others.')
L.append('4. **Unfair label wording.** The plan says "unfair (teacher not above free)" and the brief says "unfair (teacher below free)". No row is unfair, so this could not be checked against claims.csv.')
L.append('5. **Convergence window and gain definition.** "Last 25 % of the epochs" uses round(), and 37.5 rounds to 38 under both half-even and half-up. With floor (37 epochs), v2_1k/ref/s2104 would flip to not converged; its row is already not converged. "Slope times their number" is read as slope×k. With slope×(k−1), the span from the first to the last floor epoch, v2_10k/ref/s2302 would flip to converged; its rows have other non-converged runs, so no verdict changes. p is the best val_acc1 over all epochs, which equals metrics.json val_acc1.')
L.append('6. **Equivalence "contradicts"** is read as the two-sided (1−α) interval not overlapping [−m, m], that is, low > m or high < −m.')
L.append('7. **Within-kind rows count only cell a\'s runs** for convergence (6 runs). Paired rows count both cells (12 runs). claims.csv does the same.')
open('/tmp/v2_recompute_report.md', 'w').write('\n'.join(L) + '\n')
