"""What the notebooks call on top of everything else: the first cell (notebook.start), source
display, pictures, exercise checks, the models of chapters 03-05 and 12, re-execution."""
