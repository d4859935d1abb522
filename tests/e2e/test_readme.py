"""The documentation's examples are real output: each block marked
<!-- check: COMMAND --> in the README or a docs/ page is produced again here
and must match, so the documentation cannot drift from what trainwatch
prints. Links between the pages must lead somewhere."""
import os
import re
import shlex
import socket
import subprocess

import pytest

from conftest import BUILD, CORPUS, SOURCE

README = (SOURCE / "README.md").read_text()
PAGES = [SOURCE / "README.md"] + sorted((SOURCE / "docs").glob("*.md"))
CHECKS = [(page.relative_to(SOURCE).as_posix(), command, expected)
          for page in PAGES
          for command, expected in re.findall(r"<!-- check: (.+?) -->\n```text\n(.*?)\n```", page.read_text(), re.S)]


def test_docs_have_checked_examples():
    assert len(CHECKS) >= 3
    assert any(page == "README.md" for page, _, _ in CHECKS)


@pytest.mark.parametrize("page,command,expected", CHECKS, ids=[f"{p}: {c}" for p, c, _ in CHECKS])
def test_doc_example(page, command, expected):
    args = shlex.split(command)
    if any("shared/corpus" in a for a in args) and not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    args[0] = str(BUILD / args[0])
    result = subprocess.run(args, cwd=SOURCE, capture_output=True, text=True, timeout=60)
    assert result.stdout.rstrip("\n") == expected


def test_readme_starts_with_the_two_commands():
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block.startswith("make demo")
    assert "make check" in first_block


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_lead_somewhere(page):
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
        assert (page.parent / target).exists(), f"{page.name}: link to {target} leads nowhere"


# ---- make demo ---------------------------------------------------------------

DEMO_BLOCK = re.search(r"`make demo` prints[^\n]*:\n\n```text\n(.*?)\n```", README, re.S)
# a number with its unit, as timings and counts print ("11ms", "1.0s", "84/100", "0:00:01")
NUMBER = re.compile(r"\d+(?:[.:]\d+)*(?:us|ms|s|m|h)?")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def masked(line):
    """A line with its numbers masked: timings, counts, ports and
    timestamps vary from run to run; the words and their order do not."""
    return NUMBER.sub("N", line.rstrip())


def matches(shown, printed):
    """Whether the printed lines are the README's, where a line '...' stands
    for any number of printed lines (the training log in between)."""
    def at(i, j):
        if i == len(shown):
            return j == len(printed)
        if shown[i] == "...":
            return any(at(i + 1, k) for k in range(j, len(printed) + 1))
        return j < len(printed) and masked(shown[i]) == masked(printed[j]) and at(i + 1, j + 1)
    return at(0, 0)


def test_matches_masks_numbers_and_elides():
    assert matches(["a 1.0s", "...", "b 3"], ["a 985ms", "x", "y", "b 4"])
    assert not matches(["a 1.0s", "b"], ["a 1.0s", "c"])
    assert not matches(["a", "..."], ["b"])


def test_make_demo_prints_what_the_readme_shows(tmp_path):
    """Issue 27, item 14: `make demo` prints one line for the build, then the
    demo, exactly as the README shows it (numbers aside): the run's messages,
    the report with its health line, the offline analysis, the Python
    section, in the order a terminal shows them (stderr and stdout as one)."""
    assert DEMO_BLOCK, "the README has no `make demo` prints block"
    if not (SOURCE / "build" / "trainwatch").exists():
        pytest.skip("make demo uses build/: run make build first")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["TW_DEMO_PORT"] = str(free_port())
    result = subprocess.run(["make", "demo"], cwd=SOURCE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    printed = result.stdout.rstrip("\n").split("\n")
    shown = DEMO_BLOCK.group(1).split("\n")
    assert printed[0].startswith("building build "), printed[:3]
    assert "Entering directory" not in result.stdout
    assert matches(shown, printed), "\n".join(printed)
