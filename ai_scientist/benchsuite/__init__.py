"""The bench: graded research tasks, each an ordinary run, and the report that compares them.

A task is a directory (:mod:`.task`); ``bench run`` (:mod:`.runner`) measures each task's
baseline (:mod:`.baseline`) and runs each task x seed as ``ai-scientist run`` in its own
process; :mod:`.results` reads what the runs left, :mod:`.report` writes the table and figure.
The bundled tasks live in ``tasks/`` inside the package (docs/bench.md).
"""
