"""The generated pages' wording: jinja2 templates (docs/templates/NAME.md.j2, one per section) and the filters they
print numbers with; the section code (readme and the *_pages modules) reads the results files into them.

A template line that ends in a backslash goes on on the next line (its indentation dropped); a template is rendered
with `trim_blocks` and `lstrip_blocks` (a `{% %}` line leaves no blank line) and stripped of the newlines around it;
undefined names fail (StrictUndefined), so a renamed column cannot print blank.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any, Dict

import jinja2
import jinja2.ext
import pandas as pd

from .files import read_json, read_yaml, write_json  # noqa: F401  (the sections read their files through these)

TEMPLATES = Path(__file__).resolve().parents[2] / "docs" / "templates"


def na(x: Any) -> bool:
    """Missing: None or NaN (a blank CSV cell)."""
    return x is None or (pd.api.types.is_scalar(x) and bool(pd.isna(x)))


def num(x: float, signed: bool = False, digits: int = 3) -> str:
    return f"{x:+.{digits}g}" if signed else f"{x:.{digits}g}"


def pt(x: float, digits: int = 2) -> str:
    """A signed difference in pt to `digits` decimals; one that rounds to zero gets one more decimal (-0.0013 is
    -0.001, never "-0.00"), one that rounds to zero at that too is unsigned (-0.0004 is 0.000, never "-0.000"), and
    zero itself is 0.00: a reader never sees a negative zero."""
    if x == 0:
        return f"{0:.{digits}f}"
    for d in (digits, digits + 1):
        s = f"{x:+.{d}f}"
        if float(s) != 0:
            return s
    return f"{0:.{digits + 1}f}"


def interval(lo: float, hi: float) -> str:
    """' [lo, hi]' signed, or '' where there is no interval (a row of one seed)."""
    return "" if pd.isna(lo) else f" [{pt(lo)}, {pt(hi)}]"


def ci(lo: float, hi: float, signed: bool, digits: int = 3) -> str:
    return "–" if pd.isna(lo) else f"[{num(lo, signed, digits)}, {num(hi, signed, digits)}]"


def dash(x: Any, spec: str) -> str:
    """`x` formatted by `spec`, or – where it is missing."""
    return "–" if na(x) else format(x, spec)


def wrap(text: str, width: int = 118, indent: str = "") -> str:
    """Lines of at most `width` characters (hyphenated words kept whole), later lines indented by `indent`."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False))


class _Joined(jinja2.ext.Extension):
    """A line ending in a backslash continues on the next, whose indentation is dropped (long prose, short lines;
    an error names the line of the joined text)."""

    def preprocess(self, source: str, name: Any, filename: Any = None) -> str:
        return re.sub(r"\\\n[ \t]*", "", source)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined, autoescape=False, extensions=[_Joined])
ENV.filters.update(num=num, pt=pt, ci=ci, dash=dash, fmt=format, wrap=wrap, interval=lambda r: interval(r.ci_low, r.ci_high),
                   apply=lambda xs, f: [f(x) for x in xs])
ENV.tests["na"] = na


def fill(name: str, **context: Any) -> str:
    """docs/templates/NAME.md.j2 rendered with `context`, without the newlines around it."""
    return ENV.get_template(f"{name}.md.j2").render(**context).strip("\n")


WORDS: Dict[str, Any] = read_yaml(str(TEMPLATES / "words.yaml"))  # names printed for the results files' keys
