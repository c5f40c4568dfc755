"""pyproject.toml and environment.yml list the same packages."""
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names of what pip installs under another name, and conda-only helpers
PIP_TO_CONDA = {"pocl-binary-distribution": "pocl"}
CONDA_ONLY = {"python", "pip", "ocl-icd-system"}


def names(specs):
    return {re.split(r"[<>=!\[ ;]", s.strip(), maxsplit=1)[0].lower() for s in specs}


def test_environment_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip = names(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pip |= names(extra)
    pip = {PIP_TO_CONDA.get(n, n) for n in pip}
    conda = set()
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    for line in text.splitlines():
        m = re.match(r"^  - ([A-Za-z0-9_.\-]+)", line) or re.match(r"^      - ([A-Za-z][A-Za-z0-9_.\-]+)", line)
        if m:
            conda.add(m.group(1).lower())
    assert pip == conda - CONDA_ONLY, f"only in pyproject: {pip - conda}; only in environment.yml: {conda - CONDA_ONLY - pip}"
