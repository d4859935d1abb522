"""analyze's progress line: on a terminal, over inputs past 100 MB, it
redraws bytes, files, MB/s and ETA on stderr and clears itself; never when
stderr is not a terminal, with --quiet, or under CI. The input is a real
corpus log repeated past 100 MB."""
import os
import subprocess

import pytest

from conftest import binary

LOG = "paddle-suites/ppdet-rtdetr-ssdd-1gpu.log"


@pytest.fixture
def big_log(corpus, tmp_path):
    chunk = (corpus / LOG).read_bytes()
    path = tmp_path / "big.log"
    with open(path, "wb") as f:
        for _ in range((101 << 20) // len(chunk) + 1):
            f.write(chunk)
    return path


def analyze_on_terminal(args, env=None):
    """Runs analyze with stderr on a pseudo-terminal; returns (stdout, stderr bytes)."""
    master, slave = os.openpty()
    proc = subprocess.Popen([binary("trainwatch"), "analyze", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        err += data
    out, _ = proc.communicate(timeout=300)
    os.close(master)
    return proc.returncode, out, err


def without_ci():
    """The environment minus CI, which the project's own CI sets and which
    turns the line off (what the second test checks)."""
    return {k: v for k, v in os.environ.items() if k != "CI"}


def test_progress_line_on_a_terminal(big_log):
    rc, out, err = analyze_on_terminal(["--jobs", "1", big_log], env=without_ci())
    assert rc in (0, 1)
    size_mb = big_log.stat().st_size / 1e6
    assert b"\r\x1b[Ktrainwatch analyze: 0/1 files, " in err
    assert f"/{size_mb:.0f} MB, ".encode() in err and b" MB/s, ETA " in err
    assert err.endswith(b"\r\x1b[K")  # cleared at the end
    assert b"Summary" in out and b"\r" not in out  # the report itself is untouched


def test_no_progress_line_off_a_terminal_with_quiet_or_under_ci(big_log):
    result = subprocess.run([binary("trainwatch"), "analyze", big_log], capture_output=True, timeout=300)
    assert b"\r" not in result.stderr and b"MB/s" not in result.stderr
    rc, out, err = analyze_on_terminal(["--quiet", big_log], env=without_ci())
    assert b"MB/s" not in err and b"\r" not in err
    rc, out, err = analyze_on_terminal([big_log], env={**os.environ, "CI": "true"})
    assert b"MB/s" not in err and b"\r" not in err


def test_small_inputs_get_no_line(corpus):
    rc, out, err = analyze_on_terminal([corpus / LOG], env=without_ci())
    assert b"MB/s" not in err
