"""Bash completion (completions/trainwatch.bash): subcommands, each
subcommand's options as its --help lists them, format names, and the
command after `run --`, completed by a real bash the way a terminal would."""
import shlex
import subprocess

from conftest import BUILD, SOURCE

SCRIPT = SOURCE / "completions" / "trainwatch.bash"


def complete(line):
    """What bash offers for the last word of `line` (a trailing space starts
    a new, empty word)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    words[0] = str(BUILD / "trainwatch")
    program = (f"source {shlex.quote(str(SCRIPT))}\n"
               f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\n"
               "_trainwatch\n"
               "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return set(filter(None, r.stdout.split("\n")))


def test_subcommands():
    assert {"analyze", "formats", "watch", "run", "rules", "help"} <= complete("trainwatch ")
    assert complete("trainwatch an") == {"analyze"}


def test_options_come_from_each_commands_help():
    assert {"--json", "--records", "--fail-on", "--data-share"} <= complete("trainwatch analyze --")
    assert "--separate-stderr" in complete("trainwatch run --")
    assert "--separate-stderr" not in complete("trainwatch watch --")
    assert complete("trainwatch watch --web.li") == {"--web.listen-address", "--web.linger"}
    assert complete("trainwatch watch --web.lis") == {"--web.listen-address"}


def test_values():
    assert {"hapi", "ppocr", "glog"} <= complete("trainwatch analyze --format ")
    assert complete("trainwatch analyze --fail-on w") == {"warning"}
    assert complete("trainwatch rules ") == {"check", "export", "defaults"}


def test_the_command_after_run_dashdash():
    assert "bash" in complete("trainwatch run --log-file x.log -- bas")
