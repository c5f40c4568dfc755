"""Reading, summarising and plotting recorded results (results/*.json). Imports no OpenCL or
CUDA module: it runs anywhere, with or without a device."""
