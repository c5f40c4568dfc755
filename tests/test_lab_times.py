"""INSTRUCTORS.md's class times are measured (helpers/tools/lab_times.py: the student edition
executed notebook by notebook) and its table is the one rendered from the recorded file."""
import json
import re
from pathlib import Path

from helpers.tools.lab_times import READING_WPM, counts, recorded, table

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


# INSTRUCTORS.md's rule, read from its text: "a lab of 60 to 90 minutes" and "plan a lab as run + reading +
# about 10 to 20 minutes per exercise"
LAB = re.compile(r"is a lab of (\d+) to (\d+) minutes")
PLAN = re.compile(r"plan a lab as run \+ reading \+ about (\d+) to (\d+) minutes per exercise")


def _rule() -> tuple[int, int, int]:
    """(the longest a lab may take, minutes per exercise at least, at most) as INSTRUCTORS.md states them."""
    text = " ".join((ROOT / "notebooks" / "INSTRUCTORS.md").read_text().split())
    lab, plan = LAB.search(text), PLAN.search(text)
    assert lab and plan, "INSTRUCTORS.md no longer states the lab's length and its planning rule in these words"
    return int(lab.group(2)), int(plan.group(1)), int(plan.group(2))


def planned(row: dict, per_exercise: tuple[int, int]) -> tuple[float, float]:
    """A lab's planned minutes by the rule: the recorded run, the reading at READING_WPM, and the
    exercises at the least and the most minutes each."""
    base = row["seconds"] / 60 + row["words"] / READING_WPM
    return base + per_exercise[0] * row["exercises"], base + per_exercise[1] * row["exercises"]


def over_time(rows: list[dict], longest: int, per_exercise: tuple[int, int]) -> dict:
    """{lab: its planned (least, most) minutes} for every lab whose most is over ``longest``."""
    return {r["notebook"]: tuple(round(m) for m in planned(r, per_exercise)) for r in rows
            if planned(r, per_exercise)[1] > longest}


def test_every_lab_fits_its_class_time_by_the_instructors_rule():
    """Run time (recorded) + prose at 150 words a minute + the slow end of the minutes per exercise,
    with the words and exercises of today's notebooks, stays within the longest lab, for every notebook.
    (The short end is not bounded: most early chapters plan 20 to 55 minutes.)"""
    longest, *per_exercise = _rule()
    rows = [{**r, **counts(ROOT / "notebooks" / f"{r['notebook']}.ipynb")} for r in recorded()[0]["rows"]]
    assert len(rows) >= 20
    over = over_time(rows, longest, tuple(per_exercise))
    assert not over, f"labs over {longest} minutes by INSTRUCTORS.md's rule (least, most): {over}"


def test_over_time_finds_a_lab_one_exercise_or_a_page_too_long():
    row = {"notebook": "16_x", "seconds": 120.0, "words": 3900, "exercises": 3}     # 2 + 26 + 30 to 60 minutes
    assert not over_time([row], 90, (10, 20))
    assert over_time([{**row, "exercises": 4}], 90, (10, 20)) == {"16_x": (68, 108)}
    assert over_time([{**row, "words": 4350}], 90, (10, 20)) == {"16_x": (61, 91)}


# Chapter 11 was too much for a class at about 1,245 lines of listings beside its prose (issue 47); its
# listings now show what its text explains. The lines of every kernel listing and diff it stores:
LISTING_LINES_11 = 400


def listing_lines(path: Path) -> int:
    """The lines of the kernel listings and diffs a notebook shows (outputs of show_source, show_diff
    and a gap's show: the course's Source, marked ``course_source``)."""
    nb = json.loads(path.read_text())
    return sum(len("".join(out["data"]["text/plain"]).splitlines())
               for cell in nb["cells"] for out in cell.get("outputs", [])
               if "course_source" in out.get("metadata", {}).get("text/html", {}))


def test_chapter_11_listings_stay_within_a_class():
    path = ROOT / "notebooks" / "11_conv_as_gemm.ipynb"
    assert 100 < listing_lines(path) <= LISTING_LINES_11, listing_lines(path)
