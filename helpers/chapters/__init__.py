"""What the notebooks call on top of everything else: the first cell (notebook.start), source
display, pictures, exercise checks (kernel gaps included), the models of chapters 03-05 and 12.
The tools that build and check the course from its notebooks are helpers/tools/, not here.

The first cell and what chapters show:
    notebook        start() (device, sizes, edition), source display, step and switch times
    listing         a kernel listing or diff as a notebook shows it, in either edition
    vocabulary      the OpenCL words beside their CUDA names
Models and measurements, by chapter:
    direct          03-05: what the direct kernels do per work-item
    combining       07-08: parameter sweeps on this device
    local           09-10: reuse with and without a tile, the local-memory accesses
    banks           10, 12, 13: the bank model; bank_evidence: ncu's counts beside it (10, 10b)
    winograd        12: the transform matrices with exact fractions; winograd_accuracy: 12a's errors
    tensor_cores    13: its stages and recorded runs; tensor_core_layouts: its shared tiles modelled;
                    ptx: a kernel's PTX read on the host; ncu_reports: ncu's recorded reports
    any_shape       16: grouped and dilated layers, what they cost
Pictures, drawn from the kernels' own index arithmetic:
    pictures (01-02), pictures_primer (01a), pictures_direct (03-05),
    pictures_combining (06-08), pictures_local (09-10), pictures_gemm (11), pictures_winograd (12),
    pictures_tensor_cores (13), pictures_batchnorm (14), pictures_training (15),
    pictures_any_shape (16)
Exercises:
    exercises/      the checks, one module per chapter
    kernel_exercises  the kernel gaps a learner fills with OpenCL C (GAPS: their lines, shapes, hints);
    gap             a gap shown, spliced into its kernel, run in a child process and judged;
    slab_swizzle    chapter 10's gap judged in the bank model (the learner's WADDR read as arithmetic);
                    kernel_lessons: checks that an answer does what its chapter teaches
    answers         what the student edition must not show (every line of an answer): listings hide
                    it as a notebook runs, so it is here; helpers/tools/editions.py writes the edition
"""
