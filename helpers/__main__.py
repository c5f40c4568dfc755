"""`python -m helpers`: list the OpenCL devices and the one the course would choose."""
from .engine.devices import main

main()
