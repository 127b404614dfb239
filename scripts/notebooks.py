"""Make each example's notebook from its script, or check that they match.

Examples are written as scripts in the "percent" format (``# %%`` starts a code
cell, ``# %% [markdown]`` a markdown cell whose lines start with ``# ``), so the
script is what is reviewed and linted, and the notebook is made from it:

    python scripts/notebooks.py             # write examples/*.ipynb (stale ones)
    python scripts/notebooks.py --execute   # ... and run each, saving its outputs
    python scripts/notebooks.py --check     # exit 1 if a notebook is missing or stale
"""

from __future__ import annotations

import argparse
import pathlib
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def cells(source: str):
    """(kind, text) of each cell of a percent-format script."""
    out = []
    kind, lines = None, []

    def flush():
        text = "\n".join(lines).strip("\n")
        if kind is not None and text:
            out.append((kind, text))

    for line in source.splitlines():
        if line.startswith("# %%"):
            flush()
            kind = "markdown" if "[markdown]" in line else "code"
            lines = []
        elif kind == "markdown":
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
        elif kind is not None:
            lines.append(line)
    flush()
    return out


def notebook(script: pathlib.Path):
    """The notebook (nbformat v4, no outputs) of a percent-format script."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}  # fmt: skip
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in cells(script.read_text()):
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        nb.cells.append(make(text))
    return nb


def scripts():
    """Every example script that is written as cells."""
    return sorted(p for p in EXAMPLES.glob("*.py") if p.read_text().startswith("# %%"))


def _sources(nb):
    return [(c.cell_type, c.source) for c in nb.cells]


def main(argv=None):
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    parser.add_argument("--execute", action="store_true",
                        help="run every notebook and save it with its outputs")  # fmt: skip
    args = parser.parse_args(argv)
    stale = []
    for script in scripts():
        target = script.with_suffix(".ipynb")
        nb = notebook(script)
        current = nbformat.read(target, as_version=4) if target.exists() else None
        if current is not None and _sources(current) == _sources(nb):
            continue
        stale.append(target.name)
        if not args.check:
            for i, c in enumerate(nb.cells):  # ids from the position: a rewrite is stable
                c.id = f"cell-{i}"
            nbformat.write(nb, target)
    if args.check and stale:
        print("stale notebooks (run python scripts/notebooks.py):", ", ".join(stale))
        return 1
    for name in stale:
        print("wrote", name)
    if args.execute:
        import nbclient

        for script in scripts():
            target = script.with_suffix(".ipynb")
            nb = nbformat.read(target, as_version=4)
            where = {"metadata": {"path": str(EXAMPLES)}}
            client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                             resources=where)  # fmt: skip
            client.execute()
            for cell in nb.cells:  # stderr holds warnings with this machine's paths
                if cell.cell_type == "code":
                    cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
            nbformat.write(nb, target)
            print("executed", target.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
