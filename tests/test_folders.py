"""Commands that write a folder (`./course student OUT`, `./course site OUT`) never delete or
overwrite what they did not write: a folder holding anything else, one of the course's own
folders, or a written file changed since, is refused with one line (exit status 2) before
anything is written."""
import subprocess
from pathlib import Path

import pytest

from helpers.tools import folders, site
from helpers.tools.editions import main as student

ROOT = Path(__file__).resolve().parent.parent


def course(*args):
    """The command as a user types it: ./course student OUT."""
    return subprocess.run([str(ROOT / "course"), *args], cwd=ROOT, capture_output=True, text=True)


def one_line_error(stderr: str, says: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], stderr
    assert "Traceback" not in stderr


def tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.course_venv
def test_student_into_a_folder_with_other_files_deletes_nothing(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data.csv").write_text("1,2")
    before = tree(tmp_path)
    r = course("student", str(tmp_path))
    assert r.returncode == 2
    one_line_error(r.stderr, "holds files that ./course student did not write (sub/data.csv, thesis.tex)")
    assert tree(tmp_path) == before


def test_student_into_the_teacher_notebooks_is_refused(capsys):
    before = tree(ROOT / "notebooks")
    assert student([str(ROOT / "notebooks")]) == 2
    one_line_error(capsys.readouterr().err, "inside the course's notebooks/ folder")
    assert tree(ROOT / "notebooks") == before


@pytest.mark.parametrize("where", [".", "..", "kernels/conv_dgrad", "results"])
def test_the_course_and_its_folders_are_refused(capsys, where):
    assert student([str(ROOT / where)]) == 2
    err = capsys.readouterr().err
    one_line_error(err, "course")


def test_a_file_in_place_of_the_folder_is_refused(tmp_path, capsys):
    (tmp_path / "out").write_text("x")
    assert student([str(tmp_path / "out")]) == 2
    one_line_error(capsys.readouterr().err, "is a file, not a folder")
    assert (tmp_path / "out").read_text() == "x"


@pytest.mark.nbgrader
def test_writing_again_replaces_only_what_it_wrote_and_keeps_saved_work(tmp_path, capsys):
    out = tmp_path / "student"
    assert student([str(out)]) == 0
    first = tree(out)
    assert any(name.endswith(".ipynb") for name in first) and folders.MANIFEST in first
    assert student([str(out)]) == 0                      # an unchanged edition is written again
    assert set(tree(out)) == set(first)
    nb = sorted(out.glob("*.ipynb"))[0]
    nb.write_text(nb.read_text() + " ")                 # a learner saved answers into it
    capsys.readouterr()
    assert student([str(out)]) == 2
    one_line_error(capsys.readouterr().err, f"{nb.name} changed since ./course student wrote it")
    assert nb.read_text().endswith(" ")


@pytest.mark.nbgrader
def test_an_empty_folder_is_taken(tmp_path):
    assert student([str(tmp_path)]) == 0
    assert (tmp_path / folders.MANIFEST).is_file()


def test_site_refuses_a_folder_with_other_files_before_building(tmp_path, capsys, monkeypatch):
    (tmp_path / "notes.md").write_text("mine")
    monkeypatch.setattr(site.subprocess, "run", lambda *a, **k: pytest.fail("the builder ran"))
    assert site.main([str(tmp_path)]) == 2
    one_line_error(capsys.readouterr().err, "holds files that ./course site did not write (notes.md)")
    assert tree(tmp_path) == {"notes.md": b"mine"}


def test_claim_removes_only_listed_unchanged_files(tmp_path):
    out = folders.claim(tmp_path / "o", "cmd x")
    (out / "a").mkdir()
    (out / "a" / "f.txt").write_text("made")
    folders.seal(out, "cmd x")
    folders.claim(out, "cmd x")
    assert not (out / "a").exists() and not any(out.iterdir())
