"""Literature search for the paper's citations and the ideation's novelty check.

One interface (:class:`cascade.Cascade`) over the user's own library (``--references``,
``report.references``: BibTeX files and PDFs, searched offline, first) and the public services
Semantic Scholar, OpenAlex, Crossref and arXiv (:mod:`sources`), each with its own rate-limit
handling; results are merged and deduplicated by DOI, arXiv id and normalised title
(:mod:`records`). A source that fails or throttles is skipped for the rest of the run with one
line saying so. docs/literature.md is the user's guide.
"""
