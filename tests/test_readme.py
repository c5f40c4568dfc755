"""The README's table of recorded GPU results is the one helpers.analysis.results computes from results/."""
from pathlib import Path

from helpers.analysis.results import headline

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_table_matches_the_recorded_results():
    assert headline() in README.read_text(), (
        "README.md's results table differs from results/: paste the output of `python -m helpers.analysis.results`")


def test_readme_vendor_table_matches_the_recorded_results():
    from helpers.analysis.compare import readme_section
    assert readme_section() in README.read_text(), (
        "README.md's table of the course against the vendors differs from results/: paste the output of "
        "`python -m helpers.analysis.compare` (its first table)")
