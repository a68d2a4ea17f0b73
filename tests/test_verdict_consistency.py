"""No notebook, doc or README line gives a verdict that the verdict file contradicts (issue 55).

The verdict file, and the row id it is keyed by (plan 1's is retired, docs/history.md):

  plan v2    results/v2/claims.csv        (python -m odevit.repro.verdicts)   id = `question`, within a `study`

What is scanned: README.md, every docs/*.md, and every outputs/*.ipynb — its markdown cells and its outputs
(text/markdown, text/html tables, stream text; a text/plain rendering is read only where the output has no
markdown or HTML one, since pandas wraps a wide frame's columns into blocks that part a row's id from its verdict).

How a text states a verdict for an id (the matcher):

  (a) In markdown (a line of a .md file, of a notebook's markdown cell or text/markdown output): a backticked id
      (`ts_minus_free`) followed, before the next backticked id of the line or the next semicolon (the separator of
      the generated summaries' items), by an emphasised phrase (*...* or **...**) that starts with a verdict word. Every generated table and summary writes its verdicts so; a plain
      word in prose ("contradicts the paper") or in a cross-reference column (README's "plan 1" column) is not read.
  (b) In a table (a markdown table, or an HTML table of a notebook output) whose header has a column named
      "verdict": each row states that column's verdict for the row's id (a cell that is an id, backticked or not).
  (c) In stream text (prints): an id as a whole token followed, before the next id, by a verdict word.

  Verdict words (longest first, compared by the word they start with, so "inconclusive at this budget" and
  "inconclusive", "not converged (2 of 12 runs)" and "not converged" are one verdict): supports, contradicts,
  inconclusive, not converged, not measured, not a claim, fact, "holds, vacuous", holds, incomplete, mixed
  machines, mixed teachers, unfair. "equivalent" / "greater" are a question's test or direction, not verdicts.

Which verdict file a statement is judged against: a line that names a study of plan 1 or v2 (`confirm_55k`,
`v2_10k`, ...: a whole word) is judged against that study's rows; otherwise the section it sits in decides
(`SCOPES`: file, heading → verdict file; a section's subsections inherit it). A statement in a section without a
scope fails ("unscoped"): a new page that states verdicts must say which file they come from. `SKIPPED` lists the
sections that state verdicts of something else, with the reason. An id that is no row of its verdict file fails too.
The README's findings name plan-v2 rows in words, not ids: they are generated from results/v2/claims.csv
(odevit.repro.pages) and `python -m odevit.repro.pages --check` fails when they are stale; every v2 row with its id is on docs/v2.md.

  (d) The README's v2 table also has a "plan 1" column: for each v2 row, the verdict of the plan-1 row that
      docs/v2_vs_plan1.yaml says it revisits (plan 1's confirmatory row of that study and question; "–" where the
      mapping says none). `plan1_column` checks it against results/evidence/claims.csv.

The check: the stated verdict must be one of the verdicts the file gives that id (plan 1 has a confirmatory and an
exploratory row per question of a study, and its table prints both on one line, so a set: a line giving either
is consistent, one giving a third verdict is not).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import html.parser
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]

# verdict file: (path, id column, study column or None)
SOURCES = {"v2": ("results/v2/claims.csv", "question", "study"),  # plan 1's is retired (docs/history.md)
           "v3": ("results/v3/claims.csv", "question", "study")}
# (file glob, heading the section starts with; "" = the whole file) -> verdict file
SCOPES: List[Tuple[str, str, str]] = [
    ("README.md", "## Plan v3", "v3"),  # generated from results/v3/claims.csv
    ("README.md", "## What we found", "v2"),  # generated from results/v2/claims.csv (names rows in words, no ids)
    ("README.md", "### Plan v2", "v2"),
    ("docs/v2.md", "", "v2"),           # every plan-v2 row
    ("docs/v3.md", "", "v3"),           # every plan-v3 row
    ("outputs/0[2-57]_*.ipynb", "", "v2"),  # the notebooks that show the plans' rows (02-05, 07): plan v2's first,
    ("outputs/0[2-57]_*.ipynb", "## Plan v3", "v3"),  # then plan v3's, under their own heading
]
# sections that state the verdicts of something other than a verdict file: (file glob, heading) -> why
SKIPPED: Dict[Tuple[str, str], str] = {}
VERDICT_WORDS = sorted(["supports", "contradicts", "inconclusive", "not converged", "not measured", "not a claim",
                        "fact", "holds, vacuous", "holds", "incomplete", "mixed machines", "mixed teachers",
                        "unfair"], key=len, reverse=True)
_VERDICT_START = re.compile(r"\s*(" + "|".join(map(re.escape, VERDICT_WORDS)) + r")(?![\w])", re.I)
_EMPH = re.compile(r"\*\*([^*\n]+?)\*\*|(?<![*\w])\*([^*\s][^*\n]*?)\*(?![*\w])")
_TICK = re.compile(r"`([^`\n]+)`")


def canonical(verdict: str) -> Optional[str]:
    """The verdict word a phrase starts with (lower case), or None if it starts with none."""
    m = _VERDICT_START.match(str(verdict))
    return m.group(1).lower() if m else None


def load_sources(root: Path = ROOT) -> Dict[str, pd.DataFrame]:
    """Each verdict file as rows (study, id, verdict); study "" where the file has none."""
    out = {}
    for name, (path, idcol, studycol) in SOURCES.items():
        t = pd.read_csv(root / path, keep_default_na=False)
        out[name] = pd.DataFrame({"study": t[studycol] if studycol else "", "id": t[idcol], "verdict": t.verdict})
    return out


@dataclass
class Statement:
    where: str     # file:line (or file:cell:output)
    section: str   # the heading path it sits under ("" for none)
    text: str      # the unit it was read from
    id: str
    verdict: str   # as stated


class _Tables(html.parser.HTMLParser):
    """The rows of every HTML table: a list of tables, each a list of rows of cell texts (th and td alike)."""

    def __init__(self):
        super().__init__()
        self.tables: List[List[List[str]]] = []
        self._cell: Optional[List[str]] = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _strip(cell: str) -> str:
    return cell.strip().strip("*").strip("`").strip()


def _table_statements(rows: List[List[str]], ids: set) -> Iterator[Tuple[int, str, str]]:
    """(row index, id, verdict) for a table whose header names a 'verdict' column (rule b)."""
    if not rows:
        return
    header = [_strip(c).lower() for c in rows[0]]
    if "verdict" not in header:
        return
    col = header.index("verdict")
    for i, row in enumerate(rows[1:], 1):
        if col >= len(row) or not canonical(_strip(row[col])):
            continue
        found = [_strip(c) for c in row if _strip(c) in ids]
        found += [t for c in row for t in _TICK.findall(c) if t in ids and t not in found]
        for id_ in dict.fromkeys(found):
            yield i, id_, _strip(row[col])


def _markdown_statements(line: str, ids: set) -> Iterator[Tuple[str, str]]:
    """(id, verdict) for each backticked id of a line and the emphasised verdicts before the next one or the next
    semicolon (rule a)."""
    hits = [(m.start(), m.end(), m.group(1)) for m in _TICK.finditer(line) if m.group(1) in ids]
    for k, (_, end, id_) in enumerate(hits):
        stop = hits[k + 1][0] if k + 1 < len(hits) else len(line)
        semi = line.find(";", end, stop)
        stop = semi if semi >= 0 else stop
        for m in _EMPH.finditer(line, end, stop):
            phrase = m.group(1) or m.group(2)
            if canonical(phrase):
                yield id_, phrase


def _plain_statements(line: str, ids: set) -> Iterator[Tuple[str, str]]:
    """(id, verdict) for stream text: an id as a whole token, then the first verdict word before the next id (c)."""
    hits = [m for m in re.finditer(r"(?<![\w`])[A-Za-z][\w]*(?![\w])", line) if m.group(0) in ids]
    for k, m in enumerate(hits):
        stop = hits[k + 1].start() if k + 1 < len(hits) else len(line)
        v = re.search(r"(?<![\w])(" + "|".join(map(re.escape, VERDICT_WORDS)) + r")(?![\w])", line[m.end():stop], re.I)
        if v:
            yield m.group(0), v.group(1)


def _markdown_units(text: str) -> Iterator[Tuple[int, str, str, List[str]]]:
    """(line number, heading path, line, the rows of the markdown table the line closes or [])."""
    heads: List[Tuple[int, str]] = []
    table: List[List[str]] = []
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        m = re.match(r"(#{1,6})\s", line)
        if m:
            level = len(m.group(1))
            heads = [h for h in heads if h[0] < level] + [(level, line.strip())]
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                table.append(cells)
        else:
            table = []
        last_row = line.lstrip().startswith("|") and not (n < len(lines) and lines[n].lstrip().startswith("|"))
        yield n, " > ".join(h for _, h in heads), line, (table if last_row else [])


def statements(path: str, text: str, ids: set) -> Iterator[Statement]:
    """Every verdict statement of one markdown page (a table cell read by rules a and b counts once)."""
    seen = set()
    for n, section, line, table in _markdown_units(text):
        found = [(f"{path}:{n}", line, id_, v) for id_, v in _markdown_statements(line, ids)]
        found += [(f"{path}:{n - len(table) + i + 1}", " | ".join(table[i]), id_, v)  # header + separator above
                  for i, id_, v in _table_statements(table, ids)]
        for where, unit, id_, v in found:
            if (where, id_, canonical(v)) not in seen:
                seen.add((where, id_, canonical(v)))
                yield Statement(where, section, unit, id_, v)


def notebook_statements(path: str, nb: dict, ids: set) -> Iterator[Statement]:
    """Every verdict statement of an executed notebook: markdown cells, markdown / HTML / stream outputs. A code
    cell's outputs sit under the last heading of the markdown cells above it (`## Plan v3: ...` scopes plan v3)."""
    heading = ""
    for c, cell in enumerate(nb.get("cells", [])):
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            for s in statements(f"{path}:cell{c}", source, ids):
                yield s
            heading = next((ln.strip() for ln in reversed(source.splitlines()) if ln.startswith("#")), heading)
            continue
        for o, out in enumerate(cell.get("outputs", [])):
            where = f"{path}:cell{c}:out{o}"
            data = out.get("data", {})
            if "text/markdown" in data:
                for s in statements(where, "".join(data["text/markdown"]), ids):
                    yield dataclasses.replace(s, section=" > ".join(h for h in (heading, s.section) if h))
            if "text/html" in data:
                p = _Tables()
                p.feed("".join(data["text/html"]))
                for rows in p.tables:
                    for i, id_, v in _table_statements(rows, ids):
                        yield Statement(f"{where}:row{i}", heading, " | ".join(rows[i]), id_, v)
            plain = "".join(out.get("text", [])) if out.get("output_type") == "stream" else (
                "" if {"text/markdown", "text/html"} & set(data) else "".join(data.get("text/plain", [])))
            for n, line in enumerate(plain.split("\n"), 1):
                for id_, v in _plain_statements(line, ids):
                    yield Statement(f"{where}:line{n}", heading, line, id_, v)


def _scope(path: str, section: str) -> Tuple[Optional[str], Optional[str]]:
    """(verdict file, skip reason) for a statement in `section` of `path`: the innermost matching heading wins."""
    heads = section.split(" > ") if section else []
    best: Tuple[int, Optional[str], Optional[str]] = (-1, None, None)
    for glob, head, source in SCOPES:
        if fnmatch.fnmatch(path, glob):
            depth = 0 if not head else next((k + 1 for k, h in enumerate(heads) if h.startswith(head)), -2)
            if depth > best[0]:
                best = (depth, source, None)
    for (glob, head), why in SKIPPED.items():
        if fnmatch.fnmatch(path, glob):
            depth = next((k + 1 for k, h in enumerate(heads) if h.startswith(head)), -2)
            if depth > best[0]:
                best = (depth, None, why)
    return best[1], best[2]


def check(stmts: List[Statement], sources: Dict[str, pd.DataFrame]) -> Tuple[List[str], int]:
    """(one message per statement the verdict files contradict, number of statements checked)."""
    studies = {s: name for name, t in sources.items() for s in t.study.unique() if s}
    errors, checked = [], 0
    for s in stmts:
        path = s.where.split(":")[0]
        named = [st for st in studies if re.search(rf"(?<![\w]){re.escape(st)}(?![\w])", s.text)]
        if named:
            rows = pd.concat([sources[studies[st]].query("study == @st") for st in named])
            rows, what = rows[rows.id == s.id], f"study {', '.join(named)}"
        else:
            source, skip = _scope(path, s.section)
            if skip:
                continue
            if source is None:
                errors.append(f"{s.where}: `{s.id}` *{s.verdict}* in a section no verdict file is named for "
                              f"(unscoped: add it to SCOPES or SKIPPED): {s.text.strip()[:160]}")
                continue
            t = sources[source]
            rows, what = t[t.id == s.id], SOURCES[source][0]
        if rows.empty:
            errors.append(f"{s.where}: `{s.id}` is no row of {what}: {s.text.strip()[:160]}")
            continue
        checked += 1
        given = sorted(set(rows.verdict))
        if canonical(s.verdict) not in {canonical(v) for v in given}:
            errors.append(f"{s.where}: says `{s.id}` *{s.verdict}*, {what} says {' / '.join(given)}: "
                          f"{s.text.strip()[:160]}")
    return errors, checked


def scan(root: Path = ROOT, sources: Optional[Dict[str, pd.DataFrame]] = None) -> Tuple[List[str], Dict[str, int]]:
    """Check README.md, docs/*.md and outputs/*.ipynb under `root`: (errors, statements checked per file)."""
    sources = sources if sources is not None else load_sources(root)
    ids = set().union(*(set(t.id) for t in sources.values()))
    errors, counts = [], {}
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md")) + sorted((root / "outputs").glob("*.ipynb"))
    for p in pages:
        rel = p.relative_to(root).as_posix()
        if p.suffix == ".ipynb":
            stmts = list(notebook_statements(rel, json.loads(p.read_text()), ids))
        else:
            stmts = list(statements(rel, p.read_text(), ids))
        e, n = check(stmts, sources)
        errors += e
        counts[rel] = n
    return errors, counts


def plan1_column(text: str, mapping: Dict[str, Optional[dict]], plan1: pd.DataFrame) -> Tuple[List[str], int]:
    """Rule (d): in a markdown table with a "verdict" and a "plan 1" column, each row's "plan 1" cell is plan 1's
    confirmatory verdict of the row the mapping gives for the row's backticked id ("–" where it gives none)."""
    errors, checked = [], 0
    for n, _, _, table in _markdown_units(text):
        header = [_strip(c).lower() for c in table[0]] if table else []
        if "verdict" not in header or "plan 1" not in header:
            continue
        col = header.index("plan 1")
        for i, row in enumerate(table[1:], 1):
            ids = [t for c in row for t in _TICK.findall(c) if t in mapping]
            if not ids or col >= len(row):
                continue
            m, cell, where = mapping[ids[0]], _strip(row[col]), f"README.md:{n - len(table) + i + 1}"
            if not m:
                if canonical(cell):
                    errors.append(f"{where}: `{ids[0]}` revisits no plan-1 row, the plan 1 column says {cell}")
                continue
            r = plan1[(plan1.study == m["study"]) & (plan1.question == m["question"]) & (plan1.status == "confirmatory")]
            checked += 1
            if r.empty or canonical(cell) != canonical(r.verdict.iloc[0]):
                errors.append(f"{where}: `{ids[0]}`'s plan 1 column says {cell!r}, plan 1's {m['study']} / "
                              f"{m['question']} says {'nothing' if r.empty else r.verdict.iloc[0]!r}")
    return errors, checked


def test_no_readme_doc_or_notebook_line_gives_a_verdict_its_verdict_file_contradicts():
    errors, counts = scan()
    assert not errors, "\n".join(errors)
    # the matcher reads what it should: every generated verdict table is found (a broken matcher passes nothing)
    floors = {"docs/v2.md": 22}
    assert {k: counts.get(k, 0) for k in floors} == {k: max(counts.get(k, 0), v) for k, v in floors.items()}, counts


SYNTHETIC_SOURCES = {
    "plan1": pd.DataFrame({"study": ["s_55k", "s_55k", "s_3k"], "id": ["q_a", "q_a", "q_a"],
                           "verdict": ["not converged", "contradicts", "supports"]}),
    "v2": pd.DataFrame({"study": ["v2_x"], "id": ["q_v2"], "verdict": ["not converged (1 of 12 runs)"]}),
    "v3": pd.DataFrame({"study": ["v3_x"], "id": ["q_v2"], "verdict": ["supports"]}),  # the same question replicated
}
PAGE = """# A page

### Plan v2 rows

| row (`id` in claims.csv) | ours | verdict | plan 1 |
|---|---|---|---|
| label-free (`q_v2`) | +1.0 | *not converged* (ref 1/6 seeds) | supports |

### Plan 1

| s_55k | (`q_a`) | -3.06 pt: **not converged** | -3.46 pt: **contradicts** |
| s_3k | (`q_a`) | +2.05 pt: **supports** | – |
"""


def _synthetic(tmp_path: Path, page: str, outputs: Optional[dict] = None) -> List[str]:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "outputs").mkdir(exist_ok=True)
    (tmp_path / "README.md").write_text(page)
    for old in (tmp_path / "outputs").glob("*.ipynb"):  # one page and its notebooks per call
        old.unlink()
    for name, nb in (outputs or {}).items():
        (tmp_path / "outputs" / name).write_text(json.dumps(nb))
    return scan(tmp_path, SYNTHETIC_SOURCES)[0]


def _nb(verdict_html: str, verdict_md: str, verdict_print: str) -> dict:
    html_ = ("<table><thead><tr><th></th><th>claim</th><th>diff_pt</th><th>verdict</th></tr></thead><tbody>"
             f"<tr><th>0</th><td>q_v2</td><td>-6.78</td><td>{verdict_html}</td></tr></tbody></table>")
    return {"cells": [{"cell_type": "code", "source": [], "outputs": [
        {"output_type": "execute_result", "data": {"text/html": [html_], "text/plain": ["q_v2 ... contradicts"]}},
        {"output_type": "display_data", "data": {"text/markdown": [f"**What this run shows**: `q_v2` -6.78 pt: "
                                                                   f"**{verdict_md}**"]}},
        {"output_type": "stream", "name": "stdout", "text": [f"q_v2 -6.78 pt {verdict_print}\n"]}]}]}


def test_the_matcher_flips_on_a_synthetic_page(tmp_path):
    """The right page passes; each line given a wrong verdict fails, one message each, naming the line."""
    assert _synthetic(tmp_path, PAGE, {"03_x.ipynb": _nb("not converged", "not converged", "not converged")}) == []
    wrong = {"*not converged* (ref 1/6": "*supports* (ref 1/6",                # v2 table, emphasised cell
             "-3.06 pt: **not converged**": "-3.06 pt: **supports**",           # plan 1 line, its study named
             "+2.05 pt: **supports**": "+2.05 pt: **contradicts**"}             # the other study's row
    for old, new in wrong.items():
        assert old in PAGE
        errors = _synthetic(tmp_path, PAGE.replace(old, new))
        assert len(errors) == 1 and "README.md:" in errors[0], (old, errors)
    # the README's "plan 1" column is a cross-reference, not read; the same word as the verdict column is
    assert _synthetic(tmp_path, PAGE.replace("| supports |", "| contradicts |")) == []
    # notebook outputs: the HTML table's verdict column, the markdown summary, a printed line — each flips alone
    for k, args in enumerate([("contradicts", "not converged", "not converged"),
                              ("not converged", "inconclusive at this budget", "not converged"),
                              ("not converged", "not converged", "supports")]):
        errors = _synthetic(tmp_path, PAGE, {"03_x.ipynb": _nb(*args)})
        assert len(errors) == 1 and "outputs/03_x.ipynb" in errors[0], (args, errors)
    # a summary's items end at a semicolon: an item without an id does not lend its verdict to the item before
    item = "\n### Plan v2 summary\n\nfree (`q_v2`) -1 pt: **not converged**; published +2 pt: **not a claim**.\n"
    assert _synthetic(tmp_path, PAGE + item) == []
    assert len(_synthetic(tmp_path, PAGE + item.replace("**not converged**", "**supports**"))) == 1
    # a verdict in a section no verdict file is named for fails until it is scoped; an id no file holds fails
    assert any("unscoped" in e for e in _synthetic(tmp_path, PAGE + "\n## Elsewhere\n\n`q_v2` is *supports*.\n"))
    assert any("no row" in e for e in _synthetic(tmp_path, PAGE.replace("(`q_v2`)", "(`q_a`)")))


def test_a_notebook_output_under_a_plan_v3_heading_is_read_against_plan_v3(tmp_path):
    def nb(heading: str, verdict: str) -> dict:
        md = [{"cell_type": "markdown", "source": [heading]}] if heading else []
        return {"cells": md + [{"cell_type": "code", "source": [], "outputs": [{"output_type": "display_data", "data": {
            "text/markdown": [f"| row | verdict |\n|---|---|\n| `q_v2` | *{verdict}* |"]}}]}]}
    assert _synthetic(tmp_path, PAGE, {"03_x.ipynb": nb("## Plan v3: fresh seeds", "supports")}) == []
    assert len(_synthetic(tmp_path, PAGE, {"03_x.ipynb": nb("## Plan v3: fresh seeds", "contradicts")})) == 1
    assert len(_synthetic(tmp_path, PAGE, {"03_x.ipynb": nb("", "supports")})) == 1  # no heading: plan v2's row
    assert _synthetic(tmp_path, PAGE, {"03_x.ipynb": nb("## Plan v2's rows", "not converged")}) == []


@pytest.mark.parametrize("phrase, word", [("inconclusive at this budget", "inconclusive"),
                                          ("not converged (2 of 12 runs)", "not converged"),
                                          ("not measured yet (0 of 4 seeds)", "not measured"),
                                          ("holds, vacuous", "holds, vacuous"), ("Supports the paper", "supports"),
                                          ("unfair (teacher not above free)", "unfair"), ("equivalent", None),
                                          ("factor", None)])
def test_verdict_words(phrase, word):
    assert canonical(phrase) == word
