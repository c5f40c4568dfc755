"""Reading, summarising and plotting recorded results (results/*.json). Imports no OpenCL or
CUDA module: it runs anywhere, with or without a device.

    results     the recorded runs (results/*.json) loaded, filtered by op, set and device
    names       the file names under results/ and the device slugs in them (one place)
    summary     geometric means per stage, the vendor's name, a ladder's steps
    compare     the best course stage per op, layer and GPU against the vendor (README's table)
    pairs       a -D switch off and on, or two stages of one run, beside the vendor
    plots       the speed-up ladder and the roofline
    batchnorm   chapter 14's readings of the batch-norm runs
    zoo         stage auto on the zoo's layers nobody tuned for, beside cuDNN (chapter 11b)
"""
