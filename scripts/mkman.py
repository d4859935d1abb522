#!/usr/bin/python3
"""mkman.py OUT VERSION SOURCE_DIR: writes the trainwatch(1) man page from the
documentation (the README's first paragraphs, then docs/analyze.md, run.md,
watch.md, alerts.md, actions.md, trace.md and history.md as the command reference), so the man page and the
docs cannot say different things. Reads the subset of Markdown the docs use:
headings, paragraphs, lists, tables, fenced blocks, `code`, **bold**, links,
HTML comments (dropped)."""
import datetime
import pathlib
import re
import sys

PAGES = [("analyze.md", "ANALYZE"), ("run.md", "RUN"), ("watch.md", "WATCH"), ("alerts.md", "ALERTS"),
         ("actions.md", "ACTIONS"),
         ("trace.md", "TRACE"), ("history.md", "HISTORY")]


def escape(text):
    text = text.replace("\\", "\\e")
    text = text.replace("-", "\\-")
    # anything beyond ASCII as groff's Unicode escape (µs, x, arrows...)
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def inline(text):
    """Markdown inline markup to roff fonts; links keep their text."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`|\*\*([^*]+)\*\*", text):
        out.append(escape(text[pos:m.start()]))
        code = escape(m.group(1) or m.group(2))
        # a long code word may break after a comma (\\: is a zero-width break point)
        out.append("\\fB" + code.replace(",", ",\\:") + "\\fR")
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def line_safe(text):
    """A roff text line must not start with a control character."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    """The cells of a table row (an escaped \\| stays in its cell)."""
    inner = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def convert(markdown, section):
    """One docs page as a man page section: its title is the section, its
    headings subsections."""
    roff = [f".SH {section}"]
    lines = re.sub(r"<!--.*?-->\n?", "", markdown, flags=re.S).split("\n")
    i, para = 0, []

    def flush():
        if para:
            roff.append(".PP")
            roff.append(line_safe(inline(" ".join(para))))
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            roff += [".PP", ".RS 2", ".nf", ".ft CR"]
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                roff.append(line_safe(escape(lines[i])))
                i += 1
            roff += [".ft R", ".fi", ".RE"]
        elif re.match(r"^#+ ", line):
            flush()
            level = len(line) - len(line.lstrip("#"))
            if level > 1:
                roff.append(".SS " + inline(line.lstrip("#").strip()).replace('"', ""))
        elif line.startswith("|"):
            flush()
            header = cells(line)
            i += 2  # the header and the |---| line
            while i < len(lines) and lines[i].startswith("|"):
                row = cells(lines[i])
                roff.append(".TP")
                roff.append(line_safe(inline(row[0])))
                # the last column says what it is; the ones between are named
                pairs = list(zip(header[1:], row[1:]))
                rest = [c if j == len(pairs) - 1 or not h else f"{h}: {c}" for j, (h, c) in enumerate(pairs) if c]
                roff.append(line_safe(inline("; ".join(rest))))
                i += 1
            continue
        elif re.match(r"^\s*[-*] ", line):
            flush()
            item = [re.sub(r"^\s*[-*] ", "", line)]
            while i + 1 < len(lines) and lines[i + 1].startswith("  ") and lines[i + 1].strip():
                i += 1
                item.append(lines[i].strip())
            roff += [".IP \\(bu 2", line_safe(inline(" ".join(item)))]
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
        i += 1
    flush()
    return roff


def main():
    out, version, source = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    readme = (source / "README.md").read_text()
    intro = readme.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    date = datetime.date.today().isoformat()
    roff = [f'.TH TRAINWATCH 1 "{date}" "trainwatch {version}" "User Commands"',
            ".ad l",  # ragged right: long code words never leave a line that cannot be adjusted
            ".SH NAME", "trainwatch \\- observability for deep\\-learning training runs",
            ".SH SYNOPSIS",
            ".B trainwatch analyze", "[\\fIOPTIONS\\fR] \\fIFILE\\fR...", ".br",
            ".B trainwatch run", "[\\fIOPTIONS\\fR] \\-\\- \\fICMD\\fR [\\fIARGS\\fR...]", ".br",
            ".B trainwatch watch", "[\\fIOPTIONS\\fR] \\fIFILE\\fR|\\fIGLOB\\fR...", ".br",
            ".B trainwatch rules", "check|export|defaults ...", ".br",
            ".B trainwatch trace", "[\\fIOPTIONS\\fR] \\fITRACE\\fR...", ".br",
            ".B trainwatch formats", ".br",
            ".B trainwatch help", "\\fICOMMAND\\fR",
            ".SH DESCRIPTION"]
    for para in intro.split("\n\n"):
        roff += [".PP", line_safe(inline(" ".join(para.split())))]
    for page, section in PAGES:
        roff += convert((source / "docs" / page).read_text(), section)
    roff += [".SH SEE ALSO",
             "The documentation pages in the source tree (docs/*.md), \\fBprometheus\\fR(1), \\fBpromtool\\fR(1)."]
    pathlib.Path(out).write_text("\n".join(roff) + "\n")


if __name__ == "__main__":
    main()
