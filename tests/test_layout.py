"""The helpers package's layers: imports only go downward (no circles), and the analysis of
recorded results imports no OpenCL or CUDA module."""
import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
import helpers
from helpers import LAYERS      # the one statement of the layers (helpers/__init__.py)


def modules() -> dict:
    out = {}
    for f in (ROOT / "helpers").rglob("*.py"):
        out[".".join(f.relative_to(ROOT).with_suffix("").parts)] = f
    return out


def layer(name: str) -> int:
    return max(i for i, prefix in enumerate(LAYERS) if name == prefix or name.startswith(prefix + "."))


def imports(name: str, path: pathlib.Path) -> set:
    pkg = name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
            target = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{target}.{a.name}"
                found.add(full if (ROOT / (full.replace(".", "/") + ".py")).exists() or
                          (ROOT / full.replace(".", "/")).is_dir() else target)
    return {m for m in found if m.startswith("helpers")}


def test_imports_only_go_downward():
    wrong = []
    for name, path in modules().items():
        for target in imports(name, path):
            if target != "helpers" and layer(target) > layer(name):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "upward imports: " + "; ".join(sorted(wrong))


def test_analysis_imports_no_opencl_or_cuda():
    code = ("import sys; import helpers.analysis.results, helpers.analysis.summary, helpers.analysis.plots, helpers.analysis.compare, helpers.analysis.pairs; "
            "bad = [m for m in ('pyopencl', 'cupy', 'cuda') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_package_docstring_names_the_layers_in_their_order():
    """helpers/__init__.py's docstring walks the layers for a reader: every layer of LAYERS that is
    a module or package of its own appears there, in LAYERS' order."""
    doc = helpers.__doc__
    names = [n.removeprefix("helpers.") for n in LAYERS if n not in ("helpers.__init__", "helpers.__main__")]
    where = {}
    for n in names:
        spelled = [f"{n}/", f"{n}.py"]
        found = [doc.find(w) for w in spelled if doc.find(w) >= 0]
        assert found, f"the package docstring does not name layer {n} ({' or '.join(spelled)})"
        where[n] = min(found)
    order = sorted(names, key=where.get)
    assert order == names, f"the docstring names the layers in another order than LAYERS: {order}"


def named(module: str, doc: str) -> bool:
    """Whether a docstring names a module: as NAME.py or NAME/, as the first word of a table row,
    or (a name no sentence uses as a word: with an underscore or a digit) anywhere as a word."""
    import re
    m = re.escape(module)
    return bool(re.search(rf"(?<![\w.]){m}(\.py|/)", doc) or re.search(rf"^\s+{m}\b", doc, re.M)
                or (re.search(r"[_\d]", module) and re.search(rf"(?<![\w.]){m}\b", doc)))


def unnamed_in_docstrings() -> dict:
    """{package folder: [its modules and subpackages its __init__.py's docstring does not name]}:
    the map of helpers/ is each package's own docstring (helpers/__init__.py's for the top)."""
    import re
    out = {}
    for init in sorted((ROOT / "helpers").rglob("__init__.py")):
        folder = init.parent
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        members = [p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")]
        members += [p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.py"))
                    and p.name != "__pycache__"]
        missing = [m for m in sorted(members) if not named(m, doc)]
        if missing:
            out[str(folder.relative_to(ROOT))] = missing
    return out


def test_each_package_docstring_names_its_modules():
    """A newcomer finds where a thing lives from the docstrings: every module and subpackage is
    named (with a word on what it holds) in its package's __init__.py docstring."""
    missing = unnamed_in_docstrings()
    assert not missing, f"modules their package's docstring does not name: {missing}"
    assert not named("course", "The course's helpers: a course") and named("course", "    course.py  the entry point")
