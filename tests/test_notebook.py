"""Executed notebooks carry no run timestamps: two runs that compute the same thing write the same bytes."""
import copy

import nbformat
import pytest

from odevit.repro.notebook import stabilise, strip_run_metadata


def _executed(start: str, end: str, duration: float, cell_id: str) -> nbformat.NotebookNode:
    """A notebook as papermill leaves it: run clock readings in the notebook and cell metadata."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("x = 2", id=cell_id, metadata={"tags": ["injected-parameters"]})
    work = nbformat.v4.new_code_cell("print(x + 1)", id="work", execution_count=2,
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text="3\n")])
    for c in (params, work):
        c.metadata["papermill"] = {"start_time": start, "end_time": end, "duration": duration,
                                   "exception": False, "status": "completed"}
        c.metadata["execution"] = {"iopub.execute_input": start, "shell.execute_reply": end}
    nb.cells = [params, work]
    nb.metadata["papermill"] = {"start_time": start, "end_time": end, "duration": duration, "exception": None,
                                "parameters": {"x": 2}, "input_path": "in.ipynb", "output_path": "out.ipynb"}
    return nb


def test_strip_removes_clock_readings_and_keeps_the_rest():
    nb = strip_run_metadata(_executed("2026-01-01T00:00:00", "2026-01-01T00:00:09", 9.0, "a1b2c3d4"))
    assert set(nb.metadata.papermill) == {"exception", "parameters", "input_path", "output_path"}
    for c in nb.cells:
        assert set(c.metadata.papermill) == {"exception", "status"} and "execution" not in c.metadata
    assert [c.id for c in nb.cells] == ["injected-parameters", "work"]
    assert nb.cells[1].outputs[0].text == "3\n" and nb.cells[1].execution_count == 2


def test_two_runs_differing_only_in_time_write_the_same_bytes(tmp_path):
    a, b = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    nbformat.write(_executed("2026-01-01T00:00:00", "2026-01-01T00:00:09", 9.0, "a1b2c3d4"), a)
    nbformat.write(_executed("2026-02-03T10:00:00", "2026-02-03T10:00:03", 3.0, "ffee0011"), b)
    assert a.read_bytes() != b.read_bytes()
    stabilise(str(a)), stabilise(str(b))
    assert a.read_bytes() == b.read_bytes()


def test_a_changed_result_still_shows():
    a = _executed("t0", "t1", 1.0, "x")
    b = copy.deepcopy(a)
    b.cells[1].outputs[0].text = "4\n"
    assert nbformat.writes(strip_run_metadata(a)) != nbformat.writes(strip_run_metadata(b))


@pytest.mark.slow
def test_papermill_twice_gives_identical_files(tmp_path):
    """A real papermill run, twice: the stripped outputs are byte-identical."""
    import papermill

    src = tmp_path / "nb.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print(x * 2)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src)
    outs = []
    dst = tmp_path / "out.ipynb"
    for _ in range(2):
        papermill.execute_notebook(str(src), str(dst), parameters={"x": 21}, kernel_name="python3",
                                   progress_bar=False, cwd=str(tmp_path))
        stabilise(str(dst))
        outs.append(dst.read_bytes())
    assert outs[0] == outs[1] and b'"42\\n"' in outs[0]
