"""Content reflection of the compiled paper (``report.writeup_reflections``).

After a clean compile the writer gets one list of concrete problems per
round and returns all sections again: figures never referenced or
references to figures that do not exist, the vision model's figure/caption
findings (``figures/vlm.json``), duplicate figures removed before writing,
``chktex`` warnings and a page overrun. A round with nothing to report ends
the reflection. :func:`paper_feedback` is pure: it reads values, not files.
"""

from __future__ import annotations

import re
from typing import Any

SECTION_KEYS = ("abstract", "introduction", "related_work", "method", "experiments", "results", "conclusion")
MAX_CHKTEX = 10


def paper_feedback(
    sections: dict[str, str],
    figures: list[dict[str, Any]],
    vlm_figures: dict[str, Any],
    chktex: list[str],
    main_pages: int | None,
    page_limit: int,
    duplicates: list[str],
) -> list[str]:
    """The problems of the paper as sentences the writer can act on (empty: nothing to fix)."""
    text = "\n".join(str(sections.get(k, "")) for k in SECTION_KEYS)
    cited = set(re.findall(r"\\ref\{(fig:\d+)\}", text))
    labels = {f["label"]: f for f in figures}
    out = []
    for label, fig in labels.items():
        if label not in cited:
            out.append(
                f"Figure {label} ({fig['file']}) is never referenced: discuss it with \\ref{{{label}}}."
            )
    for label in sorted(cited - set(labels)):
        out.append(f"\\ref{{{label}}} points to no figure (usable labels: {', '.join(labels) or 'none'}).")
    for fig in figures:
        review = vlm_figures.get(fig["file"]) or {}
        issues = [str(i) for i in review.get("issues") or []]
        if review.get("caption_matches") is False:
            issues.append("the caption does not match what the figure shows")
        if issues:
            out.append(
                f"Figure {fig['label']} ({fig['file']}), as the vision model saw it: {'; '.join(issues)}."
            )
    out += [f"Figure check: {d}." for d in duplicates]
    if chktex:
        lines = "; ".join(chktex[:MAX_CHKTEX])
        more = f" (and {len(chktex) - MAX_CHKTEX} more)" if len(chktex) > MAX_CHKTEX else ""
        out.append(f"chktex warnings on paper.tex: {lines}{more}.")
    if main_pages is not None and main_pages > page_limit:
        out.append(f"The main text runs to page {main_pages}; the limit is {page_limit} pages: shorten it.")
    return out
