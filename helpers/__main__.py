"""`python -m helpers`: list the OpenCL devices and the one the course would choose."""
from .devices import main

main()
