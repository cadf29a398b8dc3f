"""Executes a notebook of examples/notebooks in a fresh Python kernel (nbclient) and fails on
the first cell that raises; exit 77 (ctest's skip) when nbclient, ipykernel or matplotlib is
missing (tools/deps.sh installs them).

    python3 tests/python/run_notebook.py NOTEBOOK [EXECUTED_COPY]

The kernel inherits the environment: FMMKIT_LIBRARY and PYTHONPATH name the library and the
package under test, as for the Python tests. EXECUTED_COPY, when given, receives the notebook
with its outputs. The kernel runs in a temporary directory, so nothing is written beside the
notebook."""
import os
import sys
import tempfile
import time

SKIP = 77


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
        import ipykernel  # noqa: F401 (the kernel the client starts)
        import matplotlib  # noqa: F401 (the notebooks plot)
    except ImportError as e:
        print(f"skipped: {e} (pip install nbclient ipykernel matplotlib)")
        return SKIP
    path = argv[1]
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        client = NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": work}})
        try:
            client.execute()
        except CellExecutionError as e:
            print(f"{os.path.basename(path)}: a cell failed\n{e}", file=sys.stderr)
            return 1
        finally:
            if len(argv) == 3:
                nbformat.write(nb, argv[2])
    cells = sum(c.cell_type == "code" for c in nb.cells)
    print(f"{os.path.basename(path)}: {cells} code cells ran in "
          f"{time.perf_counter() - start:.1f} s")
    for c in nb.cells:  # what the notebook printed, for the test's log
        for out in c.get("outputs", []):
            if out.get("output_type") == "stream":
                sys.stdout.write(out.get("text", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
