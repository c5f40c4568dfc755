"""notebooks/GLOSSARY.md: every entry's chapter tags name chapters where the term occurs.

An entry is a line `- **Term, other term (alias)**: definition. [NN, used from MM on]`. Its names
are the comma-separated parts of the bold text, with what stands in parentheses as aliases,
backticks dropped, and each code span (`__local`) a name of its own; a name matches its plural; the tags are the chapter numbers in the closing brackets (the first is where
the term is introduced). A tag is right when one of the entry's names occurs (case-insensitive, as
a word) in that chapter's notebook: a markdown or code cell, not an output."""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = (ROOT / "notebooks" / "GLOSSARY.md").read_text()
ENTRY = re.compile(r"^- \*\*(.+?)\*\*:(.*?)\[([^\]]*\d[^\]]*)\]\s*$", re.M | re.S)


def _chapters() -> dict:
    out = {}
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(p, as_version=4)
        out.setdefault(p.stem.split("_")[0], "")
        out[p.stem.split("_")[0]] += "\n".join(c.source for c in nb.cells)
    return out


def names(term: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in term:
        if ch in "(" and depth == 0:
            parts.append(cur)
            cur, depth = "", 1
        elif ch == ")" and depth:
            parts.append(cur)
            cur, depth = "", 0
        elif ch == ",":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = [p.replace("`", "").strip() for p in parts if p.replace("`", "").strip()]
    return out + [c for c in re.findall(r"`([^`]+)`", term) if c not in out]


def entries():
    for m in ENTRY.finditer(GLOSSARY):
        yield m.group(1), names(m.group(1)), re.findall(r"\b(\d\d[a-z]?)\b", m.group(3))


def occurs(name: str, text: str) -> bool:
    left = r"\b" if name[:1].isalnum() else ""
    right = r"(?:e?s)?\b" if name[-1:].isalnum() else ""
    return re.search(left + re.escape(name) + right, text, re.I) is not None


CHAPTERS = _chapters()


@pytest.mark.parametrize("term,aliases,tags", list(entries()), ids=[e[0][:40] for e in entries()])
def test_glossary_tag_names_a_chapter_where_the_term_occurs(term, aliases, tags):
    assert tags, f"{term}: no chapter tag"
    for tag in tags:
        assert tag in CHAPTERS, f"{term}: tag [{tag}] is no chapter"
        assert any(occurs(n, CHAPTERS[tag]) for n in aliases), f"{term}: none of {aliases} occurs in chapter {tag}"


def test_glossary_has_the_terms_the_chapters_use():
    for term in ("FFT", "ABI", "last-level cache", "Thread, block", "Shared memory", "__syncthreads"):
        assert term.lower() in GLOSSARY.lower(), term
    assert "helpers/chapters/vocabulary.py" in GLOSSARY


def test_names_and_tags_are_parsed():
    term, aliases, tags = next(e for e in entries() if e[0].startswith("Work-group"))
    assert aliases == ["Work-group", "local size"] and tags[0] == "00"
