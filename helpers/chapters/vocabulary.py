"""The OpenCL words of chapters 00-09 beside their CUDA names (chapters 10 and 13 show the table).

    from helpers.chapters.vocabulary import vocabulary
    vocabulary()              # a table: OpenCL, CUDA, what it is
    vocabulary("memory")      # one group only: "execution", "memory", "sync", "code", "host"

One list, so the two chapters cannot disagree. The CUDA column names what a CUDA programmer
writes (or reads in Nsight Compute); where one word means different things in the two languages
("local memory"), the note says so.
"""
from __future__ import annotations

# (group, OpenCL, CUDA, what it is)
TERMS = (
    ("execution", "work-item", "thread", "one instance of the kernel; what each index computes"),
    ("execution", "work-group", "block (thread block, CTA)", "work-items that share local memory and barriers; "
                                                             "runs on one compute unit"),
    ("execution", "NDRange (global size in work-items)", "grid (`gridDim` in blocks)",
     "all the work-items of one launch; OpenCL counts work-items, CUDA counts blocks"),
    ("execution", "sub-group (NVIDIA: 32 work-items)", "warp (32 threads)",
     "what the hardware issues together, one instruction for all lanes"),
    ("execution", "compute unit", "streaming multiprocessor (SM)", "the core that runs work-groups; "
                                                                    "its registers and local memory limit how many"),
    ("execution", "`get_global_id(0)`", "`blockIdx.x * blockDim.x + threadIdx.x`", "the work-item's index in the launch"),
    ("execution", "`get_local_id(0)`", "`threadIdx.x`", "the index inside the work-group"),
    ("execution", "`get_group_id(0)`", "`blockIdx.x`", "which work-group"),
    ("execution", "`get_local_size(0)`", "`blockDim.x`", "work-items per work-group"),
    ("execution", "`get_num_groups(0)`", "`gridDim.x`", "work-groups in the launch"),
    ("memory", "global memory (`__global float *`)", "global memory (a plain `float *` argument)",
     "the device memory (DRAM or HBM), behind the L2 cache"),
    ("memory", "local memory (`__local`)", "shared memory (`__shared__`)",
     "on-chip memory of one work-group, in banks (chapter 10)"),
    ("memory", "private memory (a kernel's variables)", "registers; what spills goes to CUDA's *local memory*",
     "CUDA's 'local memory' is per-thread spill space in DRAM, not OpenCL's local memory"),
    ("memory", "constant memory (`__constant`)", "constant memory (`__constant__`)", "read-only, cached, "
                                                                                     "best when all lanes read one address"),
    ("sync", "`barrier(CLK_LOCAL_MEM_FENCE)`", "`__syncthreads()`", "every work-item of the group waits here; "
                                                                    "local memory written before is visible after"),
    ("sync", "`mem_fence` / `atomic_*`", "`__threadfence` / `atomic*`", "ordering and atomic updates of memory"),
    ("code", "`__kernel void f(...)`", "`extern \"C\" __global__ void f(...)`", "a function the host launches "
                                                                              "(`extern \"C\"`: found by name)"),
    ("code", "`float4`, `vload4`", "`float4` (a 16-byte aligned load)", "one wide load instead of four"),
    ("code", "`-D NAME=value` at `clBuildProgram`", "`-D NAME=value` to NVRTC", "the course's JIT parameters"),
    ("code", "the program's binary (NVIDIA's OpenCL driver: PTX inside)", "PTX (virtual instructions), then SASS "
     "(the GPU's machine code)", "what the compiler made of the kernel; chapter 10b reads the twins' SASS"),
    ("host", "command queue", "stream", "launches run in the order they were queued"),
    ("host", "`clEnqueueNDRangeKernel` (global, local)", "`kernel<<<grid, block, shared>>>` (CuPy: `kernel(grid, "
                                                         "block, args)`)", "a launch"),
    ("host", "profiling event (`CL_PROFILING_COMMAND_START/END`)", "`cudaEvent` pair", "the device's own start and "
                                                                                      "end times of a launch"),
)
GROUPS = tuple(dict.fromkeys(t[0] for t in TERMS))


def rows(group: str | None = None) -> list[tuple[str, str, str]]:
    """(OpenCL, CUDA, meaning) for one group of terms or all of them."""
    if group is not None and group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; the groups are {', '.join(GROUPS)}")
    return [t[1:] for t in TERMS if group is None or t[0] == group]


def markdown(group: str | None = None) -> str:
    lines = ["| OpenCL (chapters 00-09) | CUDA | what it is |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows(group)]
    return "\n".join(lines)


def vocabulary(group: str | None = None):
    """The table, rendered in a notebook (its text form is the Markdown source)."""
    from IPython.display import Markdown
    return Markdown(markdown(group))
