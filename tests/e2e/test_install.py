"""scripts/install-deps.sh: make demo installs what the build and the demo
need; the servers the tests start (which Debian would start listening on all
interfaces) and the test tools come only with make check."""
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
