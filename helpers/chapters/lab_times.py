"""Class times measured, not guessed: the student edition executed notebook by notebook.

    python -m helpers.chapters.lab_times              # every notebook; writes results/labs/student_times_<host>.json
    python -m helpers.chapters.lab_times 00 02        # some (their rows replace those in the file)
    python -m helpers.chapters.lab_times --table      # the markdown table INSTRUCTORS.md shows

Each notebook of the student edition (``write_student``: no answers, every exercise unanswered)
is executed top to bottom with small sizes (``COURSE_SIZE`` unset), as a learner's first run
would be, on the device the course picks (``COURSE_DEVICE`` to choose): the wall-clock time of
the whole execution, kernel start included. The file records the machine (CPU model, cores, the
OpenCL device), the commit the notebooks came from, the date, and per notebook the seconds, the
words of prose (markdown) and the exercises (checked cells). A test checks that INSTRUCTORS.md's
table is the one ``table()`` renders from the recorded file.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "results" / "labs"
EXERCISE = re.compile(r"^ok = (check_\w+|gap\.check)\(", re.M)
READING_WPM = 150          # words of prose a minute: the planning rate the table's reading column uses


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--", "notebooks", "helpers") else "")


def counts(path: Path) -> dict:
    """Words of prose (markdown, white-space separated) and exercises (checked cells) of a notebook."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    return {"words": sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown"),
            "exercises": sum(1 for c in nb.cells if c.cell_type == "code" and EXERCISE.search(c.source))}


def run_one(path: Path, timeout: int = 1800) -> float:
    """Seconds to execute one notebook top to bottom (nbclient, a fresh kernel, small sizes)."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    size = os.environ.pop("COURSE_SIZE", None)
    try:
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        return time.perf_counter() - t0
    finally:
        if size is not None:
            os.environ["COURSE_SIZE"] = size


def measure(only=(), out: Path | None = None) -> Path:
    """Execute the student edition's notebooks (those whose names start with one of ``only``, or
    all) and record their times in results/labs/."""
    from ..engine.devices import device_info, get_context
    from .editions import write_student
    host = re.sub(r"[^a-z0-9]+", "-", _cpu().lower()).strip("-")
    out = Path(out or LABS / f"student_times_{host}.json")
    old = json.loads(out.read_text())["rows"] if out.exists() else []
    rows = {r["notebook"]: r for r in old}
    with tempfile.TemporaryDirectory() as tmp:
        edition = write_student(Path(tmp) / "student")
        for path in sorted(edition.glob("*.ipynb")):
            if only and not any(path.name.startswith(o) for o in only):
                continue
            print(f"executing the student edition of {path.stem} ...", flush=True)
            seconds = run_one(path)
            rows[path.stem] = {"notebook": path.stem, "seconds": round(seconds, 1),
                               **counts(ROOT / "notebooks" / path.name)}
            print(f"   {seconds:.1f} s", flush=True)
    info = device_info(get_context(None))
    record = {"kind": "lab_times", "date": time.strftime("%Y-%m-%d"), "commit": _commit(),
              "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "device": info["name"],
                          "platform": info["platform"]},
              "how": "python -m helpers.chapters.lab_times: the student edition, each notebook executed top to "
                     "bottom in a fresh kernel with small sizes; wall-clock seconds, kernel start included",
              "rows": [rows[k] for k in sorted(rows)]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return out


def recorded() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(LABS.glob("student_times_*.json"))]


def table(record: dict | None = None) -> str:
    """INSTRUCTORS.md's table of class times from a recorded file (the first, by default)."""
    record = record or recorded()[0]
    m = record["machine"]
    lines = [f"Measured on {m['cpu']} ({m['cores']} cores; OpenCL device {m['device']}, {m['platform']}), "
             f"{record['date']}, notebooks of commit {record['commit']}.",
             "",
             "| lab | run (s) | prose words | reading at 150 words/min (min) | exercises |",
             "| --- | --- | --- | --- | --- |"]
    for r in record["rows"]:
        lines.append(f"| {r['notebook']} | {r['seconds']:.0f} | {r['words']:,} | "
                     f"{r['words'] / READING_WPM:.0f} | {r['exercises']} |")
    total = sum(r["seconds"] for r in record["rows"])
    lines.append(f"| all | {total:.0f} | {sum(r['words'] for r in record['rows']):,} | "
                 f"{sum(r['words'] for r in record['rows']) / READING_WPM:.0f} | "
                 f"{sum(r['exercises'] for r in record['rows'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--table"]:
        print(table())
        return 0
    print(f"recorded in {measure(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
