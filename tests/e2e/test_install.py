"""scripts/install-deps.sh: make demo installs what the build and the demo
need; the servers the tests start (which Debian would start listening on all
interfaces) and the test tools come only with make check."""
import re
import subprocess

from conftest import SOURCE

SCRIPT = SOURCE / "scripts" / "install-deps.sh"


def listed(profile):
    r = subprocess.run(["bash", str(SCRIPT), "--list", profile], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_make_demo_installs_no_servers_or_test_tools():
    demo, check = listed("demo"), listed("check")
    servers = {"prometheus", "prometheus-pushgateway", "prometheus-alertmanager"}
    assert not demo & (servers | {"clang", "valgrind", "wrk", "mtail", "python3-pytest"})
    assert servers <= check and demo <= check
    makefile = (SOURCE / "Makefile").read_text()
    assert "install-deps.sh demo" in makefile and "install-deps.sh check" in makefile


def test_servers_are_kept_from_starting_at_install():
    text = SCRIPT.read_text()
    # invoke-rc.d asks policy-rc.d before starting a packaged service: 101 is "not allowed"
    assert "/usr/sbin/policy-rc.d" in text and "exit 101" in text
    assert "systemctl mask --now" in text


def test_unknown_profile_is_refused():
    bad = subprocess.run(["bash", str(SCRIPT), "everything"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_make_install_puts_the_binary_man_page_and_completion_under_a_prefix(tmp_path):
    from conftest import BUILD
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    tw = prefix / "bin" / "trainwatch"
    assert subprocess.run([str(tw), "--help"], capture_output=True, timeout=30).returncode == 0
    assert (prefix / "share" / "bash-completion" / "completions" / "trainwatch").is_file()
    page = prefix / "share" / "man" / "man1" / "trainwatch.1"
    # groff renders it without a warning
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = subprocess.run(["groff", "-man", "-Tutf8", str(page)], capture_output=True, text=True,
                          timeout=60).stdout
    text = re.sub(r".\x08", "", text)  # overstrike bold
    text = re.sub(r"\s*‐\s*\n\s*|\s+", " ", text)  # hyphenation at line ends, and line breaks
    # the man page is the command reference: every option each command's help lists is in it
    for command in ("analyze", "run", "watch", "trace"):
        help_text = subprocess.run([str(tw), command, "--help"], capture_output=True, text=True, timeout=30).stdout
        for option in sorted(set(re.findall(r"(--[a-z][a-z0-9.-]*)", help_text)) - {"--help"}):
            assert option in text, f"trainwatch.1 does not document {command} {option}"
