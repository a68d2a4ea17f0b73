"""docs/evidence/lock_rewrite.py: a source change shown to alter no output is recorded in dvc.lock without re-running
stages — only the entries that recorded the file's old content change, stale ones stay stale."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lock_rewrite", ROOT / "docs" / "evidence" / "lock_rewrite.py")
lock_rewrite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock_rewrite)

LOCK = """schema: '2.0'
stages:
  cell@ref-0:
    cmd: python -m odevit.repro.study ref 0
    deps:
    - path: odevit/repro/config.py
      hash: md5
      md5: aaa
      size: 10
    - path: odevit/repro/study.py
      hash: md5
      md5: aaa
      size: 10
  cell@free-0:
    cmd: python -m odevit.repro.study free 0
    deps:
    - path: odevit/repro/config.py
      hash: md5
      md5: old
      size: 9
    outs:
    - path: odevit/repro/config.py
      hash: md5
      md5: aaa
      size: 10
  publish:
    deps:
    - path: odevit/repro/config.py
      hash: md5
      md5: aaa
      size: 10
"""


def test_only_entries_with_the_old_content_of_that_path_change():
    text, done = lock_rewrite.rewrite(LOCK, {"odevit/repro/config.py": ("aaa", "bbb", 12)})
    lines = text.split("\n")
    assert text.count("md5: bbb") == 2 and text.count("size: 12") == 2
    assert dict(done["odevit/repro/config.py"]) == {"cell": 1, "publish": 1}
    i = lines.index("    - path: odevit/repro/study.py")
    assert lines[i + 2:i + 4] == ["      md5: aaa", "      size: 10"]  # another path with the same md5: untouched
    assert "      md5: old" in lines and "      size: 9" in lines  # recorded another content: stays stale
    j = lines.index("    outs:") + 1
    assert lines[j:j + 4] == ["    - path: odevit/repro/config.py", "      hash: md5", "      md5: aaa",
                              "      size: 10"]  # an output with that path and content: untouched
    assert lock_rewrite.rewrite(LOCK, {})[0] == LOCK


def test_a_layout_it_cannot_read_is_refused():
    """CR line ends, or a size line before its md5 (so the size would stay stale): an error, no half-rewritten text."""
    import pytest

    swaps = {"odevit/repro/config.py": ("aaa", "bbb", 12)}
    with pytest.raises(ValueError, match="CR line ends"):
        lock_rewrite.rewrite(LOCK.replace("\n", "\r\n"), swaps)
    swapped = LOCK.replace("      md5: aaa\n      size: 10\n    - path: odevit/repro/study.py",
                           "      size: 10\n      md5: aaa\n    - path: odevit/repro/study.py", 1)
    assert swapped != LOCK
    with pytest.raises(ValueError, match="no size line"):
        lock_rewrite.rewrite(swapped, swaps)
