"""The documentation's examples are real output: each block marked
<!-- check: COMMAND --> in the README or a docs/ page is produced again here
and must match, so the documentation cannot drift from what trainwatch
prints. Links between the pages must lead somewhere."""
import re
import shlex
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
