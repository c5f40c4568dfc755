"""The registry as validated data: each kind of mistake, planted in a copy of the registry (one
bad entry), is refused by the validator that runs when the registry loads, with a message
naming the stage and the problem; a chapter number that names several stages is answered with
the choices; the lists of operations, families and launches come from where they are defined."""
import dataclasses

import pytest

from helpers import stages
import importlib
import pkgutil

import helpers.launch
from helpers.launch import direct, is_family, local, unrolled
from helpers.stages import REGISTRY, RegistryError, get_stage, validate

NAIVE = get_stage("conv_dgrad", "naive")
TC = get_stage("conv_dgrad", "tc_fp16")


def with_entry(op: str, stage: str, **changes) -> dict:
    """A copy of the registry whose stage ``op/stage`` has ``changes``."""
    copy = {o: list(ss) for o, ss in REGISTRY.items()}
    copy[op] = [dataclasses.replace(s, **changes) if s.name == stage else s for s in copy[op]]
    return copy


def with_added(op: str, stage) -> dict:
    copy = {o: list(ss) for o, ss in REGISTRY.items()}
    copy[op] = copy[op] + [stage]
    return copy


def test_the_registry_validates():
    """And its operations are those of helpers/ops/ (OPERATIONS), each with its stages: a new
    operation needs no count or list edited here (tests/test_recipes.py)."""
    from helpers.ops import OPERATIONS
    validate(REGISTRY)
    assert stages.OPS == tuple(REGISTRY) and set(stages.OPS) == set(OPERATIONS) and all(REGISTRY.values())


# one planted mistake each: (op, stage, its changed fields, what the error must say)
MISTAKES = [
    pytest.param("conv_dgrad", "naive", dict(kernel="conv_dgrad/02_nave.cl"),
                 r"\(stage 02_naive\): kernel file kernels/conv_dgrad/02_nave.cl does not exist", id="missing kernel file"),
    pytest.param("conv_dgrad", "naive", dict(kernel="conv_dgrad/02_naive.cu"),
                 r"stage 02_naive.*a opencl stage builds a .cl file", id="kernel of the other backend"),
    pytest.param("conv_dgrad", "naive", dict(number=4),
                 r"stage 04_naive.*does not start with its number 04_", id="kernel file of another chapter"),
    pytest.param("conv_dgrad", "naive", dict(number="2"),
                 r"is not a chapter number", id="number not an integer"),
    pytest.param("conv_dgrad", "naive", dict(family="direct"),
                 r"family 'direct' is not a launcher module of helpers/launch/ .*the module itself", id="family by name"),
    pytest.param("conv_dgrad", "naive", dict(family=unrolled),
                 r"family 'helpers.launch.unrolled' is not a launcher module", id="module that is no family"),
    pytest.param("conv_dgrad", "naive", dict(launch="per_output"),
                 r"launch 'per_output' is none of the direct family's: per_input_element", id="unknown launch"),
    pytest.param("conv_dgrad", "output_depth", dict(jit="depth16"),
                 r"06_output_depth.*jit='depth16' is not a function: an entry holds a function of "
                 r"helpers/launch/direct.py itself", id="hook by name"),
    pytest.param("conv_dgrad", "local_tile", dict(requires=direct.depth16),
                 r"requires='depth16' is not a function of helpers/launch/local.py", id="hook of another family"),
    pytest.param("conv_dgrad", "width", dict(generate=local.jit_tile),
                 r"generate='jit_tile' is not a function of helpers/launch/direct.py", id="generator of another family"),
    pytest.param("conv_dgrad", "naive", dict(source=lambda d: ""),
                 r"02_naive.*source= is set only on a copy", id="source in the registry"),
    pytest.param("conv_dgrad", "naive", dict(backend="metal"),
                 r"backend 'metal' is none of opencl, cuda", id="unknown backend"),
    pytest.param("conv_dgrad", "naive_fp16", dict(precision="fp8"),
                 r"precision 'fp8' is none of fp32, tf32, fp16, bf16", id="unknown precision"),
    pytest.param("conv_dgrad", "naive_fp16", dict(precision="bf16"),
                 r"a bf16 stage has its precision in its name", id="precision not in the name"),
    pytest.param("conv_dgrad", "naive", dict(defines={"WG": "64"}),
                 r"defines: WG='64' is not an integer >= 0", id="define not an integer"),
    pytest.param("conv_dgrad", "naive", dict(defines={"wg": 64}, tune={}),
                 r"defines: 'wg' is not a JIT parameter name", id="define name"),
    pytest.param("conv_dgrad", "width", dict(fast={"FAST": "1"}),
                 r"08_width.*fast: FAST='1' is not an integer >= 0", id="fast path define"),
    pytest.param("conv_dgrad", "naive", dict(tune={"WG": [64], "TX": [8, 16]}),
                 r"tune: TX is not one of its defines \(WG\)", id="tune key not a define"),
    pytest.param("conv_dgrad", "naive", dict(tune={"WG": []}),
                 r"tune: WG=\[\] is not a non-empty list of integers", id="tune of no candidates"),
    pytest.param("conv_dgrad", "naive", dict(tune={"WG": [True, 64]}),
                 r"tune: WG=\[True, 64\] is not a non-empty list of integers", id="tune of a flag as a number"),
    pytest.param("conv_dgrad", "naive", dict(tune={"WG": [64, 64]}),
                 r"lists a candidate twice", id="tune candidate twice"),
    pytest.param("conv_dgrad", "naive", dict(tune={"WG": [0, 64]}),
                 r"tune: WG=\[0, 64\]: candidates are >= 1, or 0 and 1 for a switch", id="tune candidate zero"),
    pytest.param("conv_wgrad", "igemm", dict(variants=({"SLICES": 32},)),
                 r"variants: \{'SLICES': 32\} sets SLICES, not one of its defines", id="variant of no define"),
    pytest.param("conv_wgrad", "igemm", dict(variants=({"SLICE": 4096},)),
                 r"is its defaults", id="variant that is the default"),
    pytest.param("conv_dgrad", "local_tile", dict(fallback="widht"),
                 r"09_local_tile.*fallback 'widht' is no stage of conv_dgrad", id="fallback to no stage"),
    pytest.param("conv_dgrad", "prefetch_cuda", dict(fallback="width"),
                 r"fallback 'width' runs on opencl; a cuda stage falls back to a cuda stage", id="fallback to another backend"),
    pytest.param("conv_dgrad", "naive", dict(fallback="memoized_bounds"),
                 r"fallback 'memoized_bounds' without requires=", id="fallback never reached"),
    pytest.param("conv_dgrad", "winograd", dict(fallback="winograd4"),
                 r"fallback cycle: winograd -> winograd4 -> winograd", id="fallback cycle"),
    pytest.param("conv_dgrad", "hoisted_cuda", dict(tune={"TY": [4]}),
                 r"10_hoisted_cuda.*its tune .* differs from its OpenCL stage 10_hoisted's", id="twin that differs"),
    pytest.param("conv_dgrad", "naive_cuda", dict(name="plain_cuda"),
                 r"a CUDA stage on fp32 is the twin of an OpenCL stage", id="CUDA stage that is no twin"),
    pytest.param("conv_dgrad", "tc_fp16", dict(ptx=()),
                 r"13_tc_fp16.*declares the instructions its PTX must hold", id="tensor-core stage without its PTX"),
    pytest.param("conv_dgrad", "naive", dict(ptx=("mma.sync",)),
                 r"ptx=\.\.\. is for CUDA stages", id="PTX of an OpenCL stage"),
    pytest.param("conv_dgrad", "naive", dict(arch="sm_90a"),
                 r"arch 'sm_90a': a CUDA architecture", id="arch of an OpenCL stage"),
    pytest.param("conv_dgrad", "naive", dict(epilogue=True),
                 r"epilogue=True, but conv_dgrad has no fused epilogue", id="epilogue of an op without one"),
    pytest.param("gemm", "naive", dict(any_shape=True),
                 r"any_shape=True, but gemm takes no shape beyond its own", id="any shape of an op without shapes"),
    pytest.param("conv_dgrad", "width", dict(branches=("outside",)),
                 r"08_width.*branches: kernels/conv_dgrad/08_width.cl declares no bool 'outside'", id="branch the kernel does not declare"),
    pytest.param("conv_dgrad", "auto", dict(kernel="conv_dgrad/11_igemm_delta.cl"),
                 r"11_auto.*a choosing stage runs no kernel of its own, but sets kernel", id="chooser with a kernel"),
    pytest.param("conv_dgrad", "naive", dict(number="2"),
                 r"is not a chapter number", id="number not an integer"),
]


@pytest.mark.parametrize("op, stage, changes, message", MISTAKES)
def test_each_kind_of_mistake_is_refused_naming_the_stage(op, stage, changes, message):
    with pytest.raises(RegistryError, match=message):
        validate(with_entry(op, stage, **changes))


def test_a_second_stage_of_the_same_name_is_refused():
    with pytest.raises(RegistryError, match=r"conv_dgrad/'naive'.*a second stage of conv_dgrad with the name 'naive'"):
        validate(with_added("conv_dgrad", dataclasses.replace(NAIVE, title="again")))


def test_a_stage_listed_under_another_op_is_refused():
    with pytest.raises(RegistryError, match=r"gemm/'naive'.*its op is 'conv_dgrad', but it is listed under 'gemm'"):
        validate(with_added("gemm", NAIVE))


def test_an_op_without_its_module_is_refused():
    with pytest.raises(RegistryError, match=r"registry op 'conv_nope'.*no helpers/ops/conv_nope.py"):
        validate({**REGISTRY, "conv_nope": [dataclasses.replace(NAIVE, op="conv_nope")]})


def test_an_op_without_its_name_is_refused(monkeypatch):
    """What tables call an op is its module's NAME (helpers/analysis/compare.py reads it): an op
    module without one fails the registry's load, naming the op."""
    from helpers.ops import gemm
    monkeypatch.delattr(gemm, "NAME")
    with pytest.raises(RegistryError, match=r"registry op 'gemm': helpers/ops/gemm.py gives it no NAME"):
        validate(REGISTRY)


def test_every_field_of_a_stage_is_checked():
    """Each field of Stage is the subject of one of the planted mistakes (or is free text)."""
    planted = {f for p in MISTAKES for f in p.values[2]} | {"op", "name"}
    assert {f.name for f in dataclasses.fields(stages.Stage)} - {"title", "entry", "choose"} <= planted


def test_a_chapter_number_naming_several_stages_lists_them():
    with pytest.raises(ValueError, match=r"conv_dgrad stage 13 names 17 stages: 13_tc_tf32, 13_tc_fp16, "):
        get_stage("conv_dgrad", 13)
    with pytest.raises(ValueError, match=r"conv_dgrad stage 9 names 3 stages: 09_local_tile, 09_register_block, "
                                         r"09_prefetch; ask for one by name or key"):
        get_stage("conv_dgrad", 9)
    with pytest.raises(ValueError, match=r"stage 2 names 2 stages: 02_naive, 02_naive_fp16"):
        get_stage("conv_dgrad", 2)
    with pytest.raises(ValueError, match=r"conv_forward stage 13 names 3 stages: 13_tc_fp16_nhwc"):
        get_stage("conv_forward", 13)


def test_a_chapter_number_naming_one_stage_picks_it():
    """A number keeps working where it names one stage (its CUDA twin is reached by name)."""
    assert get_stage("conv_dgrad", 3).name == "memoized_bounds"       # 03_memoized_bounds_cuda: by name
    assert get_stage("conv_dgrad", 8).name == "width"
    assert get_stage("gemm", 2).name == "local_tiles"
    assert get_stage("batchnorm_backward", 6).name == "one_pass"
    assert get_stage("conv_wgrad", 4).key == "04_winograd"
    ambiguous = {(op, s.number) for op, ss in REGISTRY.items() for s in ss
                 if sum(t.number == s.number and t.backend == "opencl" for t in ss) > 1}
    assert ambiguous == {("conv_dgrad", n) for n in (2, 9, 10, 11, 12, 16)} | {("conv_wgrad", 16), ("conv_forward", 11),
                                                                                  ("conv_forward", 16)}


def test_every_family_and_launch_is_used_by_the_registry():
    """Every launcher module of helpers/launch/ is some stage's family, and every launch of its
    LAUNCHES some stage's launch (none left over unseen by the grid)."""
    modules = [importlib.import_module(f"helpers.launch.{m.name}") for m in pkgutil.iter_modules(helpers.launch.__path__)]
    launchers = {m for m in modules if is_family(m)}
    assert {m.__name__.rsplit(".", 1)[1] for m in launchers} >= {"direct", "local", "gemm", "tensor_cores"}
    used = {(s.family, s.launch) for ss in REGISTRY.values() for s in ss if not s.choose}
    assert {fam for fam, _ in used} == launchers
    for fam in launchers:
        assert {launch for f, launch in used if f is fam} == set(fam.LAUNCHES), fam.__name__
    assert not is_family(unrolled)          # a module of helpers/launch/, but no family


def test_every_kernel_file_is_registered_where_grep_finds_it():
    """A kernel's file name, grepped in helpers/stages/, finds its registration: the paths are
    written out, not built."""
    from helpers.engine.kernels import KERNELS
    text = "".join(p.read_text() for p in (KERNELS.parent / "helpers" / "stages").glob("*.py"))
    for ss in REGISTRY.values():
        for s in ss:
            if s.kernel:
                assert f'"{s.kernel}"' in text, s.key


def test_every_kernel_file_of_an_operation_is_a_stage():
    """A stage is one kernel file plus one registry entry: a kernel file in a folder of stages (one
    that holds a registered kernel) that no stage registers is half a stage, named here."""
    from helpers.engine.kernels import KERNELS
    registered = {s.kernel for ss in REGISTRY.values() for s in ss if s.kernel}
    folders = {k.split("/")[0] for k in registered}
    files = {p.relative_to(KERNELS).as_posix() for f in folders for p in (KERNELS / f).rglob("*")
             if p.suffix in (".cl", ".cu")}
    orphans = sorted(files - registered)
    assert not orphans, f"kernel files no stage registers (a Stage in helpers/stages/): {', '.join(orphans)}"


def test_stage_names_upto_a_chapter_lists_what_that_chapter_has_met():
    names = stages.stage_names("conv_forward", upto=12)
    assert "wino_blocked" in names and "any_shape" not in names
    assert stages.stage_names("conv_forward")[-3:] == ["any_shape", "igemm_nd", "auto"]


def test_entries_hold_their_code_and_the_imports_reach_it():
    """A registry entry holds its launcher module and the family's functions themselves, never
    their names; and a walk of the imports from helpers/stages/ (what an editor's "go to
    definition" follows) reaches every stage's launcher and the modules of its functions, and from
    the runner each backend's plan class."""
    from test_layout import imports, modules
    found = modules()

    def reached(start: str) -> set:
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            name = name if name in found else f"{name}.__init__"      # a package: its __init__
            if name in seen or name not in found:
                continue
            seen.add(name)
            todo += imports(name, found[name])
        return seen

    from_registry = reached("helpers.stages.__init__")
    for ss in REGISTRY.values():
        for s in ss:
            if s.choose:
                continue
            assert is_family(s.family), s.key
            for hook in ("jit", "requires", "generate"):
                fn = getattr(s, hook)
                assert fn is None or callable(fn), f"{s.key} {hook}={fn!r}"
            owners = {s.family.__name__} | {getattr(s, h).__module__ for h in ("jit", "requires", "generate") if getattr(s, h)}
            assert owners <= from_registry, f"{s.key}: {sorted(owners - from_registry)} not reached from the registry"
    from helpers.engine import backends
    from_runner = reached("helpers.runner")
    for backend, load in backends.PLANS.items():
        assert callable(load) and load().__module__ in from_runner, backend
