"""The course's one entry point, in Python, so that it runs wherever Python does (Windows included):

    python -m helpers.course open            open the notebooks in JupyterLab
    python -m helpers.course test [ARGS]     the whole test suite (unit tests + nbval)
    python -m helpers.course test --quick    the unit tests, one shape per stage, no notebooks
    python -m helpers.course help            every command

``./course CMD`` (bash: Linux, macOS) runs this module and nothing else. It needs only the
standard library and Python >= 3.10: every command but ``help`` first sets up the checkout's own
virtual environment ``.venv`` (made the first time; the course's packages installed into it again
whenever pyproject.toml changed, a stamp in ``.venv`` says) and then runs in ``.venv``'s Python.
``COURSE_NO_SETUP=1`` runs the command in the Python that started it, as it is (a conda
environment made from environment.yml, or a machine without a network). Every command runs from
the repository's root, so paths are the repository's (``test tests/test_gemm.py``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = ".course-installed"      # in .venv: pyproject.toml's cksum at the last install

# (command, arguments, what it does): what `help` prints, one line each
COMMANDS = (
    ("open", "", "set up .venv (first time only) and open the notebooks in JupyterLab"),
    ("test", "[ARGS]", "set up .venv and run the whole test suite (unit tests + nbval; --quick: minutes)"),
    ("bench", "[ARGS]", "run the benchmark command (python -m helpers.bench ARGS)"),
    ("tune", "[ARGS]", "tune the stages' parameters on your device, ~10 minutes (python -m helpers.tune)"),
    ("record", "[ARGS]", "record a GPU into results/, task by task (python -m helpers.record ARGS)"),
    ("execute", "[NB]", "re-execute notebooks in place on the CPU path (refreshes their outputs)"),
    ("student", "[OUT]", "write the student edition (no solutions) into OUT (default build/student)"),
    ("site", "[OUT]", "build the executed notebooks as an HTML book into OUT (default build/site)"),
    ("setup", "", "only set up .venv (what every other command does first)"),
    ("help", "", "this list (also: no command)"),
)
# the commands that run one module of the course: python -m MODULE ARGS
MODULES = {"bench": "helpers.bench", "tune": "helpers.tune", "record": "helpers.record",
           "execute": "helpers.tools.execute", "student": "helpers.tools.editions",
           "site": "helpers.tools.site"}
# test's pytest options (CI runs them): two workers, each notebook's cells on one worker, the scopes
# taken in the order tests/conftest.py gives them (the longest first), nbval's checked outputs
# compared after tests/nbval_sanitize.cfg, the 25 slowest tests listed at the end (where a run's time
# goes); --quick is tests/conftest.py's
PYTEST = ("--dist", "loadscope", "--no-loadscope-reorder", "--durations", "25", "--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with",
          "tests/nbval_sanitize.cfg")
# pytest options whose next argument is their value, not a path (what test's path check skips)
VALUE_OPTIONS = {"-k", "-m", "-n", "-o", "-p", "-c", "-W", "--dist", "--maxfail", "--durations", "--tb",
                 "--basetemp", "--rootdir", "--confcutdir", "--deselect", "--nbval-sanitize-with",
                 "--override-ini", "--log-level", "--junitxml", "--ignore", "--ignore-glob"}


def help_text() -> str:
    lines = [f"./course {f'{c} {a}'.strip():<18} {what}" for c, a, what in COMMANDS]
    return "\n".join(lines + [
        "./course CMD on Linux and macOS; python -m helpers.course CMD anywhere (Windows: py -m helpers.course CMD).",
        "Set-up needs only Python >= 3.10: it makes a local virtual environment with pyopencl and the",
        "PoCL CPU driver, JupyterLab, ipywidgets, matplotlib and the test tools."])


def cksum(data: bytes) -> str:
    """POSIX cksum's 'CRC LENGTH' of ``data`` (the stamp bash's ./course wrote, so a .venv it set up
    is not installed into again)."""
    def feed(crc: int, byte: int) -> int:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        return crc & 0xFFFFFFFF
    crc = 0
    for b in data:
        crc = feed(crc, b)
    n = len(data)
    while n:
        crc, n = feed(crc, n & 0xFF), n >> 8
    return f"{~crc & 0xFFFFFFFF} {len(data)}"


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def in_venv() -> bool:
    """Whether this Python is the checkout's .venv."""
    return Path(sys.prefix).resolve() == VENV.resolve()


def quiet_nbgrader() -> None:
    """nbgrader is installed for its ClearSolutions step (student), not for its grading pages: its
    server and JupyterLab extensions are switched off in .venv, so JupyterLab starts without their
    warnings and menus."""
    etc = VENV / "etc" / "jupyter"
    (etc / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    (etc / "labconfig").mkdir(parents=True, exist_ok=True)
    off = {f"nbgrader.server_extensions.{x}": False
           for x in ("formgrader", "validate_assignment", "assignment_list", "course_list")}
    (etc / "jupyter_server_config.d" / "zz_course_no_nbgrader.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": off}}) + "\n")
    (etc / "labconfig" / "page_config.json").write_text('{"disabledExtensions": {"@jupyter/nbgrader": true}}\n')


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], cwd=ROOT, check=True)


def install() -> None:
    """In .venv: install the course's packages when pyproject.toml changed since the last install."""
    stamp, want = VENV / STAMP, cksum((ROOT / "pyproject.toml").read_bytes())
    if not stamp.is_file() or stamp.read_text().strip() != want:
        print("Installing the course's packages into .venv (a minute or two, once) ...", flush=True)
        pip("--upgrade", "pip")
        pip("-e", ".[pocl,test]")
        quiet_nbgrader()
        stamp.write_text(want + "\n")
    if not (VENV / "etc" / "jupyter" / "jupyter_server_config.d" / "zz_course_no_nbgrader.json").is_file():
        quiet_nbgrader()


def positional(args: list[str]) -> list[str]:
    """pytest's arguments that are neither options nor an option's value: the paths and node ids."""
    out, value = [], False
    for a in args:
        if value:
            value = False
        elif a.startswith("-"):
            value = a in VALUE_OPTIONS
        else:
            out.append(a)
    return out


def missing_test_path(args: list[str]) -> str | None:
    """The first of test's arguments that names a test file or folder that does not exist (pytest
    under xdist says only "no tests ran"): a one-line error, or None."""
    for arg in positional(args):
        path = arg.split("::")[0]
        if ("/" in path or path.endswith((".py", ".ipynb"))) and not (ROOT / path).exists():
            return (f"error: ./course test {arg}: no such file or folder {path} (the tests are in tests/, "
                    f"the chapters in notebooks/)")
    return None


def run(cmd: list[str]) -> int:
    """Run a command from the repository's root; its exit status. Ctrl-C reaches the command too
    (the benchmark keeps its finished rows): this waits for it to end."""
    proc = subprocess.Popen(cmd, cwd=ROOT)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def command_line(cmd: str, args: list[str]) -> list[str]:
    """What ``cmd ARGS`` runs, in this Python."""
    if cmd == "open":
        if os.name == "posix" and os.geteuid() == 0 and "--allow-root" not in args:
            print("Running as root: passing --allow-root to JupyterLab.", file=sys.stderr)
            args = ["--allow-root", *args]
        return [sys.executable, "-m", "jupyter", "lab", "notebooks/", *args]
    if cmd == "test":
        return [sys.executable, "-m", "pytest", "-n", os.environ.get("COURSE_TEST_WORKERS", "2"), *PYTEST, *args]
    return [sys.executable, "-m", MODULES[cmd], *args]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cmd, args = (argv[0], argv[1:]) if argv else ("help", [])
    if cmd in ("help", "-h", "--help"):
        print(help_text())
        return 0
    if cmd not in {c for c, _, _ in COMMANDS}:
        print(f"unknown command '{cmd}'; the commands are:\n{help_text()}", file=sys.stderr)
        return 2
    if sys.version_info < (3, 10):
        print(f"The course needs Python >= 3.10; found {sys.version.split()[0]}.", file=sys.stderr)
        return 1
    missing = missing_test_path(args) if cmd == "test" else None
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if os.environ.get("COURSE_NO_SETUP", "").strip() != "1":
        if not in_venv():               # made once; then the command runs in .venv's Python
            if not venv_python().exists():
                print("Creating the virtual environment .venv ...", flush=True)
                import venv
                venv.create(VENV, with_pip=True)
            return run([str(venv_python()), "-m", "helpers.course", cmd, *args])
        install()
    if cmd == "setup":
        return 0
    if cmd == "site" and subprocess.run([sys.executable, "-c", "import jupyter_book"], cwd=ROOT,
                                        capture_output=True).returncode != 0:
        pip("-e", ".[site]")
    if os.name == "posix":              # the command takes this process's place (signals, exit status)
        line = command_line(cmd, args)
        os.chdir(ROOT)
        os.execv(line[0], line)
    return run(command_line(cmd, args))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:             # `help | head`: the reader stopped reading, which is no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
