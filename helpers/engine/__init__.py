"""The engine: choosing a device, building kernels, the one checker, timing, and the backends
(OpenCL through pyopencl, CUDA through CuPy and NVRTC). Imports nothing else of helpers/.

    kernels     the kernel files under kernels/ and the options every backend builds them with
    devices     choosing an OpenCL device without prompting (COURSE_DEVICE, a GPU first)
    build       OpenCL programs built once per context; build errors with their source lines
    check       the one checker: a result against the float64 reference, within derived bounds
    timing      profiling events, warm-up, repeats, median and spread
    tensor      device tensors (dtype, shape, layout, guard zones) on both backends
    fragments   the mma.sync and ldmatrix fragment layouts (chapter 13)
    plan        what a plan is on either backend: launches, tensors, read-back, guards
    child       a function run in a child process, so that a faulting kernel takes only it down
    progress    the progress bar of long work (the benchmark's layers, auto's search)
    backends/   where a stage's kernels are built and run: opencl, cuda, nvrtc, emulated
"""
