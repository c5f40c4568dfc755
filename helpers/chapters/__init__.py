"""What the notebooks call on top of everything else: the first cell (notebook.start), source
display, pictures, exercise checks (kernel gaps included), the models of chapters 03-05 and 12;
and the tools over the notebooks: re-execution, the student edition, the rendered site."""
