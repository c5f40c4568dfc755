"""The helpers package's layers: imports only go downward (no circles), and the analysis of
recorded results imports no OpenCL or CUDA module."""
import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# lower layers first; a module may import from its own layer or the ones before it
LAYERS = ["helpers.engine", "helpers.ops", "helpers.launch", "helpers.stages", "helpers.tuning",
          "helpers.chooser", "helpers.runner", "helpers.emulation", "helpers.analysis", "helpers.peak", "helpers.trials", "helpers.bench", "helpers.tune", "helpers.registers", "helpers.floor",
          "helpers.profile_stage", "helpers.ncu_banks", "helpers.tc_peak", "helpers.train", "helpers.record",
          "helpers.chapters", "helpers.__init__", "helpers.__main__"]


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
