"""Reuse: one LICENSE naming both licences (MIT for the code, CC BY 4.0 for the prose) and a
CITATION.cff that is valid Citation File Format 1.2.0, whose licences are the LICENSE's."""
import datetime as dt
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
yaml = pytest.importorskip("yaml")    # PyYAML comes with JupyterLab's server

# CFF 1.2.0's top-level keys (schema.json of citation-file-format 1.2.0) and the required ones
CFF_KEYS = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers",
            "keywords", "license", "license-url", "message", "preferred-citation", "references", "repository",
            "repository-artifact", "repository-code", "title", "type", "url", "version"}
CFF_REQUIRED = {"cff-version", "message", "title", "authors"}
PERSON = {"family-names", "given-names", "name-particle", "name-suffix", "affiliation", "email", "orcid",
          "website", "alias", "address", "city", "country", "fax", "post-code", "region", "tel"}
ENTITY = {"name", "address", "city", "country", "email", "date-end", "date-start", "fax", "location", "orcid",
          "post-code", "region", "tel", "website", "alias"}


def cff_problems(data) -> list[str]:
    """What makes ``data`` (a parsed CITATION.cff) invalid CFF 1.2.0, in words ([] when valid)."""
    if not isinstance(data, dict):
        return ["not a mapping"]
    out = [f"unknown key {k!r}" for k in set(data) - CFF_KEYS]
    out += [f"missing required key {k!r}" for k in sorted(CFF_REQUIRED - set(data))]
    if data.get("cff-version") != "1.2.0":
        out.append(f"cff-version must be the string '1.2.0', got {data.get('cff-version')!r}")
    for k in ("message", "title"):
        if k in data and not (isinstance(data[k], str) and data[k].strip()):
            out.append(f"{k} must be a non-empty string")
    authors = data.get("authors")
    if not isinstance(authors, list) or not authors:
        out.append("authors must be a non-empty list")
    else:
        for a in authors:
            if not isinstance(a, dict) or not a:
                out.append(f"author {a!r} is not a mapping")
            elif "name" in a and not set(a) - ENTITY:
                continue
            elif set(a) & {"family-names", "given-names"} and not set(a) - PERSON:
                continue
            else:
                out.append(f"author {a!r} is neither a person (family-names, ...) nor an entity (name, ...)")
    if data.get("type", "software") not in ("software", "dataset"):
        out.append("type must be 'software' or 'dataset'")
    licences = data.get("license", [])
    for lic in [licences] if isinstance(licences, str) else licences:
        if not isinstance(lic, str) or not re.fullmatch(r"[A-Za-z0-9.+-]+", lic):
            out.append(f"license {lic!r} is not an SPDX identifier")
    if "date-released" in data:
        d = data["date-released"]
        if not isinstance(d, dt.date):
            try:
                dt.date.fromisoformat(str(d))
            except ValueError:
                out.append(f"date-released {d!r} is not a YYYY-MM-DD date")
    return out


def test_citation_file_is_valid_cff_1_2_0():
    data = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff_problems(data) == []
    assert data["type"] == "software"
    assert data["authors"] == [{"name": "The course's authors"}]
    assert sorted(data["license"]) == ["CC-BY-4.0", "MIT"]


def test_the_checker_of_cff_fails_on_each_fault():
    good = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    faults = {"no authors": {k: v for k, v in good.items() if k != "authors"},
              "a number as version": {**good, "cff-version": 1.2},
              "a misspelt key": {**good, "licence": "MIT"},
              "an author without a name": {**good, "authors": [{"affiliation": "x"}]},
              "a licence in words": {**good, "license": "MIT or CC BY"},
              "another type": {**good, "type": "book"}}
    for what, data in faults.items():
        assert cff_problems(data), f"the check passed a CITATION.cff with {what}"


def test_the_licence_names_both_licences_and_the_authors():
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text and "Creative Commons Attribution 4.0" in text
    assert "Copyright (c) 2026 The course's authors" in text
    for part in ("kernels/", "helpers/", "tests/", "notebooks"):
        assert part in text, f"LICENSE does not say which licence covers {part}"


def test_readme_says_how_to_cite_and_reuse():
    readme = (ROOT / "README.md").read_text()
    assert "CITATION.cff" in readme and "LICENSE" in readme
    assert "MIT" in readme and "CC BY 4.0" in readme
