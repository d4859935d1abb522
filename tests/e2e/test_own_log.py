"""trainwatch's own messages under --log.level / --log.format (run and watch):
every line trainwatch itself writes on stderr is one logfmt or JSON record
with ts, level, source and msg, from every part that speaks (the command,
the follower, the live parser, the rules engine), levels filter, and the
end-of-run diagnosis becomes records too."""
import json
import re
import subprocess

from conftest import binary, run

LOGFMT_PAIR = re.compile(r'([a-z]+)=("(?:[^"\\]|\\.)*"|[^ "]+)')


def logfmt(line):
    """Parses one logfmt line strictly: pairs separated by single spaces,
    nothing left over."""
    pairs = {}
    pos = 0
    while pos < len(line):
        m = LOGFMT_PAIR.match(line, pos)
        assert m, f"not logfmt at {pos}: {line!r}"
        value = m.group(2)
        if value.startswith('"'):
            value = json.loads(value)  # logfmt quoting is JSON's for what we write
        pairs[m.group(1)] = value
        pos = m.end()
        if pos < len(line):
            assert line[pos] == " ", line
            pos += 1
    return pairs


TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def check_record(rec):
    assert set(rec) == {"ts", "level", "source", "msg"}, rec
    assert TS.match(rec["ts"]), rec
    assert rec["level"] in ("debug", "info", "warn", "error"), rec
    return rec


def crash_run(tmp_path, fmt, *extra):
    rules = tmp_path / "always.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - alert: Always\n        expr: vector(1)\n")
    return subprocess.run(
        [binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--rules", rules,
         "--eval-interval", "0.2", "--log.format", fmt, *extra, "--",
         binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "100", "--slow-reader", "5", "--lr-spike-at", "10",
         "--lr-spike-factor", "1000"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_run_json_every_stderr_line_is_a_record(tmp_path):
    r = crash_run(tmp_path, "json")
    lines = r.stderr.splitlines()
    assert lines, r
    recs = [check_record(json.loads(line)) for line in lines]
    by_source = {rec["source"] for rec in recs}
    # the command, the live parser and the rules engine all speak as records
    assert {"run", "live", "rules"} <= by_source, by_source
    assert any(rec["msg"].startswith("serving /metrics on 127.0.0.1:") and rec["level"] == "info" for rec in recs)
    assert any(rec["msg"].startswith('alert firing: {alertname="Always"}') for rec in recs), recs
    nan = [rec for rec in recs if "loss is NaN" in rec["msg"]]
    assert nan and nan[0]["level"] == "warn", recs
    # the diagnosis as records, not the text report
    assert "== trainwatch" not in r.stderr
    finding = [rec for rec in recs if rec["msg"].startswith("finding nan_loss: ")]
    assert finding and finding[0]["level"] == "error", recs
    assert any(rec["msg"].startswith("diagnosis: not healthy") for rec in recs)
    # the command's own output is untouched, on stdout
    assert "ppocr INFO" in r.stdout


def test_run_logfmt_and_level(tmp_path):
    r = crash_run(tmp_path, "logfmt", "--log.level", "warn")
    recs = [check_record(logfmt(line)) for line in r.stderr.splitlines()]
    assert recs, r
    assert all(rec["level"] in ("warn", "error") for rec in recs), recs
    assert not any("serving /metrics" in rec["msg"] for rec in recs)
    assert any(rec["source"] == "live" and "loss is NaN" in rec["msg"] for rec in recs)


def test_text_is_the_default_and_unchanged(tmp_path):
    r = crash_run(tmp_path, "text")
    assert re.search(r"^trainwatch run: serving /metrics on 127\.0\.0\.1:\d+$", r.stderr, re.M), r.stderr
    assert "== trainwatch: demo-train" in r.stderr
    # what the parser and rules engine say is prefixed with the command too
    assert re.search(r"^trainwatch run: demo-train rank 0: loss is NaN at step \d+", r.stderr, re.M), r.stderr
    assert re.search(r'^trainwatch run: alert firing: \{alertname="Always"\}', r.stderr, re.M), r.stderr


def test_watch_follower_speaks_json(tmp_path):
    r = run(["trainwatch", "watch", "--web.listen-address", "none", "--duration", "0.5",
             "--log.format", "json", tmp_path / "not-yet.log"])
    assert r.returncode == 0, r.stderr
    recs = [check_record(json.loads(line)) for line in r.stderr.splitlines()]
    follow = [rec for rec in recs if rec["source"] == "follow"]
    assert follow and follow[0]["msg"].endswith("not-yet.log: does not exist yet: waiting for it"), recs
    assert any(rec["source"] == "watch" and rec["msg"].startswith("0 lines from 0 files") for rec in recs)


def test_bad_values_are_usage_errors():
    for cmd in (["run", "--log.level", "verbose", "--", "true"], ["watch", "--log.format", "xml", "x.log"]):
        r = run(["trainwatch", *cmd])
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1, r.stderr
        assert "--log." in r.stderr and ("'verbose'" in r.stderr or "'xml'" in r.stderr), r.stderr
