"""Class times measured, not guessed: the student edition executed notebook by notebook.

    python -m helpers.tools.lab_times              # every notebook; writes results/labs/student_times_<host>.json
    python -m helpers.tools.lab_times 00 02        # some (their rows replace those in the file)
    python -m helpers.tools.lab_times --table      # the markdown table INSTRUCTORS.md shows

Each notebook of the student edition (``write_student``: no answers, every exercise unanswered)
is executed top to bottom with small sizes (``COURSE_SIZE`` unset), in course order, as a
learner's first pass through the course on a fresh install would be: the caches start empty
(``XDG_CACHE_HOME``, where PoCL keeps its compiled kernels, pyopencl its binaries and matplotlib
its fonts, and ``COURSE_CHOICES``, stage ``auto``'s choices, point into a new folder), so every
kernel is compiled once, on the device the course picks (``COURSE_DEVICE`` to choose): the wall-clock time of
the whole execution, kernel start included, and the CPU time the notebook's kernel process used
(user + system, all its threads), which a busy machine inflates far less than the wall clock; the
machine's load average before and after says how busy it was. The file records the machine (CPU
model, cores, the OpenCL device), the commit the notebooks came from, the date, and per notebook
those times, the words of prose (markdown) and the exercises (checked cells). A test checks that INSTRUCTORS.md's
table is the one ``table()`` renders from the recorded file.
"""
from __future__ import annotations

import json
from collections import Counter
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
# an exercise named in the prose ("**Exercise 2.**", "### Exercise 2, ..."): one a learner answers in
# words has no checked cell, and takes the time of one all the same
NAMED = re.compile(r"(?:\*\*|^#+ )Exercise (\d+)\b", re.M)
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
    """Words of prose (markdown, white-space separated) and exercises of a notebook: its checked
    cells, or the exercises its prose numbers where there are more (those answered in words)."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    checked = sum(1 for c in nb.cells if c.cell_type == "code" and EXERCISE.search(c.source))
    named = {n for c in nb.cells if c.cell_type == "markdown" for n in NAMED.findall(c.source)}
    return {"words": sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown"),
            "exercises": max(checked, len(named))}


def run_one(path: Path, timeout: int = 3600) -> dict:
    """Execute one notebook top to bottom (nbclient, a fresh kernel, small sizes): wall-clock seconds,
    the kernel process's CPU seconds (reaped child: user + system) and the 1-minute load average
    before and after."""
    import resource

    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    size = os.environ.pop("COURSE_SIZE", None)
    cpu = lambda: (lambda u: u.ru_utime + u.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))
    try:
        load0, c0, t0 = os.getloadavg()[0], cpu(), time.perf_counter()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        wall, used = time.perf_counter() - t0, cpu() - c0
        return {"seconds": round(wall, 1), "cpu_seconds": round(used, 1),
                "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}
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
    previous = json.loads(out.read_text()) if out.exists() else {"rows": []}
    # a row measured earlier keeps the commit it was measured at
    rows = {r["notebook"]: {"commit": previous.get("commit"), **r} for r in previous["rows"]}
    commit = _commit()
    saved = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "COURSE_CHOICES")}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(XDG_CACHE_HOME=str(Path(tmp) / "cache"), COURSE_CHOICES=str(Path(tmp) / "choices.json"))
        try:
            edition = write_student(Path(tmp) / "student")
            for path in sorted(edition.glob("*.ipynb")):
                if only and not any(path.name.startswith(o) for o in only):
                    continue
                print(f"executing the student edition of {path.stem} ...", flush=True)
                took = run_one(path)
                rows[path.stem] = {"notebook": path.stem, **took, **counts(ROOT / "notebooks" / path.name),
                                   "commit": commit}
                print(f"   {took['seconds']:.1f} s wall clock, {took['cpu_seconds']:.1f} s CPU, load {took['load']}",
                      flush=True)
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    info = device_info(get_context(None))
    record = {"kind": "lab_times", "date": time.strftime("%Y-%m-%d"), "commit": commit,
              "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "device": info["name"],
                          "platform": info["platform"]},
              "how": "python -m helpers.tools.lab_times: the student edition, each notebook executed top to "
                     "bottom in a fresh kernel with small sizes, in course order, the caches starting empty (a "
                     "fresh install's first pass); wall-clock seconds, kernel start included, and the kernel "
                     "process's CPU seconds",
              "rows": [rows[k] for k in sorted(rows)]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return out


def recorded() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(LABS.glob("student_times_*.json"))]


def now(name: str) -> dict:
    """A notebook's words and exercises as it is now (counts), {} where there is no such notebook: the
    table reads the prose of today, the run times of the recorded run."""
    path = ROOT / "notebooks" / f"{name}.ipynb"
    return counts(path) if path.is_file() else {}


def table(record: dict | None = None) -> str:
    """INSTRUCTORS.md's table of class times from a recorded file (the first, by default)."""
    record = record or recorded()[0]
    m = record["machine"]
    commits = Counter(r.get("commit", record["commit"]) for r in record["rows"])
    which = (f"notebooks of commit {record['commit']}" if len(commits) == 1 else
             "notebooks of commits " + ", ".join(f"{c} ({n} {'lab' if n == 1 else 'labs'})" for c, n in commits.most_common())
             + ", each row's in results/labs/")
    lines = [f"Measured on {m['cpu']} ({m['cores']} cores; OpenCL device {m['device']}, {m['platform']}), "
             f"{record['date']}, {which}. A load average above {m['cores']} means "
             f"other work shared the cores: the wall clock then runs long, the CPU time much less so.",
             "",
             "| lab | run, wall clock (s) | run, CPU time (s) | load average (before, after) | prose words | "
             "reading at 150 words/min (min) | exercises |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    rows = [{**r, **now(r["notebook"])} for r in record["rows"]]
    for r in rows:
        lines.append(f"| {r['notebook']} | {r['seconds']:.0f} | {r['cpu_seconds']:.0f} | {r['load'][0]:.1f}, "
                     f"{r['load'][1]:.1f} | {r['words']:,} | {r['words'] / READING_WPM:.0f} | {r['exercises']} |")
    total = lambda key: sum(r[key] for r in rows)
    lines.append(f"| all | {total('seconds'):.0f} | {total('cpu_seconds'):.0f} | | {total('words'):,} | "
                 f"{total('words') / READING_WPM:.0f} | {total('exercises')} |")
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
