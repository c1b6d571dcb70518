"""Ideation: from a topic to research ideas in the AI-Scientist-v2 JSON format.

``ai-scientist ideate TOPIC.md`` runs :func:`loop.ideate` through
:mod:`command`: per idea, the model drafts a proposal, searches the literature
(Semantic Scholar, :mod:`literature`), refines the draft over K rounds and
finalises it; :mod:`dedupe` drops ideas that repeat one already proposed.
"""
