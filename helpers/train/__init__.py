"""Chapter 15: a small CNN trained end to end on the course's kernels, a ResNet stage's step, and a
small ResNet of helpers.torch's modules trained beside torch.nn's (15c).

    data.py     scikit-learn's digits (shipped in its wheel), upsampled, split, batched
    model.py    the network's sizes, initial weights, the NumPy references of the train kernels
                (ReLU + pooling, the linear head and its loss, SGD with momentum) and the NumPy
                reference step every other step is checked against, for any list of blocks
    kernels.py  kernels/train/*.cl on one queue (pooling, ReLU, the head, SGD), each launch's
                arguments set once; the arena that holds every parameter in one buffer
    course.py   the step on the course's stages: one Plan per block and op, chosen by the chooser,
                chained on the device with the train kernels; the batch in, the loss out
    torch_twin.py  the same network in PyTorch, from the same weights and batches (when installed)
    run.py      the training loop (progress bar), the record `python -m helpers.train` writes
    resnet_stage.py  a kernel-dominated step (five conv + batch norm + ReLU blocks of a ResNet
                stage, batch 64) against PyTorch's, timed alike, its record
    torch_resnet.py  a small torchvision-style ResNet built twice, on helpers.torch's modules (the
                course's stages) and on torch.nn's, trained side by side on the same batches: losses,
                step times, the first step's gradients compared, its record (deep dive 15c; needs PyTorch)
"""
