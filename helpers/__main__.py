"""`python -m helpers`: list the OpenCL devices and the one the course would choose."""
import sys

from .engine.devices import main

sys.exit(main())
