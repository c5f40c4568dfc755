"""The notebooks under nbval (./course test collects them): a notebook that needs a package the course
does not require says so in its metadata ("course": {"needs": ["torch"]}); where that package is
missing, its cells are skipped with the reason, and under COURSE_CI=1 they fail
(helpers/chapters/needs.py), as the tests that need it are."""
from helpers.chapters.needs import needed, notebook_missing


def pytest_runtest_setup(item):
    if item.path.suffix == ".ipynb":
        needed(notebook_missing(item.path))
