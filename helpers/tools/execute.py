"""Re-execute notebooks in place on the CPU path, so their committed outputs are fresh.

    python -m helpers.tools.execute                 # every notebook
    python -m helpers.tools.execute notebooks/02_naive_dgrad.ipynb

Runs with small sizes (COURSE_SIZE unset) and strips volatile metadata (execution timestamps),
so diffs of the committed notebooks show only what changed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def execute(path: Path, timeout: int = 1200) -> None:
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    env_size = os.environ.pop("COURSE_SIZE", None)
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if env_size is not None:
            os.environ["COURSE_SIZE"] = env_size
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None) if not _has_widgets(nb) else None
    nbformat.write(nb, path)


def _has_widgets(nb) -> bool:
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    paths = [Path(a) for a in args] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    wrong = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if wrong:
        print(f"error: no notebook {', '.join(wrong)}: name .ipynb files (e.g. notebooks/02_naive_dgrad.ipynb), "
              f"or none to execute every chapter", file=sys.stderr)
        return 2
    for p in paths:
        print(f"executing {p} ...", flush=True)
        execute(p.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
