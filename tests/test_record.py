"""The recording plan for a GPU (helpers/record.py): every command valid without a device, every
file named as the H200's counterpart the chapters read, and the runner's choice of tasks."""
import json
import shlex
import sys

import pytest

import helpers
from helpers import bench, record
from helpers.analysis.results import RESULTS
from helpers.record import PLAN, Task

RECORDED = "nvidia-h200"   # the device whose files the plan mirrors
# tasks added with their command before their first run on the H200 (their file comes from it)
NOT_YET_RECORDED = {"training-resnet-stage", "training-torch-resnet", "wgrad-phases-resnet50"} | {
    f"anyshape-{layers}-{op}" for layers, op, *_ in record.ANY_SHAPE_TASKS} | {   # chapter 16's sets
    t.name for t in PLAN if t.name.startswith("zoo-stages-")}                      # the model's zoo runs


def bench_argv(task: Task) -> list[str] | None:
    words = shlex.split(record.command(task, "nvidia", "SLUG", python="python"))
    while words and "=" in words[0]:          # the environment's settings before the command
        words = words[1:]
    if words[:3] != ["python", "-m", "helpers.bench"]:
        return None
    return words[3:]


def test_task_names_and_files_are_unique():
    assert len({t.name for t in PLAN}) == len(PLAN)
    assert len({t.writes for t in PLAN}) == len(PLAN)
    assert all("{slug}" in t.writes for t in PLAN)


@pytest.mark.parametrize("task", [t for t in PLAN if bench_argv(t)], ids=lambda t: t.name)
def test_bench_task_is_a_valid_benchmark_command(task):
    """Op, stages, layer set and defines exist in the registry (checked as the benchmark checks
    them, before it opens a device), and the file it writes is the one the task names."""
    a, stages, _ = bench.checked_args(bench_argv(task))
    if a.out:
        assert a.out == f"results/{task.writes.format(slug='SLUG')}"
    else:
        act = f"_{a.activation}" if a.activation != "none" else ""
        tag = f"_{a.tag}" if a.tag else ""
        assert task.writes.format(slug="SLUG") == f"{a.op}_{a.layers}{act}{tag}_SLUG.json"


@pytest.mark.parametrize("task", PLAN, ids=lambda t: t.name)
def test_task_writes_what_the_h200_has(task):
    """Each task writes the file name of a run recorded on the H200, so that the chapters and
    README's tables read the new device's file as they read the H200's; only parameter searches
    (``_tuned``), whose files no chapter reads, and the test logs may be new names."""
    name = task.writes.format(slug=RECORDED)
    if "_tuned_" in name or name.endswith(".log") or task.name in NOT_YET_RECORDED:
        return
    assert (RESULTS / name).is_file(), f"{task.name} writes {name}, which the H200 has no counterpart of"


def test_searches_come_before_the_runs_that_read_them():
    order = [t.name for t in PLAN]
    assert set(record.ZOO_OPS) == {p.name.split("_zoo_")[0] for p in RESULTS.glob("*_zoo_nvidia-h200.json")}
    for op in record.ZOO_OPS:                                   # the model ranks auto's candidates by them
        parts = [n for n in order if n.startswith(f"zoo-stages-{op}-")]
        assert parts and max(map(order.index, parts)) < order.index(f"zoo-{op}")
        argvs = [bench_argv(record.get_task(n)) for n in parts]
        covered = [s for argv in argvs for s in argv[argv.index("--stages") + 1].split(",")]
        assert sorted(covered) == sorted(record.candidates(op)), op
    assert order.index("tune-taps") < order.index("taps-resnet50")
    assert order.index("tune-wino4") < order.index("auto-resnet50")
    assert order.index("tune-wino4-wg") < order.index("channel-major0") < order.index("auto-resnet50")
    assert order.index("tune-local") < order.index("local-resnet50")
    assert order.index("tune-tma") < order.index("tma-resnet50")
    assert order.index("ladder-resnet50") < order.index("local-final-resnet50")   # stage 08 tuned first
    assert order.index("untuned-resnet50") < order.index("ladder-resnet50")       # before any search
    assert order.index("wgrad-resnet50") < order.index("wgrad-phases-resnet50")   # stage 05 tuned first


def test_winograd4_searches_in_two_tasks_cover_its_tune_list():
    """F(4x4)'s input gradient is searched in two tasks (tiles, then WG: a joint search would take
    three times as long); between them every parameter of its tune list is searched, none twice."""
    names = []
    for task in PLAN:
        words = bench_argv(task)
        if words and "--tune-only" in words and bench.checked_args(words)[1] == ["winograd4"]:
            names += words[words.index("--tune-only") + 1].split(",")
    assert sorted(names) == sorted(helpers.get_stage("conv_dgrad", "winograd4").tune)
    assert [t.name for t in PLAN].index("tune-wino4") < [t.name for t in PLAN].index("tune-wino4-wg")


def fake_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    return [Task("a", "echo a", "a_{slug}.json", 2, ""), Task("b", "echo b", "b_{slug}.json", 3, ""),
            Task("c", "echo c", "c_{slug}.json", 9, "")]


def test_pending_skips_what_is_recorded_and_keeps_to_the_budget(tmp_path, monkeypatch):
    plan = fake_plan(tmp_path, monkeypatch)
    assert [t.name for t in record.pending("dev", 5, plan)] == ["a", "b"]
    assert [t.name for t in record.pending("dev", 4, plan)] == ["a"]
    (tmp_path / "a_dev.json").write_text("{}")
    assert [t.name for t in record.pending("dev", 4, plan)] == ["b"]
    (tmp_path / "b_dev.json").write_text("{}")
    assert [t.name for t in record.pending("dev", 4, plan)] == ["c"]    # the next task even if longer
    (tmp_path / "c_dev.json").write_text("{}")
    assert record.pending("dev", 60, plan) == []


def test_pending_leaves_out_what_failed_last_time(tmp_path, monkeypatch):
    plan = fake_plan(tmp_path, monkeypatch)
    (tmp_path / "record_dev.json").write_text(json.dumps([
        {"task": "a", "exit": 1, "wrote": None}, {"task": "b", "exit": 2, "wrote": None},
        {"task": "b", "exit": 0, "wrote": "b_dev.json"}, {"task": "c", "exit": 0, "wrote": None}]))
    # a failed; b's last run passed (its file since removed); c passed and wrote nothing
    assert [t.name for t in record.pending("dev", 20, plan)] == ["b"]


def test_run_task_runs_the_command_and_logs_it(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    out = tmp_path / "x_dev.json"
    task = Task("x", "{python} -c 'import sys; open(sys.argv[1], \"w\").write(\"{{}}\")' " + str(out),
                "x_{slug}.json", 1, "")
    log = tmp_path / "log.json"
    assert record.run_task(task, "cpu", "dev", log) == 0
    assert out.is_file()
    failing = Task("y", "exit 3", "y_{slug}.json", 1, "")
    assert record.run_task(failing, "cpu", "dev", log) == 3
    (tmp_path / "z_dev.json").write_text("{}")      # an older file: a failed run did not write it
    assert record.run_task(Task("z", "exit 1", "z_{slug}.json", 1, ""), "cpu", "dev", log) == 1
    entries = json.loads(log.read_text())
    assert [(e["task"], e["exit"], e["wrote"]) for e in entries] == [("x", 0, "x_dev.json"), ("y", 3, None),
                                                                      ("z", 1, None)]
    assert sys.executable not in entries[0]["command"]


def test_cli_lists_the_plan_and_refuses_unknown_tasks(capsys):
    assert record.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(t.name in out for t in PLAN)
    assert record.main(["--run", "nope"]) == 2
    assert "no task 'nope'" in capsys.readouterr().err
    assert record.main(["--budget", "5"]) == 2
    assert "--device" in capsys.readouterr().err


def test_the_recorder_s_log_is_not_read_as_a_run(tmp_path, monkeypatch):
    """record_<device>.json (a list of tasks) lies beside the runs in results/; the loaders that
    glob results/ for runs (README's vendor table, the chapters) must pass over it."""
    from helpers.analysis import results
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    (tmp_path / "record_dev.json").write_text(json.dumps([{"task": "a", "exit": 0}]))
    (tmp_path / "tuned.json").write_text("{}")
    (tmp_path / "conv_dgrad_x_dev.json").write_text(json.dumps({"op": "conv_dgrad", "rows": []}))
    assert [r["file"] for r in results.load()] == ["conv_dgrad_x_dev.json"]


def test_each_task_says_what_reads_it_in_the_courses_own_words():
    """A reader of `./course record --list` can look each purpose up: a chapter, README, or the
    tests; never a tracker's number."""
    import re
    for t in PLAN:
        assert not re.search(r"\bissue", t.why, re.I), t
        assert re.search(r"chapter|README|test", t.why), t


def test_the_files_tasks_write_are_the_commands_own_names():
    """The benchmark tasks' files come from the benchmark's naming (helpers/analysis/names.py), so
    the plan cannot name a file its command does not write."""
    from helpers.analysis import names
    t = record.get_task("auto-fresh-vgg16")
    assert t.writes == names.bench("conv_dgrad", "vgg16", "{slug}", tag="fresh") == "conv_dgrad_vgg16_fresh_{slug}.json"
    assert record.get_task("registers-one-pass").writes == names.registers("one_pass", "{slug}")


def test_the_notebook_parts_hold_every_chapter_once():
    from pathlib import Path
    chapters = sorted(p.stem for p in (Path(record.ROOT) / "notebooks").glob("*.ipynb"))
    parts = [n for part in record.NOTEBOOK_PARTS for n in part.split()]
    assert sorted(parts) == chapters and len(parts) == len(set(parts))


def test_lanes_share_the_minutes_and_keep_the_plans_order():
    tasks = [Task(n, "true", f"{n}_{{slug}}.json", m, "") for n, m in (("a", 5), ("b", 3), ("c", 3), ("d", 1), ("e", 2))]
    dealt = record.lanes(tasks, 2)
    assert sorted(t.name for lane in dealt for t in lane) == list("abcde")
    assert [sum(t.minutes for t in lane) for lane in dealt] == [7, 7]
    assert all([tasks.index(t) for t in lane] == sorted(tasks.index(t) for t in lane) for lane in dealt)
    assert record.lanes(tasks, 1) == [tasks]


def test_an_interrupted_task_is_logged_and_the_run_stops(tmp_path, monkeypatch, capsys):
    """A time limit's SIGINT (timeout -s INT) reaches the recorder and its task: the task finishes
    writing (its summary), its entry says interrupted, the next task never starts, exit 130."""
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    cut = Task("cut", f"echo rows > {tmp_path}/cut_{{slug}}.log; kill -INT $PPID; sleep 0.5; "
                      f"echo summary >> {tmp_path}/cut_{{slug}}.log", "cut_{slug}.log", 1, "")
    after = Task("after", f"echo ran > {tmp_path}/after_{{slug}}.log", "after_{slug}.log", 1, "")
    monkeypatch.setattr(record, "PLAN", [cut, after])
    monkeypatch.setattr(record, "slug_of", lambda device: "dev")
    assert record.main(["--device", "cpu", "--run", "cut,after"]) == 130
    assert (tmp_path / "cut_dev.log").read_text() == "rows\nsummary\n"
    assert not (tmp_path / "after_dev.log").exists()
    logged = json.loads((tmp_path / "record_dev.json").read_text())
    assert [(e["task"], e.get("interrupted")) for e in logged] == [("cut", True)]
    assert "interrupted" in capsys.readouterr().err


def test_each_process_gets_its_share_of_the_cores_for_blas(tmp_path, monkeypatch):
    """NumPy's BLAS threads: the cores over the lanes and the task's pytest workers, at least one,
    unless the caller set them."""
    assert record.blas_threads(f"{record.GPU_TESTS} tests", lanes=1, cores=16) == 2        # -n 8
    assert record.blas_threads(f"{record.NBVAL_FULL} notebooks", lanes=4, cores=64) == 4   # -n 4, 4 lanes
    assert record.blas_threads("python -m helpers.bench --op conv_dgrad", lanes=2, cores=32) == 16
    assert record.blas_threads(f"{record.GPU_TESTS} tests", lanes=4, cores=16) == 1
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    for name in record.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    task = Task("t", f"echo $OPENBLAS_NUM_THREADS $OMP_NUM_THREADS > {tmp_path}/t_{{slug}}.log", "t_{slug}.log", 1, "")
    record.run_task(task, "cpu", "dev", tmp_path / "log.json")
    want = record.blas_threads(task.command)
    assert (tmp_path / "t_dev.log").read_text().split() == [str(want)] * 2
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    record.run_task(task, "cpu", "dev", tmp_path / "log.json")
    assert (tmp_path / "t_dev.log").read_text().split()[0] == "3"


def test_each_lane_runs_on_its_own_gpu(tmp_path, monkeypatch):
    """Lane i's tasks see CUDA_VISIBLE_DEVICES=i (NVIDIA's OpenCL and CUDA honour it); both lanes
    log into the one record log."""
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    tasks = [Task(n, f"echo $CUDA_VISIBLE_DEVICES > {tmp_path}/{n}_{{slug}}.json", f"{n}_{{slug}}.json", m, "")
             for n, m in (("a", 2), ("b", 1), ("c", 1))]
    assert record.run_lanes(tasks, "cpu", "dev", 2, gpus=2) == []
    assert {n: (tmp_path / f"{n}_dev.json").read_text().strip() for n in "abc"} == {"a": "0", "b": "1", "c": "1"}
    logged = json.loads((tmp_path / "record_dev.json").read_text())
    assert sorted((e["task"], e["gpu"]) for e in logged) == [("a", 0), ("b", 1), ("c", 1)]


def test_lanes_beyond_the_gpus_share_them(tmp_path, monkeypatch):
    """Four lanes on a machine of one GPU all run on GPU 0 (a lane pinned to a GPU that is not
    there would see none, and its tasks fail at their first cell); on two GPUs they alternate."""
    monkeypatch.setattr(record, "RESULTS", tmp_path)
    tasks = [Task(n, f"echo $CUDA_VISIBLE_DEVICES > {tmp_path}/{n}_{{slug}}.json", f"{n}_{{slug}}.json", 1, "")
             for n in "abcd"]
    for gpus, seen in ((1, "0000"), (2, "0101")):
        assert record.run_lanes(tasks, "cpu", "dev", 4, gpus=gpus) == []
        assert "".join((tmp_path / f"{n}_dev.json").read_text().strip() for n in "abcd") == seen


def test_the_gpu_count_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert record.gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert record.gpu_count() == 1


def test_a_kept_log_names_no_machine_path(monkeypatch):
    """The recorder keeps test logs in results/: the checkout's folder and the Python installation's
    (and PYTHONPATH's: wheels installed for the run) are taken out of them."""
    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    text = (f"platform linux -- Python 3.12 -- {sys.prefix}/bin/python3\nrootdir: {record.ROOT}\n"
            f"{record.ROOT}/tests/test_x.py:3: in f\n/tmp/site/pyopencl/__init__.py:9: LogicError\n")
    out = record.without_paths(text)
    assert str(record.ROOT) not in out and sys.prefix not in out and "/tmp/site" not in out
    assert "tests/test_x.py:3" in out and "<python>/pyopencl/__init__.py" in out
