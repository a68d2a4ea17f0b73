"""Each moved function's source at 0a38797 vs its source now (byte-identical, name aside)."""
import ast, subprocess
def defs(text):
    t = ast.parse(text); lines = text.split("\n")
    out = {}
    for n in t.body:
        if isinstance(n, ast.FunctionDef):
            out[n.name] = "\n".join(lines[n.lineno - 1:n.end_lineno])
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out[n.targets[0].id] = ast.unparse(n.value)
    return out
old = lambda f: defs(subprocess.run(["git", "show", f"0a38797:odevit/repro/{f}.py"], capture_output=True, text=True).stdout)
new = lambda f: defs(open(f"odevit/repro/{f}.py").read())
moves = [("pipeline", "files", n, n) for n in ("write_json", "write_csv", "save_figure", "read_json")] + \
        [("report", "files", "write_text", "write_text"), ("study", "results", "collect", "collect"),
         ("runner", "results", "lock_holds", "lock_holds"), ("runner", "results", "kept_path", "kept_path"),
         ("runner", "results", "KEPT", "KEPT"), ("study_teacher", "results", "dirs", "teacher_dirs"),
         ("bench", "results", "VIT", "VIT"), ("bench", "results", "activation_markdown", "activation_markdown"),
         ("bench", "results", "bf16_skipped", "bf16_skipped")]
for src, dst, a, b in moves:
    o, n = old(src)[a], new(dst)[b]
    o2 = o.replace(f"def {a}(", f"def {b}(", 1)
    same = o2 == n or o2.replace("pipeline.read_json", "read_json") == n
    print(f"{src}.{a} -> {dst}.{b}: {'identical' if o2 == n else ('identical but pipeline.read_json -> read_json' if same else 'DIFFERENT')}")
