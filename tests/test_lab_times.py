"""INSTRUCTORS.md's class times are measured (helpers/tools/lab_times.py: the student edition
executed notebook by notebook) and its table is the one rendered from the recorded file."""
import re
from pathlib import Path

from helpers.tools.lab_times import counts, recorded, table

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- lab_times -->\n(.*?)\n<!-- end lab_times -->", re.S)


def test_instructors_table_is_rendered_from_the_recorded_times():
    records = recorded()
    assert records, "no results/labs/student_times_*.json: run python -m helpers.tools.lab_times"
    m = BLOCK.search((ROOT / "notebooks" / "INSTRUCTORS.md").read_text())
    assert m, "INSTRUCTORS.md has no <!-- lab_times --> block"
    assert m.group(1).strip() == table(records[0]).strip(), (
        "INSTRUCTORS.md's class times differ from results/labs/: paste python -m helpers.tools.lab_times --table")


def test_every_notebook_was_timed():
    rows = {r["notebook"] for r in recorded()[0]["rows"]}
    assert rows == {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}, rows ^ {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_table_states_machine_commit_and_totals():
    record = {"date": "2026-01-01", "commit": "abc", "machine": {"cpu": "A CPU", "cores": 2, "device": "dev",
                                                                 "platform": "PoCL"},
              "rows": [{"notebook": "00_x", "seconds": 12.3, "cpu_seconds": 9.6, "load": [1.0, 1.2], "words": 300,
                        "exercises": 1},
                       {"notebook": "01_y", "seconds": 7.7, "cpu_seconds": 5.0, "load": [1.2, 0.9], "words": 150,
                        "exercises": 2}]}
    text = table(record)
    assert "A CPU (2 cores" in text and "commit abc" in text
    assert "| 00_x | 12 | 10 | 1.0, 1.2 | 300 | 2 | 1 |" in text and "| all | 20 | 15 | | 450 | 3 | 3 |" in text


def test_counts_reads_words_and_exercises():
    c = counts(ROOT / "notebooks" / "02_naive_dgrad.ipynb")
    assert c["exercises"] == 2 and c["words"] > 500
    # 13b's third exercise is answered in words (no checked cell): three exercises, two checked
    assert counts(ROOT / "notebooks" / "13b_hopper_wgmma_tma.ipynb")["exercises"] == 3


def test_rows_measured_at_other_commits_are_named():
    """Re-timing a few notebooks keeps the other rows' commits, and the header names each commit."""
    row = {"seconds": 1.0, "cpu_seconds": 1.0, "load": [0.1, 0.1], "words": 10, "exercises": 0}
    record = {"date": "2026-01-01", "commit": "new", "machine": {"cpu": "A CPU", "cores": 2, "device": "d", "platform": "p"},
              "rows": [{"notebook": "00_x", **row, "commit": "old"}, {"notebook": "01_y", **row, "commit": "old"},
                       {"notebook": "02_z", **row, "commit": "new"}]}
    text = table(record)
    assert "commits old (2 labs), new (1 lab)" in text and "commit new." not in text
