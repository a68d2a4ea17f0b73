"""Every result-like number in the prose of README.md and docs/*.md is backed by a committed file it can come from.

What is read. The hand-written prose and hand-written tables of README.md and of every docs/*.md but docs/paper.md
(the paper's quoted numbers, each with its source: a source here, not a checked page). Set aside: the generated
sections (`<!-- NAME -->` ... `<!-- /NAME -->`: `python -m odevit.repro.pages --check` checks each against the results files), code
blocks, inline code, links, URLs, dates, commit hashes, versions, arXiv ids, section numbers, scientific notation.

What is checked. Each number that reads as a result: one with decimals (`0.990`, `8.5 s`), a sign (`+4.65 pt`,
`−0.29`), or a unit of accuracy, time or ratio (`98 %`, `45 minutes`, `55×`); a number without a unit takes the
unit of the range or list it starts (`37–63 min`, `85.15 / 86.41 %`, `2.5–3.2k`). It must match, to its printed
precision (8.5 s: within ±0.05 s, strictly), a value of a source its paragraph (or list item, or table row) can
draw on:
  * always: the page's own generated sections, and the config files params.yaml, plan.yaml, presets/*.yaml (their
    values, not their comments; a config value is matched exactly, not rounded);
  * the committed data files the paragraph names (CSV, JSON, YAML, Markdown under results/, docs/evidence/ but its
    README, weights/*/manifest.json): a file, a file glob (`results/cells/{ref,free}/s*/metrics.json`), a bare file
    name (`timing.json`: every committed one), or a folder / folder glob (`docs/evidence/converged_fmnist/`,
    `docs/evidence/budget_fmnist_*`), which stands for its summary files, not its per-epoch / per-step tables
    (history.csv, ...: those must be named); a page it names (`docs/results.md`, "README") lends its generated
    sections; a paragraph on the paper (paper, abstract, authors) may quote docs/paper.md;
  * or tests/doc_numbers_allow.yaml: a short list of numbers no file holds (quoted from an issue, a code constant,
    a value derived in the prose), each entry with its page, numbers and source; an entry no longer needed fails.
Matching: a number printed in a source matches with as many or more decimals (87.82 backs 87.8); a number stored in
CSV/JSON matches when it rounds to it; a percentage or Acc@1 points may be a stored fraction (87.1 % = 0.871); a time
is compared in seconds with time values only (timing.json, notebook_times.json, run.json, keys and columns named
*_s, *time*, wall, total, and numbers written with a time unit), and a time in min or h only with durations of a
whole run or stage (total, wall, stage sums, a time written in min or h); an unsigned number may be the magnitude
of a signed value (“fell 0.9 pt”), a signed one must match with its sign.

What it cannot check. Integers without a unit (counts and config values such as `patience 15`, `3 seeds`, `N = 12`,
`3,778,660 parameters`: small integers are in every file, so a match would prove nothing; state such values in a
generated section, as the budget curve's stopping rules are); numbers in code, figures and notebooks; arithmetic
done in the prose (a span, a ratio, a mean) unless a source prints its result; and whether the matching value is
the one the sentence means: any value of the scoped sources that rounds to the number backs it, so a number taken
from the wrong row of a cited file, or a coarse one (`0.8`, `1 pt`, `37 min`) that some neighbour matches, passes
(run this file to see what backs each number). It catches numbers that none of the files a paragraph can draw on
holds: a stale figure, a typo, a number from a session that was never committed.

`python tests/test_doc_numbers.py [DOC ...]` lists every checked number with the value and source that back it.
"""
from __future__ import annotations

import bisect
import csv
import fnmatch
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ALLOW = ROOT / "tests/doc_numbers_allow.yaml"

# ---------------------------------------------------------------------------------------------------------------- pages


def docs(root: Path = ROOT) -> List[str]:
    """The checked pages: README.md and every docs/*.md but docs/paper.md."""
    pages = sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md") if p.name != "paper.md")
    return ["README.md"] + pages


GENERATED = re.compile(r"<!-- ([a-z0-9-]+) -->\n(.*?)<!-- /\1 -->", re.S)

# spans blanked in the prose before numbers are read (same length: line numbers stay right)
_SKIP = [
    re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M),      # fenced code
    re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))+`"),                # inline code (may wrap a line, not a paragraph)
    re.compile(r"<!--.*?-->", re.S),                           # comments
    re.compile(r"\]\([^)\s]*\)"),                              # link targets
    re.compile(r"https?://\S+"),                               # URLs
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),                      # dates
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b[+…]?"),  # commit hashes
    re.compile(r"\b\d+(?:\.\d+){2,}\b"),                       # versions x.y.z
    re.compile(r"(?i)\b(?:torch|c?python|glibc|timm|numpy|pandas|scipy|dvc|cuda|torchvision|version|v)\s*"
               r"(?:≥|>=|<=)?\s*\d+(?:\.\d+)*"),                # versions after a package name
    re.compile(r"(?i)\barxiv[: ]*\d{4}\.\d{4,5}\b"),           # arXiv ids
    re.compile(r"§\s*\d+(?:\.\d+)*"),                          # section numbers
    re.compile(r"\d+(?:\.\d+)?[eE][-+]?\d+"),                  # scientific notation
]


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(text: str) -> str:
    """`text` with its generated sections and every _SKIP span blanked."""
    text = GENERATED.sub(_blank, text)
    for pat in _SKIP:
        text = pat.sub(_blank, text)
    return text


def blocks(text: str) -> Iterator[Tuple[int, int]]:
    """(first, last) line index of each paragraph, list item and table row: the scope of a citation."""
    lines = text.split("\n")
    start = None
    for i, line in enumerate(lines + [""]):
        new_item = re.match(r"\s*(?:[-*+] |\d+\. |\|)", line) is not None
        if not line.strip() or (new_item and start is not None):
            if start is not None:
                yield start, i - 1
            start = None
        if line.strip():
            if start is None:
                start = i
            if line.lstrip().startswith("|"):  # a table row is a block of its own
                yield i, i
                start = None


# -------------------------------------------------------------------------------------------------------------- numbers

UNITS = {  # unit as written -> (kind, factor to the kind's base unit)
    "%": ("pct", 1), "pt": ("pct", 1), "pts": ("pct", 1), "points": ("pct", 1), "percentage points": ("pct", 1),
    "s": ("time", 1), "sec": ("time", 1), "seconds": ("time", 1), "second": ("time", 1),
    "min": ("time", 60), "minutes": ("time", 60), "minute": ("time", 60),
    "h": ("time", 3600), "hours": ("time", 3600), "hour": ("time", 3600),
    "×": ("ratio", 1), "x": ("ratio", 1),
}
_UNIT = r"(?P<unit>percentage points|points|pts|pt|%|seconds?|sec|s|minutes?|min|hours?|h|(?:×|x)(?!\s*\d))(?![\w×])"
_NUM = r"(?P<sign>[+\-−]?)(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<k>k(?![\w]))?"
_NUMBER = re.compile(r"(?<![\w.,/@^_\-−+])" + _NUM + r"(?![\w.,]\d)(?:\s?" + _UNIT + r")?")
_JOIN = re.compile(r"^\s*(?:–|—|-|to|/|→|and|or|,)\s*$")  # between the numbers of a range or a list


@dataclass(frozen=True)
class Number:
    text: str  # as printed
    value: float  # in the kind's base unit (seconds for a time)
    tol: float  # half the printed precision, same unit
    kind: Optional[str]  # pct, time, ratio, or None
    signed: bool
    line: int  # 1-based, in its page
    written: float  # the value as printed (no unit conversion)
    decimals: int  # as printed
    factor: float = 1.0  # the unit's factor to the base unit (60 for min)


def numbers(text: str, checked_only: bool = True, line0: int = 0) -> List[Number]:
    """The numbers of a text with their units. checked_only: those that read as a result (decimals, a sign, a
    unit); else every number (the sources' side)."""
    toks = []
    for m in _NUMBER.finditer(text):
        sign = m.group("sign")
        # a '-' is a sign only after a blank or an opening bracket ("seeds 0-2" is a range)
        if sign == "-" and m.start() > 0 and not re.match(r"[\s(\[]", text[m.start() - 1]):
            continue
        toks.append(m)
    units: List[Optional[str]] = [m.group("unit") for m in toks]
    kilo = [bool(m.group("k")) for m in toks]
    for i in range(len(toks) - 2, -1, -1):  # a unit (and a k) reaches back over "–", "/", "to", ...
        if _JOIN.match(text[toks[i].end():toks[i + 1].start()]):
            if units[i] is None and units[i + 1] is not None:
                units[i] = units[i + 1]
            if not kilo[i] and kilo[i + 1] and units[i] is None:
                kilo[i] = True
    out = []
    for m, unit, k in zip(toks, units, kilo):
        num = m.group("num").replace(",", "")
        decimals = len(num.split(".")[1]) if "." in num else 0
        scale = 1000.0 if k else 1.0
        kind, factor = UNITS[unit] if unit else (None, 1)
        sign = m.group("sign")
        if checked_only and not ("." in num or sign or kind):
            continue
        written = (-1.0 if sign in ("-", "−") else 1.0) * float(num) * scale
        out.append(Number(m.group(0).strip(), written * factor, 0.5 * 10 ** -decimals * scale * factor, kind,
                          bool(sign), line0 + text.count("\n", 0, m.start()) + 1, written, decimals, factor))
    return out


# -------------------------------------------------------------------------------------------------------------- sources

SOURCE_GLOBS = ("results/**/*.csv", "results/**/*.json", "results/**/*.md", "docs/evidence/**/*.csv",
                "docs/evidence/**/*.json", "docs/evidence/**/*.yaml", "docs/evidence/**/*.md",
                "weights/*/manifest.json", "plan.yaml", "params.yaml", "presets/*.yaml", "docs/paper.md")
NOT_SOURCES = ("docs/evidence/README.md",)  # an index of the evidence, hand-written
TIME_KEY = re.compile(r"_s$|^s$|time|wall|^total$|seconds")
SPAN_KEY = re.compile(r"^total$|wall|^(?:stages|cells|train|notebooks)_s$")  # a whole run's or stage's duration
TIME_FILES = ("timing.json", "notebook_times.json", "run.json", "run_time_before.json")


def committed(root: Path = ROOT) -> List[str]:
    """The committed source files (git ls-files; outside a git checkout, the files on disk)."""
    try:
        files = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True,
                               check=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    pats = [re.compile("^" + re.escape(g).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*") + "$")
            for g in SOURCE_GLOBS]
    return sorted(f for f in files if f and any(p.match(f) for p in pats) and "/html/" not in f
                  and f not in NOT_SOURCES)


DETAIL = re.compile(r"(?:^|/)(?:history|prop1_per_step|prop1_tightness|lyapunov_per_class|robustness|halting|"
                    r"euler_bound|fidelity)\.csv$")  # per epoch / step / class / image: used only where named


@dataclass
class Values:
    """One source's numbers: `data` (numbers stored as numbers, at full precision), `printed` (numbers written as
    text, by their printed decimals), `times` (every time among them, in seconds) and `spans` (the times that are a
    whole run's or stage's duration: `total`, wall times, a time written in min or h)."""
    data: List[float] = field(default_factory=list)
    printed: Dict[int, List[float]] = field(default_factory=dict)
    times: List[float] = field(default_factory=list)
    spans: List[float] = field(default_factory=list)

    def add(self, v: float, time: bool = False, span: bool = False) -> None:
        if math.isfinite(v):
            self.data.append(v)
            if time or span:
                self.times.append(v)
            if span:
                self.spans.append(v)

    def add_text(self, text: str, time_column: Optional[float] = None) -> None:
        """Every number of a text as printed, and as a time where it has a time unit; time_column: the factor to
        seconds of a table column's unit, for a cell's numbers without one."""
        for n in numbers(text, checked_only=False):
            self.printed.setdefault(n.decimals, []).append(n.written)
            if n.kind == "time":
                self.times.append(n.value)
                if n.factor >= 60:
                    self.spans.append(n.value)
            elif n.kind is None and time_column:
                self.times.append(n.value * time_column)
                if time_column >= 60:
                    self.spans.append(n.value * time_column)

    def add_json(self, obj, time: bool, span: bool = False) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                self.add_json(v, time or bool(TIME_KEY.search(str(k))), span or bool(SPAN_KEY.search(str(k))))
        elif isinstance(obj, list):
            for v in obj:
                self.add_json(v, time, span)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            self.add(float(obj), time, span)
        elif isinstance(obj, str):
            self.add_text(obj)

    def add_csv(self, text: str) -> None:
        rows = list(csv.reader(text.splitlines()))
        head = rows[0] if rows else []
        for row in rows[1:]:
            for i, cell in enumerate(row):
                try:
                    self.add(float(cell), i < len(head) and bool(TIME_KEY.search(head[i])),
                             i < len(head) and bool(SPAN_KEY.search(head[i])))
                except ValueError:
                    if any(c.isdigit() for c in cell):
                        self.add_text(cell)

    def add_markdown(self, text: str) -> None:
        """Prose and tables as printed (without the spans a page's prose sets aside: dates, hashes, versions, ...); a
        table cell without a unit takes its column's time unit (s, min)."""
        header: List[str] = []
        for line in prose(text).splitlines():
            if not line.lstrip().startswith("|"):
                header = []
                self.add_text(line)
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not header:
                header = cells
                self.add_text(line)
                continue
            for i, cell in enumerate(cells):
                h = header[i] if i < len(header) else ""
                unit = 60.0 if re.search(r"\bmin\b|minutes", h) else 1.0 if re.search(r"(?:^|[\s:(])s\b|seconds", h) \
                    else None
                self.add_text(cell, unit)

    def done(self) -> "Values":
        self.data, self.times, self.spans = sorted(set(self.data)), sorted(set(self.times)), sorted(set(self.spans))
        self.printed = {d: sorted(set(v)) for d, v in self.printed.items()}
        return self


def load_sources(root: Path = ROOT, pages: Iterable[str] = ()) -> Dict[str, Values]:
    """Source name -> its values: every committed data file, and each page's generated sections ("PAGE#NAME")."""
    out: Dict[str, Values] = {}
    for f in committed(root):
        path = root / f
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        v = Values()
        if f.endswith(".json"):
            v.add_json(json.loads(text), os.path.basename(f) in TIME_FILES,
                       os.path.basename(f) == "notebook_times.json")  # a stage's duration each
        elif f.endswith(".csv"):
            v.add_csv(text)
        elif f.endswith(".md"):
            v.add_markdown(text)
        else:  # YAML: its values (numbers, and the numbers in its strings), not its comments
            v.add_json(yaml.safe_load(text), False)
        out[f] = v.done()
    for page in pages:
        for m in GENERATED.finditer((root / page).read_text(encoding="utf-8")):
            v = Values()
            v.add_markdown(m.group(2))
            out[f"{page}#{m.group(1)}"] = v.done()
    return out


# ------------------------------------------------------------------------------------------------------------ citations

_CITE = re.compile(r"(?:\b(?:results|docs/evidence|presets|weights)/(?:\{[^{}\s]*\}|[^\s`)\]\"'’,;{])*"
                   r"|\b[\w.*<>-]+\.(?:csv|json|yaml|md)\b)")


def _expand(pattern: str) -> List[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in _expand(pattern[:m.start()] + alt + pattern[m.end():])]


ROOTS = ("results", "docs/evidence", "presets", "weights")  # too broad to stand for a source


def cited(text: str, names: Iterable[str]) -> List[str]:
    """The sources a paragraph names: a file (path or bare name: every source of that name), or a folder or glob,
    which stands for its summary files (not the per-epoch / per-step tables of DETAIL, which must be named)."""
    names = list(names)
    out = set()
    if re.search(r"(?i)\b(?:paper|abstract|authors?|published code)\b", text):  # it may quote the paper's numbers
        out.add("docs/paper.md")
    for page in set(re.findall(r"\b(?:docs/)?(\w+)\.md\b|\b(README)\b", text)):  # a page: its generated sections
        stem = page[0] or page[1]
        out.update(n for n in names if n.startswith(("README.md#" if stem == "README" else f"docs/{stem}.md#",
                                                     f"{stem}.md#")))
    names = [n for n in names if "#" not in n]
    for raw in _CITE.findall(text):
        for c in _expand(re.sub(r"<[^<>]*>", "*", raw.rstrip(".:"))):
            if c.rstrip("/") in ROOTS:
                continue
            if "/" not in c:  # a bare file name
                out.update(n for n in names if fnmatch.fnmatch(os.path.basename(n), c))
            elif fnmatch.fnmatch(c, "*.*") and not c.endswith("/"):  # a file or a glob of files
                out.update(n for n in names if fnmatch.fnmatch(n, c))
            else:  # a folder or a glob of folders
                out.update(n for n in names if not DETAIL.search(n) and (
                    fnmatch.fnmatch(n, c.rstrip("/") + "/*") or fnmatch.fnmatch(n, c.rstrip("/") + "*/*")))
    return sorted(out)


CONFIG = ("params.yaml", "plan.yaml", "presets/*.yaml")  # the values the code runs with: always in scope


def is_config(name: str) -> bool:
    return any(fnmatch.fnmatch(name, g) for g in CONFIG)


def always(page: str, names: Iterable[str]) -> List[str]:
    """The sources every paragraph of `page` can draw on: its own generated sections, then the config files."""
    return [n for n in names if n.startswith(page + "#")] + [n for n in names if is_config(n)]


# -------------------------------------------------------------------------------------------------------------- backing


def _near(sorted_values: List[float], x: float, tol: float) -> Optional[float]:
    """The first value within `tol` of x (tol > 0: strictly inside, so 0.85 does not round to 0.9; tol 0: equal)."""
    eps = 1e-9 * max(1.0, abs(x))
    lo, hi = (x - tol + eps, x + tol - eps) if tol > 0 else (x - eps, x + eps)
    i = bisect.bisect_left(sorted_values, lo)
    return sorted_values[i] if i < len(sorted_values) and sorted_values[i] <= hi else None


def backing(n: Number, sources: Dict[str, Values], names: Iterable[str]) -> Optional[str]:
    """'VALUE in SOURCE' for the first of `names` that backs `n`, else None: a time, a time value (in s) within its
    printed precision; else a stored number, or a number printed with at least as many decimals, that rounds to it
    (a percentage: also a fraction). Unsigned, it may match either sign."""
    names = list(names)
    for name in names if n.kind != "time" else []:  # first the number exactly as printed: the likeliest source
        for sign in ([1.0] if n.signed else [1.0, -1.0]):
            if _near(sources[name].printed.get(n.decimals, []), sign * n.written, 0.0) is not None:
                return f"{n.text} as printed in {name}"
    for name in names:
        s = sources[name]
        if n.kind == "time":  # in min or h: a run's or stage's duration; in s: any time
            v = _near(s.spans if n.factor >= 60 else s.times, n.value, n.tol)
            if v is not None:
                return f"{v:g} s in {name}"
            continue
        for sign in ([1.0] if n.signed else [1.0, -1.0]):
            for scale in ([1.0, 0.01] if n.kind == "pct" else [1.0]):  # 87.1 % = 0.871
                x, tol = sign * n.written * scale, n.tol * scale
                d0, how = n.decimals + (0 if scale == 1.0 else 2), "" if scale == 1.0 else " (×100)"
                if is_config(name):  # a config value is quoted as it is, not rounded
                    v = _near(s.data, x, 0.0)
                    v = _near(s.printed.get(d0, []), x, 0.0) if v is None else v
                    if v is not None:
                        return f"{v:g}{how} in {name}"
                    continue
                v = _near(s.data, x, tol)
                if v is not None:
                    return f"{v:g}{how} in {name}"
                for d, printed in s.printed.items():
                    if d >= d0 and (v := _near(printed, x, tol)) is not None:
                        return f"{v:.{d}f}{how} as printed in {name}"
    return None


# ------------------------------------------------------------------------------------------------------------ allowlist


def allowlist(path: Path = ALLOW) -> Dict[Tuple[str, str], str]:
    """(doc, number as printed) -> its source: each entry of the file names a page, its numbers and their source."""
    entries = (yaml.safe_load(path.read_text(encoding="utf-8")) or []) if path.is_file() else []
    out = {}
    for e in entries:
        assert set(e) == {"doc", "numbers", "source"} and str(e["source"]).strip() and e["numbers"], \
            f"{path.name}: an entry needs doc, numbers and a source: {e}"
        for number in e["numbers"]:
            assert (e["doc"], str(number)) not in out, f"{path.name}: {e['doc']} {number} listed twice"
            out[(e["doc"], str(number))] = " ".join(str(e["source"]).split())
    return out


@dataclass
class Report:
    checked: List[Tuple[Number, str]]  # (number, what backs it)
    unbacked: List[Number]


def check(page: str, sources: Dict[str, Values], allow: Dict[Tuple[str, str], str], root: Path = ROOT) -> Report:
    raw = (root / page).read_text(encoding="utf-8")
    text = prose(raw)
    raw_lines, lines = raw.split("\n"), text.split("\n")
    base = always(page, sources)
    rep = Report([], [])
    for first, last in blocks(text):
        scope = cited("\n".join(raw_lines[first:last + 1]), sources) + base
        for n in numbers("\n".join(lines[first:last + 1]), line0=first):
            why = backing(n, sources, scope) or (
                f"allowlist: {allow[(page, n.text)]}" if (page, n.text) in allow else None)
            if why is None:
                rep.unbacked.append(n)
            else:
                rep.checked.append((n, why))
    return rep


# ---------------------------------------------------------------------------------------------------------------- tests


# A page about what main no longer holds states the numbers of files at a git tag: its numbers are backed by the
# files committed at that tag (read with `git archive`), the rest of the rule unchanged. The page names the tag's
# commit, an ancestor of main, so a clone without the tag (a fresh CI clone fetches no tags) reads that commit.
AT_TAG = {"docs/history.md": ("retired-plan1-quick-exploratory", "2129d9c")}


def tag_sources(tag: str, commit: str, tmp: Path) -> Dict[str, Values]:
    """load_sources over the files committed at `tag`, or at its commit where this clone lacks the tag."""
    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True)

    at = git("rev-parse", "--verify", "-q", f"{tag}^{{commit}}").stdout.decode().strip()
    assert not at or at.startswith(commit), f"git tag {tag} is at {at}; its page names commit {commit}"
    r = git("archive", "--format=tar", at or commit)
    if r.returncode:
        pytest.skip(f"neither git tag {tag} nor commit {commit} is in this clone (a shallow clone?): "
                    f"{r.stderr.decode(errors='replace').strip()}")
    import io
    import tarfile

    tarfile.open(fileobj=io.BytesIO(r.stdout)).extractall(tmp, filter="data")
    return load_sources(tmp, docs(tmp))  # its data files and its pages' generated sections


@pytest.fixture(scope="module")
def sources() -> Dict[str, Values]:
    return load_sources(ROOT, docs())


@pytest.mark.parametrize("page", docs())
def test_every_number_in_the_prose_is_backed_by_a_committed_file(page, sources, tmp_path):
    if page in AT_TAG:
        tag, commit = AT_TAG[page]
        assert f"commit {commit}" in (ROOT / page).read_text(), f"{page} names the commit of its tag {tag}: {commit}"
        sources = {**tag_sources(tag, commit, tmp_path), **{k: v for k, v in sources.items() if k.startswith(page)}}
    rep = check(page, sources, allowlist())
    print(f"{page}: {len(rep.checked) + len(rep.unbacked)} numbers checked, {len(rep.unbacked)} unbacked")
    if rep.unbacked:
        pytest.fail(f"{page}: numbers that no file the paragraph can draw on backs (fix the number, name the file it "
                    f"comes from, or add a sourced entry to {ALLOW.relative_to(ROOT)}):\n"
                    + "\n".join(f"  {page}:{n.line}: {n.text}" for n in rep.unbacked), pytrace=False)


def test_every_allowlist_entry_is_still_needed(sources):
    """An entry names a number its doc still states and no file backs."""
    allow = allowlist()
    used = {(page, n.text) for page in docs() if page not in AT_TAG for n, why in check(page, sources, allow).checked
            if why.startswith("allowlist:")}
    assert set(allow) <= used, f"stale entries in {ALLOW.name}: {sorted(set(allow) - used)}"


def test_the_extractor_reads_units_and_ranges_and_skips_code():
    text = ("took 37–63 min each, **1.10×**, +4.65 pt [−0.29, +3.4], 87.1 % at N; seeds 0-2, 3 seeds, N = 12,\n"
            "`0.123` and [x](docs/1.5.md), torch 2.14, commit 8a0d58c, 2026-11-25, arXiv 2511.16501, 1e-12, §3.4\n"
            "6k × 2 epochs, ≈ 2.5–3.2k images/s, −2928 s, 55,000 images\n```\n0.5 s\n```")
    got = [(n.text, n.kind, round(n.value, 6), n.line) for n in numbers(prose(text))]
    assert got == [("37", "time", 2220, 1), ("63 min", "time", 3780, 1), ("1.10×", "ratio", 1.1, 1),
                   ("+4.65 pt", "pct", 4.65, 1), ("−0.29", None, -0.29, 1), ("+3.4", None, 3.4, 1),
                   ("87.1 %", "pct", 87.1, 1), ("2.5", None, 2500, 3), ("3.2k", None, 3200, 3),
                   ("−2928 s", "time", -2928, 3)]


def test_backing_follows_precision_units_and_citations():
    """A number is backed only by the sources its paragraph can draw on, to its printed precision and in its unit: the
    quick run's '45 minutes' (the README's figure until results/run.json said 32.3 min) is not."""
    src = {"results/run.json": Values(), "results/x/timing.json": Values(), "docs/evidence/x/a.csv": Values(),
           "docs/evidence/x/history.csv": Values(), "README.md#t": Values(), "params.yaml": Values()}
    src["results/run.json"].add_json({"wall_s": 1935.6, "phases_s": {"train": 2700.0}}, time=True)
    src["results/x/timing.json"].add_json({"total": 2700.0}, time=True)
    src["docs/evidence/x/a.csv"].add_csv("acc1,delta\n0.871,-0.29\n")
    src["docs/evidence/x/history.csv"].add_csv("epoch,val_acc1\n1,0.8\n")
    src["README.md#t"].add_markdown("| cell | min per run | Acc@1 at N (%) |\n|---|---|---|\n| ref | 54 | 87.82 |")
    src["params.yaml"].add_json({"min_delta_pts": 0.25}, time=False)
    src = {k: v.done() for k, v in src.items()}
    scope = always("README.md", src) + cited("in `results/run.json`", src)
    assert scope == ["README.md#t", "params.yaml", "results/run.json"]
    back = {n.text: backing(n, src, scope) for n in numbers(
        "32.3 min, 32 minutes, 45 minutes, 54 min, 2700 s, 87.8 %, 87.1 %, 0.29, 0.25 pt, 0.3 pt")}
    assert back == {"32.3 min": "1935.6 s in results/run.json", "32 minutes": "1935.6 s in results/run.json",
                    "45 minutes": None,  # 2700 s is a phase there, not a run's duration
                    "54 min": "3240 s in README.md#t", "2700 s": "2700 s in results/run.json",
                    "87.8 %": "87.82 as printed in README.md#t", "87.1 %": None, "0.29": None,
                    "0.25 pt": "0.25 in params.yaml", "0.3 pt": None}  # a config value is not rounded
    assert backing(numbers("45 minutes")[0], src, cited("`results/x/timing.json`", src)) == \
        "2700 s in results/x/timing.json"
    scope = cited("see `docs/evidence/x/` for it", src)
    assert scope == ["docs/evidence/x/a.csv"]  # a folder stands for its summary files, not its history.csv
    back = {n.text: backing(n, src, scope) for n in numbers("87.1 %, 0.29 pt, +0.29 pt, −0.29, 80.0 %")}
    assert back == {"87.1 %": "0.871 (×100) in docs/evidence/x/a.csv", "0.29 pt": "-0.29 in docs/evidence/x/a.csv",
                    "+0.29 pt": None, "−0.29": "-0.29 in docs/evidence/x/a.csv", "80.0 %": None}


def test_no_page_or_notebook_cites_a_section_number():
    """docs/paper.md: the paper's body was not available, so no section number can be checked (04_distill cited
    §3.4). The notebooks' sources (not their executed copies in outputs/) and the pages."""
    texts = {p: (ROOT / p).read_text(encoding="utf-8") for p in docs()}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        texts[str(nb.relative_to(ROOT))] = "".join(
            "".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"])
    assert [p for p, t in texts.items() if re.search(r"§\s*\d", t)] == []


if __name__ == "__main__":
    src, allow = load_sources(ROOT, docs()), allowlist()
    for page in sys.argv[1:] or docs():
        rep = check(page, src, allow)
        print(f"== {page}: {len(rep.checked) + len(rep.unbacked)} checked, {len(rep.unbacked)} unbacked")
        for n, why in sorted(rep.checked, key=lambda t: t[0].line):
            print(f"  ok  {page}:{n.line}: {n.text}  <- {why}")
        for n in rep.unbacked:
            print(f"  !!  {page}:{n.line}: {n.text}")
