"""Chapter 15: a small CNN trained end to end on the course's kernels.

    data.py     scikit-learn's digits (shipped in its wheel), upsampled, split, batched
    model.py    the network's sizes, initial weights, the host parts (linear head, loss, SGD with
                momentum), NumPy's ReLU + pooling (the reference of kernels/train/pool.cl) and the
                NumPy reference step every other step is checked against
    course.py   the same step on the course's stages: one Plan per layer and op, chosen by the
                chooser, ReLU + pooling as kernels/train/pool.cl, tensors chained on the device;
                per-op times from profiling events
    torch_twin.py  the same network in PyTorch, from the same weights and batches (when installed)
    run.py      the training loop (progress bar), the record `python -m helpers.train` writes
"""
