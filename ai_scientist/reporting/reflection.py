"""Content reflection of the compiled paper (``report.writeup_reflections``).

After a clean compile the writer gets one list of concrete problems per
round and returns all sections again: figures never referenced or
references to figures that do not exist, the vision model's figure/caption
findings (``figures/vlm.json``), duplicate figures removed before writing,
``chktex`` warnings on the lines the writer wrote (each with that line's text;
warnings on the template's own lines are dropped: the writer cannot change
them) and a page overrun, said with its size and a word budget. A round with
nothing to report ends the reflection. Everything here is pure: it reads
values, not files.
"""

from __future__ import annotations

import re
from typing import Any

from .latex import MATH_SPAN, math_problem, unescaped

SECTION_KEYS = ("abstract", "introduction", "related_work", "method", "experiments", "results", "conclusion")
MAX_CHKTEX = 10
MAX_MATH = 5  # math spans printed as plain text, named one by one
LINE_CHARS = 160  # what a chktex warning shows of its line
AROUND_CHARS = 30  # and of a longer line, the text each side of the warning's column
_CHKTEX = re.compile(r"^[^:]*:(\d+):(\d+):(\d+):(.*)$")  # chktex -v0: file:line:col:number:message
# chktex's spacing hints (2: a "~" tie, 12: "\ " after an abbreviation's period as in "et al.",
# 13: "\@" after a capital's period): the escaping sets "~" and "\" as printed characters, so
# the writer cannot act on them but by rewording sound prose (relay s10 ln 043: "Interword spacing
# should perhaps be used" for "et al."); left out of what it is told
UNFIXABLE_CHKTEX = frozenset({2, 12, 13})


def word_count(sections: dict[str, str]) -> int:
    """The words of the paper as the page budget counts them: :data:`WORDS_RULE`."""
    return sum(len(str(sections.get(k, "")).split()) for k in SECTION_KEYS)


WORDS_RULE = (
    "Words are counted as the whitespace-separated pieces of the abstract and the six sections (not "
    "the title, not the figure captions): a number, an inline math span without spaces or a \\ref is one."
)
HEADINGS_MARGIN = 0.95  # of the words that fit: headings and paragraph breaks take the rest


def overflow_message(
    main_pages: int,
    page_limit: int,
    sections: dict[str, str],
    figure_pages: float | None = None,
    figures: int = 0,
    last_fill: float | None = None,
    before: tuple[int, int, float | None] | None = None,
) -> str:
    """A page overrun as the writer can act on it: how far the main text runs past the limit, in
    pages (``last_fill``: how full its last page is, from the compile's log; a full page when
    unknown) and in words; the room the figures take (``latex.figure_pages``: their floats packed
    whole into pages); the words the sections hold, counted as :data:`WORDS_RULE` says; and a
    word budget — the words scaled from the pages the text fills now to the pages left to it, less
    5 % for headings; and that leaving a figure out is the other way to gain room. ``before``: the
    previous round's (words, main pages, last page's fill) when it was over too — a cut that did
    not move where the text ends is said, so a writer does not cut words again to no effect."""
    words = word_count(sections)
    fill = 1.0 if last_fill is None else max(0.05, min(1.0, last_fill))
    content = main_pages - 1 + fill  # pages the main text and its figures fill now
    over = max(content - page_limit, 0.0)
    figs = figure_pages if figure_pages is not None and figure_pages < content else 0.0
    text_now, text_room = content - figs, page_limit - figs
    per_page = words / text_now if text_now > 0 else 0.0
    budget = int(words * max(text_room, 0.0) / text_now * HEADINGS_MARGIN) if text_now > 0 else 0
    pages_over = main_pages - page_limit
    out = (
        f"The main text runs to page {main_pages}"
        + (f", filling {fill:.0%} of it" if last_fill is not None else "")
        + f"; the limit is {page_limit} pages, so it is {pages_over} page{'' if pages_over == 1 else 's'} "
        f"over. About {max(over, 0.05):.1f} page{'' if round(over, 1) == 1 else 's'} of content must go: "
        f"some {round(over * per_page)} words at the {round(per_page)} words a page the text holds now."
    )
    if figs:
        out += (
            f" The {figures} figure{' takes' if figures == 1 else 's take'} about {figs:.1f} "
            f"page{'' if round(figs, 1) == 1 else 's'} ({figs / content:.0%} of the main text; a "
            f"float never splits across pages), leaving {max(text_room, 0.0):.1f} for the text."
        )
    if figures:
        each = figs / figures if figs else 0.0
        out += (
            " Leaving a figure out is the other way: list its label in omit_figures"
            + (f" (each frees about {each:.1f} page, some {round(each * per_page)} words)" if each else "")
            + " and say in the text what it showed; keep the figures that carry the results."
        )
    if before is not None:
        w0, p0, f0 = before
        gained = (p0 - 1 + (1.0 if f0 is None else f0)) - content
        if w0 > words and gained < 0.1:
            out += (
                f" Your last cut took the sections from {w0} to {words} words, yet the text still ends on "
                f"page {main_pages}"
                + (
                    f" ({f0:.0%} full then, {fill:.0%} now)"
                    if f0 is not None and last_fill is not None
                    else ""
                )
                + ": the figures' floats decide where it ends, so cutting more words may gain nothing;"
                " leaving a figure out (omit_figures) is the sure way."
            )
    if text_room <= 0:
        return out + (
            f" The figures alone fill the limit: leave figures out, and keep the text to its "
            f"essentials ({words} words now; every caveat, limitation and reported number stays)."
        )
    return out + (
        f" {WORDS_RULE} Your sections hold {words} words: cut about {max(words - budget, 0)} words "
        f"(the {round(over * per_page)} over and 5 % for headings and paragraph breaks), to at most "
        f"{budget} words in all. Cut prose (repetition, background, long descriptions of the "
        "method); keep every caveat, limitation and reported number."
    )


def room_message(
    main_pages: int | None,
    page_limit: int,
    sections: dict[str, str],
    figure_pages: float | None = None,
    last_fill: float | None = None,
) -> str:
    """For a paper that fits: the words the writer may still add, measured as
    :func:`overflow_message` measures an overrun (the text's words a page now, its last page's
    fill, the figures' pages, 5 % for headings), so a revision that adds what a problem asks for
    can cut elsewhere to stay in the limit; "" when the pages are unknown or over the limit (the
    overflow message says what to cut). A relay run's reflection round said only "must fit in 4
    pages"; the revision ran a page over and took a second length round."""
    if not main_pages or main_pages > page_limit:
        return ""
    words = word_count(sections)
    fill = 1.0 if last_fill is None else max(0.05, min(1.0, last_fill))
    content = main_pages - 1 + fill
    figs = figure_pages if figure_pages is not None and figure_pages < content else 0.0
    text_now, text_room = content - figs, page_limit - figs
    if text_now <= 0 or words == 0:
        return ""
    budget = max(int(words * text_room / text_now * HEADINGS_MARGIN), words)
    where = f"page {main_pages} of {page_limit}" + (
        f", {fill:.0%} of it filled" if last_fill is not None else ""
    )
    # the text's end on its last page unmeasured (a figure floated past it) on the last allowed
    # page: no room can be promised (relay s7 ln2 044 read "about 0 more fit" as no budget at all)
    room = (
        "no more words can be promised (where the text ends on that page is not measured: a figure "
        "follows it)"
        if last_fill is None and main_pages == page_limit
        else f"about {budget - words} more fit"
    )
    return (
        f"The paper fits now: its main text ends on {where}. Your sections hold {words} words; {room}, "
        f"so keep them to at most {budget} words in all ({WORDS_RULE[0].lower()}"
        f"{WORDS_RULE[1:].rstrip('.')}). Where a problem above asks for more text, make room by "
        "cutting prose elsewhere; keep every caveat, limitation and reported number."
    )


def writer_lines(tex: str, own_texts: list[str]) -> dict[int, str]:
    """Line number -> text of the lines of ``tex`` that hold the writer's own text: a line that
    appears in one of ``own_texts`` (the escaped strings as they went into the .tex: a paragraph's
    line), or one that holds a whole one of them (``\\title{...}`` around the title)."""
    whole = [x.strip() for x in own_texts if len(x.strip()) >= 12 and "\n" not in x.strip()]
    out = {}
    for i, line in enumerate(tex.splitlines(), 1):
        t = line.strip()
        if not any(c.isalnum() for c in t):
            continue
        if any(t in x for x in own_texts) or any(x in t for x in whole):
            out[i] = t
    return out


def _token_at(line: str, col: int) -> str:
    """The whitespace-delimited piece of ``line`` at ``col`` (1-based; the next one after a space)."""
    i = min(max(col - 1, 0), len(line))
    while i < len(line) and line[i].isspace():
        i += 1
    start = i
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    end = i
    while end < len(line) and not line[end].isspace():
        end += 1
    return line[start:end]


def chktex_for_writer(
    warnings: list[str], tex: str, own_texts: list[str], written: list[str] | None = None
) -> list[str]:
    """chktex warnings on lines the writer wrote, one entry per line with its text (the writer
    never sees paper.tex); warnings on other lines (the template's) are dropped. With ``written``
    (the writer's strings as it wrote them), so is a warning on a piece of text the escaping made
    (:func:`latex.unescaped` of it is in none of them): the writer never wrote it (relay s8 mm2
    047); and a spacing hint the allowed text cannot follow (:data:`UNFIXABLE_CHKTEX`)."""
    own = writer_lines(tex, own_texts)
    raw = tex.splitlines()
    by_line: dict[int, list[str]] = {}
    for w in warnings:
        m = _CHKTEX.match(w)
        if m and int(m.group(3)) in UNFIXABLE_CHKTEX:
            continue
        if m and written is not None and int(m.group(1)) in own:
            piece = unescaped(_token_at(raw[int(m.group(1)) - 1], int(m.group(2))))
            if piece and not any(piece in x for x in written):
                continue
        if m and int(m.group(1)) in own:
            message = m.group(4).strip().rstrip(".")
            line, col = raw[int(m.group(1)) - 1], int(m.group(2))
            # a line longer than is shown: the text at the column, quoted (relay s7 ln1 042 got
            # "column 820" of a line cut at 160 characters and had to guess the spot)
            at = ""
            if len(own[int(m.group(1))]) > LINE_CHARS and 0 < col <= len(line):
                lo, hi = max(col - 1 - AROUND_CHARS, 0), min(col - 1 + AROUND_CHARS, len(line))
                at = f' (at "{"..." if lo else ""}{line[lo:hi].strip()}{"..." if hi < len(line) else ""}")'
            by_line.setdefault(int(m.group(1)), []).append(f"column {m.group(2)}{at}: {message}")
    out = []
    for n, found in sorted(by_line.items()):
        text = own[n] if len(own[n]) <= LINE_CHARS else own[n][:LINE_CHARS] + " ..."
        out.append(f'on the line "{text}": {"; ".join(found)}')
    return out


def paper_feedback(
    sections: dict[str, str],
    figures: list[dict[str, Any]],
    vlm_figures: dict[str, Any],
    chktex: list[str],
    main_pages: int | None,
    page_limit: int,
    duplicates: list[str],
    figure_pages: float | None = None,
    last_fill: float | None = None,
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
    remarks = 0
    for fig in figures:
        review = vlm_figures.get(fig["file"]) or {}
        issues = [str(i).strip().rstrip(".;") for i in review.get("issues") or [] if str(i).strip()]
        if review.get("caption_matches") is False:
            issues.append("the caption does not match what the figure shows")
        if issues:
            remarks += 1
            out.append(
                f"Figure {fig['label']} ({fig['file']}), as the vision model saw it: {'; '.join(issues)}."
            )
    if remarks:
        # the writer writes the text only; said once, not per figure ("fixed now", once per figure,
        # read to a relay run's writer as "repaired" while the images were unchanged); the remarks'
        # numbers are no record, said here where they are shown (relay s8 ln2 043: only the first
        # writer call said it, and the remarks carried derived numbers)
        out.append(
            f"You cannot redraw {'these figures' if remarks > 1 else 'this figure'} or change "
            f"{'their captions' if remarks > 1 else 'its caption'}: they stay as they are. Where a "
            "remark above matters, say in the text what the figure shows and what it does not; never "
            "claim what it does not show. A remark on styling alone (legend, colours, sizes) needs "
            "nothing in the text. A number only a figure reviewer's remark states is no record of "
            "the run (a difference, mean or range the reviewer worked out fails the number check): "
            "where it matters, give the values the findings state instead."
        )
    out += [f"Figure check: {d}." for d in duplicates]
    # inline math the document prints as plain text: which span and why (the writer saw only its
    # garbled text in a chktex warning)
    spans = [
        (key, m.group(0), why)
        for key in SECTION_KEYS
        for m in MATH_SPAN.finditer(str(sections.get(key, "")))
        if (why := math_problem(m.group(1)))
    ]
    for key, span, why in spans[:MAX_MATH]:
        out.append(
            f"The math {span} in {key} is printed as plain text: {why}. Rewrite it with the allowed "
            "commands or in words."
        )
    if len(spans) > MAX_MATH:
        out.append(
            f"({len(spans) - MAX_MATH} more math spans are printed as plain text for the same reasons.)"
        )
    if chktex:  # already those of the writer's lines, with their text (chktex_for_writer)
        more = f" (and {len(chktex) - MAX_CHKTEX} more lines)" if len(chktex) > MAX_CHKTEX else ""
        out.append(f"LaTeX style warnings (chktex) in your text: {' | '.join(chktex[:MAX_CHKTEX])}{more}.")
    if main_pages is not None and main_pages > page_limit:
        out.append(overflow_message(main_pages, page_limit, sections, figure_pages, len(figures), last_fill))
    return out
