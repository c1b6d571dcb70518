"""The end of a run: figures, their vision-model review, the paper, its reviews, the viewer.

Entry points: :func:`pipeline.run_reporting` (plots -> vlm -> writeup -> review),
:func:`latex.preflight_latex` / :func:`latex.check_reporting_tools` (before any
token; ``doctor``), :class:`progress.Progress` (live display) and
:func:`viewer.write_view` (the tree viewer of ``ai-scientist view``).
"""
