"""LaTeX side of the writeup: tool pre-flight, safe text, rendering, compiling, checking.

Raw LLM text never reaches the ``.tex`` unescaped: ``latex_text`` escapes
everything except inline math ``$...$`` made of a whitelist of characters and
commands, and ``\\cite{}``/``\\ref{}`` whose keys exist. Tools are looked up
with ``shutil.which(name, path=tool_path)`` so a caller (and a test) can
simulate a machine without LaTeX by passing an empty ``tool_path``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from .prompts import PROMPT_DIR

COMPILE_TOOLS = ("latexmk", "pdflatex", "bibtex")
OPTIONAL_TOOLS = ("chktex", "pdfinfo")
# what the paper templates (latex/workshop.tex.j2, conference.tex.j2) load; checked in the pre-flight so a missing package costs no tokens
REQUIRED_STY = ("geometry.sty", "graphicx.sty", "amsmath.sty", "amssymb.sty", "mathptmx.sty", "url.sty")
INSTALL_HINT = (
    "install LaTeX: apt-get install -y --no-install-recommends texlive-latex-base "
    "texlive-latex-recommended texlive-fonts-recommended latexmk chktex"
)

_ESCAPE = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_UNICODE = {
    "\u2013": "--", "\u2014": "---", "\u2018": "`", "\u2019": "'", "\u201c": "``", "\u201d": "''",
    "\u2026": "...", "\u00d7": "x", "\u2212": "-", "\u00a0": " ", "\u2192": "->", "\u2264": "<=",
    "\u2265": ">=", "\u00b1": "+/-", "\u2248": "~",
}  # fmt: skip
MATH_COMMANDS = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta lambda mu nu xi pi rho sigma tau phi "
    "varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega frac sqrt sum prod int "
    "log exp min max arg argmin argmax mathbb mathcal mathbf mathrm times cdot leq geq neq approx pm "
    "infty in to ell hat bar tilde mid sim propto left right partial nabla ldots cdots top".split()
)
_MATH_CHARS = re.compile(r"^[A-Za-z0-9\s+\-*/=<>()\[\]{}^_.,|'!:;\\]*$")
MATH_SPAN = re.compile(r"\$([^$\n]{1,200})\$")
_REF = re.compile(r"\\(cite|citep|citet|ref)\{([A-Za-z0-9:_,.\- ]+)\}")


# characters set as the LaTeX command a typesetter (and chktex) expects: "..." for an ellipsis and
# an "x" for a times sign drew chktex warnings on text the writer never wrote (relay s8 mm2 047)
_COMMANDS = {"\u2026": r"\ldots{}", "\u00d7": r"\ensuremath{\times}"}


_SUPERSCRIPT = dict(
    zip(
        "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b\u207a",
        "0123456789-+",
        strict=True,
    )
)
_SUPERSCRIPTS = re.compile("[" + "".join(_SUPERSCRIPT) + "]+")


def _plain(text: str) -> str:
    """``text`` escaped; a run of superscript digits set as ``\\textsuperscript{}`` (``10⁻⁹`` was
    printed ``10?9``: NFKD leaves a minus sign outside ASCII)."""
    out, pos = [], 0
    for m in _SUPERSCRIPTS.finditer(text):
        out.append(_plain_chars(text[pos : m.start()]))
        out.append("\\textsuperscript{" + "".join(_SUPERSCRIPT[c] for c in m.group(0)) + "}")
        pos = m.end()
    out.append(_plain_chars(text[pos:]))
    return "".join(out)


def _plain_chars(text: str) -> str:
    out = []
    for ch in text:
        if ch in _COMMANDS:
            out.append(_COMMANDS[ch])
            continue
        ch = _UNICODE.get(ch, ch)
        if len(ch) == 1 and ord(ch) > 0xFF:  # outside Latin-1: pdflatex+T1 cannot typeset it
            greek = _greek(ch)
            if greek:
                out.append(greek)
                continue
            ch = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?"
        out.append("".join(_ESCAPE.get(c, c) for c in ch))
    return "".join(out)


def unescaped(text: str) -> str:
    """What :func:`latex_text` made of a piece of text, turned back as far as it can be: its
    escapes undone and a reference's tie (``~\\ref``) a space again. A piece whose result is not in
    the writer's own text was made by the escaping (``\\ldots{}`` for "…", an accent's command)."""
    for raw, esc in sorted(_ESCAPE.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(esc, raw)
    return re.sub(r"~(?=\\(?:cite|ref)\{)", " ", text)


def _greek(ch: str) -> str | None:
    """A Greek letter as inline math (``α`` -> ``\\ensuremath{\\alpha}``) when LaTeX has a command for it."""
    name = unicodedata.name(ch, "")
    for prefix, case in (("GREEK SMALL LETTER ", str.lower), ("GREEK CAPITAL LETTER ", str.capitalize)):
        if name.startswith(prefix):
            cmd = case(name[len(prefix) :].replace("LAMDA", "LAMBDA"))
            return f"{chr(92)}ensuremath{{{chr(92)}{cmd}}}" if cmd in MATH_COMMANDS else None
    return None


def safe_math(body: str) -> bool:
    """Inline math allowed through: whitelisted characters and commands, balanced braces."""
    if not _MATH_CHARS.match(body):
        return False
    if any(c not in MATH_COMMANDS for c in re.findall(r"\\([A-Za-z]+)", body)):
        return False
    # \| (a norm) is an escape like \{; a backslash last would escape the closing $
    if re.search(r"\\(?:[^A-Za-z{}\s,;!|]|$)", body):
        return False
    depth = 0
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def math_problem(body: str) -> str:
    """Why :func:`safe_math` prints this inline math as plain text ("" when it does not): the
    command or character it does not allow, or unbalanced braces — said to the writer, who saw
    only its span garbled in a warning (a relay run's ``\\leftarrow``)."""
    if safe_math(body):
        return ""
    bad = sorted({c for c in re.findall(r"\\([A-Za-z]+)", body) if c not in MATH_COMMANDS})
    if bad:
        return "it uses " + ", ".join("\\" + c for c in bad) + ", not an allowed command"
    chars = sorted({c for c in body if not _MATH_CHARS.match(c)})
    if chars:
        return "it uses the character(s) " + " ".join(repr(c) for c in chars) + ", not allowed in math"
    return "its braces or backslashes do not balance"


def _refs(text: str, cite_keys: Collection[str], labels: Collection[str]) -> str:
    """Escape ``text`` keeping \\cite/\\ref with known keys (unknown ones are dropped)."""
    out, pos = [], 0
    for m in _REF.finditer(text):
        out.append(_plain(text[pos : m.start()]))
        keys = [k.strip() for k in m.group(2).split(",")]
        known = cite_keys if m.group(1).startswith("cite") else labels
        keys = [k for k in keys if k in known]
        if keys:
            cmd = "cite" if m.group(1).startswith("cite") else "ref"
            if out and out[-1].endswith(" "):  # tie it to the previous word (no line break before it)
                out[-1] = out[-1][:-1] + "~"
            out.append(f"\\{cmd}{{{','.join(keys)}}}")
        pos = m.end()
    out.append(_plain(text[pos:]))
    return "".join(out)


def latex_text(
    text: str, cite_keys: Collection[str] = frozenset(), labels: Collection[str] = frozenset()
) -> str:
    """LLM prose -> LaTeX that cannot break the document (limited inline math kept)."""
    text = str(text or "").replace("\r\n", "\n")
    out, pos = [], 0
    for m in MATH_SPAN.finditer(text):
        out.append(_refs(text[pos : m.start()], cite_keys, labels))
        body = m.group(1)
        out.append(f"${body}$" if safe_math(body) else _plain(m.group(0)))
        pos = m.end()
    out.append(_refs(text[pos:], cite_keys, labels))
    return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip()


# each figure's height (a fraction of \\textheight) at most; with many figures less, so that
# together they take about FIGURE_SHARE of the page limit (a two-column page holds two side by side)
FIGURE_HEIGHT = {"conference.tex.j2": 0.28, "workshop.tex.j2": 0.32}
FIGURE_SHARE = 0.35
CAPTION_HEIGHT = 0.04  # a caption's lines, as a fraction of \\textheight


def figure_height(template: str, figures: int, page_limit: int | None) -> float:
    """The height each figure of the paper gets (fraction of ``\\textheight``): the template's own,
    or less so that ``figures`` of them take about :data:`FIGURE_SHARE` of ``page_limit`` pages,
    never below 0.12. A relay run's six figures filled half of four pages, and the writer was asked
    to cut its text three times, to 150 words, while the page count stayed the same."""
    base = FIGURE_HEIGHT.get(template, 0.3)
    if not figures or not page_limit:
        return base
    columns = 2 if template == "conference.tex.j2" else 1
    room = page_limit * FIGURE_SHARE * columns / figures - CAPTION_HEIGHT
    return round(max(0.12, min(base, room)), 3)


def render_tex(template: str, **values: Any) -> str:
    """Render ``prompt/reporting/latex/<template>`` (LaTeX-friendly delimiters \\VAR{} / \\BLOCK{});
    ``fig_height`` defaults to :func:`figure_height` of its figures and page limit."""
    values.setdefault(
        "fig_height", figure_height(template, len(values.get("figures") or []), values.get("page_limit"))
    )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPT_DIR / "latex")),
        block_start_string=r"\BLOCK{",
        block_end_string="}",
        variable_start_string=r"\VAR{",
        variable_end_string="}",
        comment_start_string=r"\#{",
        comment_end_string="}",
        line_comment_prefix="%#",
        trim_blocks=True,
        autoescape=False,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template(template).render(**values)


# ----------------------------------------------------------------- tools ----


def find_tool(name: str, tool_path: str | None = None) -> str | None:
    """Absolute path of ``name`` on ``tool_path`` (default: $PATH); '' finds nothing."""
    return shutil.which(name, path=tool_path)


def check_reporting_tools(tool_path: str | None = None) -> list[dict[str, Any]]:
    """One row per tool the writeup uses: {name, ok, detail} (what ``doctor`` shows)."""
    rows = []
    for name in COMPILE_TOOLS + OPTIONAL_TOOLS:
        path = find_tool(name, tool_path)
        need = "required" if name in ("pdflatex", "bibtex") else "optional"
        rows.append({"name": name, "ok": bool(path), "detail": path or f"not found ({need})"})
    return rows


def preflight_latex(tool_path: str | None = None) -> tuple[bool, str]:
    """(ok, message): can a PDF be built here? Checked before any writeup token is spent."""
    missing = [n for n in ("pdflatex", "bibtex") if not find_tool(n, tool_path)]
    if missing:
        return False, f"LaTeX tools missing: {', '.join(missing)} not on PATH; {INSTALL_HINT}"
    kpsewhich = find_tool("kpsewhich", tool_path)
    if kpsewhich:
        lost = [f for f in REQUIRED_STY if not _kpse_finds(kpsewhich, f)]
        if lost:
            return False, f"LaTeX packages missing: {', '.join(lost)} not found by kpsewhich; {INSTALL_HINT}"
    driver = "latexmk" if find_tool("latexmk", tool_path) else "pdflatex+bibtex"
    return True, f"LaTeX ready ({driver})"


def _kpse_finds(kpsewhich: str, name: str) -> bool:
    try:
        done = subprocess.run([kpsewhich, name], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


# --------------------------------------------------------------- compile ----


@dataclass
class CompileResult:
    ok: bool
    pdf: Path | None
    pages: int | None
    main_pages: int | None
    log_excerpt: str
    chktex: list[str] = field(default_factory=list)
    # pages of the main text the figures take (their floats' heights over the text height), and
    # how many figures; None when the log does not say (no figure, another template)
    figure_pages: float | None = None
    figures: int = 0
    # how full the last page of the main text is (0-1; None when unknown or a float page)
    last_fill: float | None = None


def _run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int, str]:
    """Run a tool in its own process group; on timeout the whole group is killed."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, "TEXINPUTS": f"{cwd}:"},
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return 124, out.decode("utf-8", "replace") + f"\n[killed after {timeout:.0f} s timeout]"
    return proc.returncode, out.decode("utf-8", "replace")


def log_excerpt(log: str, max_chars: int = 3000) -> str:
    """The error lines of a LaTeX log (``! ...`` / ``file:line: ...``) with a little context."""
    lines = log.splitlines()
    picks: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("!") or re.match(r"^[^\s:]+\.tex:\d+: ", line) or "Undefined control" in line:
            picks.extend(lines[i : i + 4])
            picks.append("...")
        if sum(len(p) for p in picks) > max_chars:
            break
    text = "\n".join(picks) if picks else "\n".join(lines[-30:])
    return text[:max_chars]


def count_pages(pdf: Path, log_text: str = "", tool_path: str | None = None) -> int | None:
    """Pages of a PDF: from the pdflatex log, else pdfinfo, else the raw /Type /Page objects."""
    m = re.findall(r"Output written on .*?\((\d+) pages?", log_text)
    if m:
        return int(m[-1])
    pdfinfo = find_tool("pdfinfo", tool_path)
    if pdfinfo:
        code, out = _run([pdfinfo, str(pdf)], pdf.parent, 30)
        found = re.search(r"^Pages:\s+(\d+)", out, re.M)
        if code == 0 and found:
            return int(found.group(1))
    raw = pdf.read_bytes()
    n = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", raw))
    return n or None


_PT = r"([0-9.]+)pt"
_PAGE_LINE = re.compile(rf"^ai-scientist-page {_PT} {_PT} {_PT} {_PT}", re.M)
_FIGURE_LINE = re.compile(rf"^ai-scientist-figure (\S+) {_PT}", re.M)


_END_LINE = re.compile(r"^ai-scientist-endpos (\d+) (-?\d+) (-?\d+)", re.M)  # page, x, y (sp, at shipout)
_TOP_LINE = re.compile(rf"^ai-scientist-top {_PT} {_PT}", re.M)  # the text's top, the 1st column's right
_SP = 65536.0  # scaled points a TeX point


def figure_pages(log_text: str) -> tuple[float | None, int]:
    """(pages, figures): how much of the main text the figures take, from the lines the templates
    write to the log — each figure's float (image and caption) plus the space around a float —
    packed in order into columns of the text height: a float never splits, so floats of a third
    of a page each fill two to a page, and five of them take 2.3 pages, not their summed 1.7 (the
    sum made a capable model's word budget too large: met, and still a page over). (None, 0)
    when the log holds no such lines."""
    page = _PAGE_LINE.findall(log_text)
    figs = dict(_FIGURE_LINE.findall(log_text))  # by label: a rerun of pdflatex writes them again
    if not page or not figs:
        return None, 0
    height, width, column, sep = (float(x) for x in page[-1])
    columns = max(1, round(width / column)) if column else 1
    full, used = 0, 0.0
    for h in figs.values():
        need = min(float(h) + sep, height)
        if used and used + need > height:
            full, used = full + 1, 0.0
        used += need
    return (full + used / height) / columns, len(figs)


def last_page_fill(log_text: str) -> tuple[int, float] | None:
    """(page, fill): the page the main text ends on and how much of it the text fills (0-1), from
    the position the templates save where the text ends (``\\pdfsavepos``, written when the page
    is shipped: the page builder may still move the last lines to the next page after the text
    ends, so nothing measured before shipping is reliable); on a two-column page, the second
    column counts from one half. None when the log holds no such line."""
    page, top, end = _PAGE_LINE.findall(log_text), _TOP_LINE.findall(log_text), _END_LINE.findall(log_text)
    if not page or not top or not end:
        return None
    height, width, column = (float(x) for x in page[-1][:3])
    top_y, first_right = (float(x) for x in top[-1])
    number, x, y = int(end[-1][0]), int(end[-1][1]) / _SP, int(end[-1][2]) / _SP
    if not height:
        return None
    fill = max(0.0, min(1.0, (top_y - y) / height))
    if column and round(width / column) >= 2:
        fill = (fill + (1.0 if x > first_right else 0.0)) / 2
    return number, fill


def main_body_pages(aux: Path) -> int | None:
    """Last page of the main text: where it ends (label ``endofmain``) or a figure floated to, if later."""
    try:
        text = aux.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    pages = [int(p) for p in re.findall(r"\\newlabel\{(?:endofmain|fig:\d+)\}\{\{[^}]*\}\{(\d+)\}", text)]
    return max(pages) if pages else None


def compile_pdf(paper_dir: Path, timeout: float, tool_path: str | None = None) -> CompileResult:
    """Build ``paper.pdf`` from ``paper.tex`` (latexmk, else pdflatex/bibtex/pdflatex x2)."""
    latexmk = find_tool("latexmk", tool_path)
    pdflatex, bibtex = find_tool("pdflatex", tool_path), find_tool("bibtex", tool_path)
    if not pdflatex:
        return CompileResult(False, None, None, None, f"pdflatex not found; {INSTALL_HINT}")
    base = [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", "paper.tex"]
    if latexmk:
        cmds = [[latexmk, "-pdf", f"-pdflatex={' '.join(base[:-1])} %O %S", "paper.tex"]]
    else:
        cmds = [base, [bibtex or "bibtex", "paper"], base, base]
    log = ""
    for cmd in cmds:
        code, out = _run(cmd, paper_dir, timeout)
        log += out
        if code != 0 and cmd[0] != bibtex:
            break
    tex_log = (
        (paper_dir / "paper.log").read_text("utf-8", "replace") if (paper_dir / "paper.log").exists() else ""
    )
    pdf = paper_dir / "paper.pdf"
    ok = code == 0 and pdf.exists()
    excerpt = "" if ok else log_excerpt(tex_log or log)
    pages = count_pages(pdf, tex_log, tool_path) if ok else None
    chk = run_chktex(paper_dir, tool_path) if ok else []
    fig_pages, n_figs = figure_pages(tex_log) if ok else (None, 0)
    main = main_body_pages(paper_dir / "paper.aux")
    # the fill is the last page's only when the text ends on it (no figure floated to a later one)
    end = last_page_fill(tex_log) if ok else None
    fill = end[1] if end and main is not None and end[0] == main else None
    return CompileResult(
        ok,
        pdf if ok else None,
        pages,
        main,
        excerpt,
        chk,
        fig_pages,
        n_figs,
        fill,
    )


def run_chktex(paper_dir: Path, tool_path: str | None = None) -> list[str]:
    """chktex warnings for paper.tex (empty when chktex is not installed)."""
    chktex = find_tool("chktex", tool_path)
    if not chktex:
        return []
    _code, out = _run([chktex, "-q", "-v0", "paper.tex"], paper_dir, 60)
    return [line for line in out.splitlines() if line.strip()][:200]
