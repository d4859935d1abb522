"""The README's examples are real output: each block marked
<!-- check: COMMAND --> is produced again here and must match, so the README
cannot drift from what trainwatch prints."""
import re
import shlex
import subprocess

import pytest

from conftest import BUILD, CORPUS, SOURCE

README = (SOURCE / "README.md").read_text()
CHECKS = re.findall(r"<!-- check: (.+?) -->\n```text\n(.*?)\n```", README, re.S)


def test_readme_has_checked_examples():
    assert len(CHECKS) >= 3


@pytest.mark.parametrize("command,expected", CHECKS, ids=[c for c, _ in CHECKS])
def test_readme_example(command, expected):
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
