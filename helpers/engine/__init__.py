"""The engine: choosing a device, building kernels, the one checker, timing, and the backends
(OpenCL through pyopencl, CUDA through CuPy and NVRTC). Imports nothing else of helpers/."""
