"""Alerts end to end, against real components: promtool checks the rule files
trainwatch writes, a real Prometheus loads the exported rules and fires the
same alert on the same metrics, a real Alertmanager receives ours (firing,
then resolved), and a recording HTTP receiver checks every webhook format,
the DingTalk and Feishu signatures, retries and recovery."""
import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import time
import urllib.parse

import pytest

from conftest import binary, run
from servers import Alertmanager, Process, Prometheus, WebhookReceiver, free_port, http, wait_until


def step_line(step, loss):
    return (f"[2026/12/02 10:00:{step % 60:02d}] ppocr INFO: epoch: [1/1], global_step: {step}, lr: 0.100000, "
            f"loss: {loss}, acc: 0.5, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.10000 s, avg_samples: 128.0, "
            f"ips: 1280.0 samples/s, eta: 0:00:10, max_mem_reserved: 10 MB\n")


def append(path, lines):
    with open(path, "a") as f:
        f.writelines(lines)


class Watch(Process):
    """trainwatch watch on one log file, serving /metrics on a free port."""

    def __init__(self, workdir, log, *extra, env=None):
        self.port = free_port()
        args = [binary("trainwatch"), "watch", "--from-start", "--run-name", "train", "--eval-interval", "0.5",
                "--web.listen-address", f"127.0.0.1:{self.port}", *extra, log]
        if env:
            old = dict(os.environ)
            os.environ.update(env)
        try:
            super().__init__(args, workdir, "watch")
        finally:
            if env:
                os.environ.clear()
                os.environ.update(old)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: http(self.url + "/metrics")[0] == 200, what="trainwatch watch to serve")

    def metrics(self):
        return http(self.url + "/metrics")[2].decode()


# ---- rule files ---------------------------------------------------------------

def test_defaults_and_export_pass_promtool(tmp_path):
    defaults = tmp_path / "defaults.yml"
    r = run(["trainwatch", "rules", "defaults"])
    assert r.returncode == 0
    defaults.write_text(r.stdout)
    user = tmp_path / "user.yml"
    user.write_text("groups:\n  - name: mine\n    interval: 30s\n    rules:\n"
                    "      - record: job:loss:avg5m\n        expr: avg by (job) (avg_over_time(trainwatch_train_loss[5m]))\n"
                    "      - alert: SlowSteps\n        expr: quantile_over_time(0.9, trainwatch_train_loss[5m]) > 2\n"
                    "        for: 5m\n        labels:\n          team: \"ml \\\"infra\\\"\"\n"
                    "        annotations:\n          summary: 'p90 step time {{ $value | humanizeDuration }}'\n")
    exported = tmp_path / "exported.yml"
    r = run(["trainwatch", "rules", "export", "--rules", user, "-o", exported])
    assert r.returncode == 0, r.stderr
    assert "quantile_over_time" in r.stderr  # said not evaluated here, still exported
    for f in (defaults, exported):
        check = subprocess.run(["promtool", "check", "rules", str(f)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 11 rules found" in subprocess.run(["promtool", "check", "rules", str(defaults)],
                                                      capture_output=True, text=True).stdout
    assert "SUCCESS: 13 rules found" in subprocess.run(["promtool", "check", "rules", str(exported)],
                                                       capture_output=True, text=True).stdout
    # check: 0 for our own, 4 for valid-but-unsupported, 1 (as promtool) for invalid
    assert run(["trainwatch", "rules", "check", defaults]).returncode == 0
    r = run(["trainwatch", "rules", "check", user])
    assert r.returncode == 4 and "function 'quantile_over_time' is not supported" in r.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: g\n    rules:\n      - alert: X\n        expr: rate(x[5m]\n")
    r = run(["trainwatch", "rules", "check", bad])
    assert r.returncode == 1 and "bad.yml:5:" in r.stdout
    assert subprocess.run(["promtool", "check", "rules", str(bad)], capture_output=True).returncode == 1
    r = run(["trainwatch", "rules", "check", tmp_path / "missing.yml"])
    assert r.returncode == 1 and "missing.yml: No such file or directory" in r.stdout


CHECK_CASES = {
    "valid": ["ok.yml"],
    "invalid expression": ["bad.yml"],
    "invalid YAML": ["badyaml.yml"],
    "missing file": ["missing.yml"],
    "a directory": ["adir"],
    "valid then invalid": ["ok.yml", "bad.yml"],
    "invalid then valid": ["bad.yml", "ok.yml"],
    "valid then missing": ["ok.yml", "missing.yml"],
    "no files": [],
    "unknown option": ["--bogus", "ok.yml"],
    "--lint without its value": ["ok.yml", "--lint"],
    "unknown lint value": ["--lint=bogus", "ok.yml"],
    "lint list": ["--lint=none,duplicate-rules", "--lint-fatal", "dup.yml"],
    "lint fatal and invalid": ["--lint-fatal", "dup.yml", "bad.yml"],
    "option after the files": ["ok.yml", "--lint=none"],
    "help": ["--help"],
}


@pytest.mark.parametrize("case", CHECK_CASES)
def test_check_exit_status_is_promtools(tmp_path, case):
    """rules check exits as promtool check rules (2.42) does, side by side."""
    (tmp_path / "ok.yml").write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n")
    (tmp_path / "bad.yml").write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up ==\n")
    (tmp_path / "badyaml.yml").write_text("groups: [\n")
    (tmp_path / "dup.yml").write_text("groups:\n- name: a\n  rules:\n  - record: x\n    expr: up\n"
                                      "  - record: x\n    expr: up\n")
    (tmp_path / "adir").mkdir()
    args = CHECK_CASES[case]
    theirs = subprocess.run(["promtool", "check", "rules", *args], cwd=tmp_path, capture_output=True, text=True)
    ours = subprocess.run([binary("trainwatch"), "rules", "check", *args], cwd=tmp_path, capture_output=True,
                          text=True)
    assert ours.returncode == theirs.returncode, (ours, theirs)
    if case in ("valid", "unknown lint value", "lint list"):  # same words too
        assert (ours.stdout, ours.stderr) == (theirs.stdout, theirs.stderr)


def nested(prefix, middle, suffix, n=100000):
    return prefix * n + middle + suffix * n


RULE_HEAD = "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: "
UNBOUNDED = {
    # what overflowed the stack, took libyaml half a minute, or printed gigabytes
    "parentheses": (RULE_HEAD + "'" + nested("(", "up", ")") + " > 0'\n", 4,
                    "g.yml:5: alert A: expr: not evaluated by trainwatch: col 257: expression nesting deeper than 256"),
    "unary minus": (RULE_HEAD + "'" + nested("-", "up", "") + "'\n", 4, "expression nesting deeper than 256 levels"),
    "abs": (RULE_HEAD + "'" + nested("abs(", "up", ")") + "'\n", 4, "expression nesting deeper than 256 levels"),
    "a long chain": (RULE_HEAD + "'" + " + ".join(["up"] * 100000) + "'\n", 4,
                     "expression nesting deeper than 256 levels"),
    "YAML": ("groups: " + nested("[", "", "]") + "\n", 1, "g.yml:1:72: YAML: nesting deeper than 64 levels"),
    "printf": (RULE_HEAD + "up == 0\n    annotations:\n      summary: '{{ printf \"%.999999999f\" 1.0 }}'\n", 4,
               "g.yml:7: annotations summary: template: printf precision 999999999 is larger than"),
}


@pytest.mark.parametrize("case", UNBOUNDED)
def test_unbounded_rule_files_are_refused_with_their_line(tmp_path, case):
    text, status, said = UNBOUNDED[case]
    rules = tmp_path / "g.yml"
    rules.write_text(text)
    r = run(["trainwatch", "rules", "check", rules], timeout=30)
    assert r.returncode == status, r.stdout[-2000:] + r.stderr[-2000:]
    assert said in r.stdout
    marker = tmp_path / "ran"
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--rules", rules, "--", "touch", marker], timeout=30)
    assert r.returncode == 2 and said in r.stderr and not marker.exists()
    log = tmp_path / "train.log"
    log.write_text(step_line(1, "2.5"))
    r = run(["trainwatch", "watch", "--web.listen-address", "none", "--duration", "1", "--rules", rules, log],
            timeout=30)
    assert r.returncode == 2 and said in r.stderr


DUPLICATES = """groups:
- name: a
  rules:
  - record: job:x:sum
    expr: sum(up)
  - record: job:x:sum
    expr: sum(up) by (job)
  - alert: Foo
    expr: up == 0
    labels: {severity: page, team: ml}
  - alert: Foo
    expr: up == 1
    labels: {team: ml, severity: page}
  - alert: Foo
    expr: up == 2
    labels: {severity: page}
  - alert: Bar
    expr: up == 2
- name: b
  rules:
  - record: job:x:sum
    expr: sum(up)
  - alert: Bar
    expr: up == 3
"""


@pytest.mark.parametrize("options", [[], ["--lint-fatal"], ["--lint=none"], ["--lint=duplicate-rules", "--lint-fatal"]])
def test_duplicate_rules_lint_is_promtools(tmp_path, options):
    """The same words, streams and exit status as promtool's duplicate-rules
    lint, across groups and whatever the order the labels are written in."""
    dup, ok = tmp_path / "dup.yml", tmp_path / "ok.yml"
    dup.write_text(DUPLICATES)
    ok.write_text("groups:\n- name: a\n  rules:\n  - record: x\n    expr: up\n")
    ours = run(["trainwatch", "rules", "check", *options, ok, dup])
    theirs = subprocess.run(["promtool", "check", "rules", *options, str(ok), str(dup)], capture_output=True, text=True)
    assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr)
    if "--lint=none" not in options:
        assert "lint error 3 duplicate rule(s) found." in ours.stderr


def test_bad_rule_file_stops_run_before_the_command(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: g\n    rules:\n      - alert: X\n        expr: topk(3, x)\n")
    marker = tmp_path / "ran"
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--rules", bad, "--", "touch", marker])
    assert r.returncode == 2
    assert "bad.yml:5: alert X: expr: not evaluated by trainwatch" in r.stderr
    assert not marker.exists()
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--webhook", "ftp://x", "--", "touch", marker])
    assert r.returncode == 2 and "http:// or https://" in r.stderr and not marker.exists()
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--webhook", "http://127.0.0.1:1/x",
             "--webhook-format", "pager", "--", "touch", marker])
    assert r.returncode == 2 and "unknown notification format 'pager'" in r.stderr and not marker.exists()


def test_missing_libcurl_stops_run_before_the_command(tmp_path):
    """libcurl is loaded only when something is sent; without it a receiver
    or a Pushgateway is refused up front, and the rest still works."""
    marker = tmp_path / "ran"
    env = dict(os.environ, TW_CURL_LIBRARY=str(tmp_path / "no-libcurl.so"))
    for flags in (["--webhook", "http://127.0.0.1:1/x"], ["--alertmanager", "http://127.0.0.1:1"],
                  ["--pushgateway", "http://127.0.0.1:1"]):
        r = run(["trainwatch", "run", "--web.listen-address", "none", *flags, "--", "touch", marker], env=env)
        assert r.returncode == 2, r.stderr
        assert "cannot load libcurl (Debian package libcurl4)" in r.stderr
        assert not marker.exists()
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--", "touch", marker], env=env)
    assert r.returncode == 0 and marker.exists()


# ---- Prometheus fires the same alert from the exported rules ------------------

def test_prometheus_fires_the_same_alert(tmp_path, procs):
    log = tmp_path / "train.log"
    append(log, [step_line(s, "2.5") for s in range(1, 4)] + [step_line(s, "nan") for s in range(4, 11)])
    watch = procs(Watch, str(tmp_path), str(log))
    exported = tmp_path / "exported.yml"
    assert run(["trainwatch", "rules", "export", "-o", exported]).returncode == 0
    prom = procs(Prometheus, str(tmp_path), [{"job_name": "trainwatch",
                                             "static_configs": [{"targets": [f"127.0.0.1:{watch.port}"]}]}])
    # Prometheus with the rule file: restart it with rule_files and a 1s evaluation
    prom.stop()
    config = json.load(open(tmp_path / "prometheus.yml"))
    config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(exported)]
    json.dump(config, open(tmp_path / "prometheus.yml", "w"))
    port = free_port()
    p = procs(Process, ["prometheus", f"--config.file={tmp_path}/prometheus.yml", f"--storage.tsdb.path={tmp_path}/tsdb2",
                        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], str(tmp_path), "prometheus2")

    def prom_alert():
        status, _, body = http(f"http://127.0.0.1:{port}/api/v1/alerts")
        alerts = json.loads(body)["data"]["alerts"] if status == 200 else []
        return [a for a in alerts if a["labels"]["alertname"] == "TrainingLossNaN" and a["state"] == "firing"]

    theirs = wait_until(prom_alert, timeout=60, what="Prometheus to fire TrainingLossNaN")[0]
    ours = wait_until(lambda: re.search(r"alert firing: (\{[^}]*alertname=\"TrainingLossNaN\"[^}]*\})", watch.stderr()),
                      timeout=30, what="trainwatch to fire TrainingLossNaN")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', ours.group(1)))
    # the same labels, plus the target labels a stock scrape adds
    theirs_labels = dict(theirs["labels"])
    assert theirs_labels.pop("instance") == f"127.0.0.1:{watch.port}"
    assert theirs_labels.pop("job") == "trainwatch"
    assert labels == theirs_labels, (labels, theirs["labels"])
    assert float(theirs["value"]) == 7  # seven NaN steps in a row, in both
    assert 'trainwatch_alerts{alertname="TrainingLossNaN",alertstate="firing"} 1' in watch.metrics()
    assert theirs["annotations"]["summary"] == "Loss is NaN/Inf for 7 consecutive steps"
    p.stop()


# ---- the built-in rules fire on what they describe ------------------------------

def fast_defaults(tmp_path):
    """The built-in rules with their waits shortened (for: 0s, minutes to
    seconds), so a test sees each fire on the metrics trainwatch exports."""
    text = run(["trainwatch", "rules", "defaults"]).stdout
    text = re.sub(r"for: \d+m", "for: 0s", text)
    text = text.replace(", 60)", ", 2)").replace("+ 60)", "+ 2)").replace(", 120)", ", 3)").replace("+ 120)", "+ 3)")
    text = text.replace("trainwatch_train_loss[5m]) > 2 * avg_over_time(trainwatch_train_loss[15m] offset 5m)",
                        "trainwatch_train_loss[2s]) > 2 * avg_over_time(trainwatch_train_loss[4s] offset 2s)")
    path = tmp_path / "fast.yml"
    path.write_text(text)
    return path


def fired(stderr):
    """{alertname: [labels...]} from trainwatch's 'alert firing' lines."""
    out = {}
    for labels in re.findall(r"alert firing: \{([^}]*)\}", stderr):
        d = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out.setdefault(d["alertname"], []).append(d)
    return out


def demo_under_fake_gpus(tmp_path, util, used_gib):
    # the reader sleeps 50 ms a step: data wait stays over the 50% rule even when the
    # sanitized demo computes slowly on a loaded machine
    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    env = dict(os.environ, TW_NVML_LIBRARY=fake, FAKE_NVML_UTIL=str(util), FAKE_NVML_USED_GIB=str(used_gib))
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--no-default-rules", "--rules", fast_defaults(tmp_path),
             "--eval-interval", "0.25", "--", binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "100",
             "--log-interval", "5", "--slow-reader", "50", "--crash-at", "90"], env=env, timeout=120)
    assert r.returncode == 1, r.stderr
    return fired(r.stderr)


def test_built_in_gpu_data_and_failure_rules_fire(tmp_path):
    got = demo_under_fake_gpus(tmp_path, util=10, used_gib=78)
    assert {"TrainingGPUUnderused", "TrainingGPUMemoryFull", "TrainingDataLoaderBound", "TrainingFailed"} <= set(got), got
    assert got["TrainingGPUUnderused"][0] == {"alertname": "TrainingGPUUnderused", "run": "demo-train", "rank": "0",
                                              "severity": "warning"}
    assert {a["gpu"] for a in got["TrainingGPUMemoryFull"]} == {"0", "1"}  # 78 of 80 GiB on both
    assert got["TrainingFailed"][0]["event"] == "exception"
    # and the ones whose conditions did not happen stay quiet
    assert not {"TrainingLossNaN", "TrainingRankLost", "TrainingLossDiverging"} & set(got), got
    # busy GPUs with room to spare: no GPU alert (not even from a gauge read before the first sample)
    got = demo_under_fake_gpus(tmp_path, util=50, used_gib=10)
    assert not {"TrainingGPUUnderused", "TrainingGPUMemoryFull"} & set(got), got
    assert "TrainingDataLoaderBound" in got


def test_built_in_progress_rank_and_divergence_rules_fire(tmp_path, procs):
    logs = [tmp_path / f"workerlog.{r}" for r in range(2)]
    for log in logs:
        log.write_text("")
    watch = procs(Watch, str(tmp_path), str(tmp_path / "workerlog.*"), "--no-default-rules", "--rules",
                  fast_defaults(tmp_path))
    step = 0
    # both ranks train for 3 s with a flat loss, then rank 0 stops and rank 1's loss climbs
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        step += 10
        for log in logs:
            append(log, [step_line(step, "1.000")])
        time.sleep(0.2)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        step += 10
        append(logs[1], [step_line(step, f"{5 + step / 1000:.3f}")])
        time.sleep(0.2)
    got = wait_until(lambda: (lambda f: f if {"TrainingRankLost", "TrainingLossDiverging"} <= set(f) else None)(
        fired(watch.stderr())), timeout=30, what="RankLost and LossDiverging")
    assert [a["rank"] for a in got["TrainingRankLost"]] == ["0"]
    assert [a["rank"] for a in got["TrainingLossDiverging"]] == ["1"]
    assert "TrainingNoProgress" not in got  # rank 1 still goes on
    # now nobody logs: the job makes no progress
    got = wait_until(lambda: (lambda f: f if "TrainingNoProgress" in f else None)(fired(watch.stderr())), timeout=30,
                     what="NoProgress")
    assert got["TrainingNoProgress"][0]["run"] == "train" and "rank" not in got["TrainingNoProgress"][0]


def test_fp16_overflows_beyond_a_start_up_burst_fire(tmp_path, procs):
    """The loss scaler's own overflow lines (DeepSpeed's "OVERFLOW! ...
    Skipping step") are counted live as overflow events, from 0 for each
    rank: 20 of them in the window (a start-up burst) stay quiet, 40 fire
    TrainingFp16Overflowing for that rank."""
    rules = fast_defaults(tmp_path)
    rules.write_text(rules.read_text().replace('event="overflow"}[15m]', 'event="overflow"}[30s]'))
    assert "[30s]) > 32" in rules.read_text()
    log = tmp_path / "train.log"
    log.write_text("")
    watch = procs(Watch, str(tmp_path), str(log), "--no-default-rules", "--rules", str(rules))
    overflow = ("[2024-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] OVERFLOW! Rank 0 Skipping step. "
                "Attempted loss scale: 65536, reducing to 32768\n")
    append(log, [step_line(10, "2.0")])
    wait_until(lambda: 'trainwatch_log_events_total{run="train",rank="0",event="overflow"} 0' in watch.metrics(),
               timeout=10, what="the overflow series at 0")
    for i in range(20):
        append(log, [overflow, step_line(20 + i, "2.0")])
    wait_until(lambda: 'event="overflow"} 20' in watch.metrics(), timeout=10, what="20 overflows")
    time.sleep(2)
    assert "TrainingFp16Overflowing" not in fired(watch.stderr())
    for i in range(20):
        append(log, [overflow, step_line(40 + i, "2.0")])
    got = wait_until(lambda: (lambda f: f if "TrainingFp16Overflowing" in f else None)(fired(watch.stderr())),
                     timeout=30, what="Fp16Overflowing")
    assert got["TrainingFp16Overflowing"][0]["rank"] == "0"


def test_no_progress_waits_for_a_first_step(tmp_path, procs):
    """A job that has only printed warnings has made no progress to measure
    from: no alert (and no step or progress series); after one step and
    silence, the rule falls back to its minimum wait."""
    log = tmp_path / "train.log"
    log.write_text("/usr/lib/python3.8/site-packages/paddle/nn/layer/norm.py:654: UserWarning: When training, "
                   "we now always track global mean and variance.\n")
    watch = procs(Watch, str(tmp_path), str(log), "--no-default-rules", "--rules", fast_defaults(tmp_path))
    wait_until(lambda: 'event="warning"} 1' in watch.metrics(), timeout=10, what="the warning")
    time.sleep(3)
    metrics = watch.metrics()
    assert "trainwatch_last_progress_timestamp_seconds{" not in metrics
    assert "trainwatch_train_step{" not in metrics
    assert "TrainingNoProgress" not in fired(watch.stderr())
    append(log, [step_line(10, "2.0")])
    got = wait_until(lambda: (lambda f: f if "TrainingNoProgress" in f else None)(fired(watch.stderr())), timeout=30,
                     what="NoProgress after one step")
    value = float(re.search(r'alertname="TrainingNoProgress"[^}]*\} value=([0-9.e+]+)', watch.stderr()).group(1))
    assert 2 < value < 30, value  # seconds since the step, not since 1970


# ---- Alertmanager: firing, then resolved --------------------------------------

def test_alertmanager_sees_firing_then_resolved(tmp_path, procs):
    hook = WebhookReceiver()
    try:
        am = procs(Alertmanager, str(tmp_path), webhook=hook.url + "/am")
        log = tmp_path / "train.log"
        append(log, [step_line(s, "2.0") for s in range(1, 4)])
        watch = procs(Watch, str(tmp_path), str(log), "--alertmanager", am.url, "--external-url", "http://prom:9090")
        append(log, [step_line(s, "nan") for s in range(4, 10)])

        def active():
            return [a for a in am.alerts() if a["labels"].get("alertname") == "TrainingLossNaN"]

        alert = wait_until(active, timeout=30, what="the alert in Alertmanager")[0]
        assert alert["status"]["state"] == "active"
        assert alert["labels"] == {"alertname": "TrainingLossNaN", "run": "train", "rank": "0", "severity": "critical"}
        assert alert["generatorURL"].startswith("http://prom:9090/graph?g0.expr=trainwatch_nan_loss_streak")
        assert "NaN or Inf loss" in alert["annotations"]["description"]
        # Alertmanager routes it: its webhook says firing
        wait_until(lambda: any(json.loads(r["body"])["status"] == "firing" for r in hook.received("/am")),
                   timeout=30, what="Alertmanager's firing notification")
        # the loss recovers: trainwatch resolves, Alertmanager drops it and notifies resolved
        append(log, [step_line(s, "1.5") for s in range(10, 13)])
        wait_until(lambda: not active(), timeout=30, what="the alert to resolve in Alertmanager")
        resolved = wait_until(lambda: [json.loads(r["body"]) for r in hook.received("/am")
                                       if json.loads(r["body"])["status"] == "resolved"],
                              timeout=30, what="Alertmanager's resolved notification")[0]
        assert resolved["alerts"][0]["labels"]["alertname"] == "TrainingLossNaN"
        assert "alert resolved" in watch.stderr()
    finally:
        hook.stop()


def test_demo_nan_fires_within_five_steps(tmp_path, procs):
    """The demo trainer with its learning-rate fault under `trainwatch run`:
    the NaN alert reaches Alertmanager by the sixth NaN step record, i.e.
    within five steps of the first, and resolves when the run ends."""
    hook = WebhookReceiver()
    try:
        am = procs(Alertmanager, str(tmp_path), webhook=hook.url + "/am")
        # a step record every ~0.5 s (5 steps of 100 ms), evaluation every 0.25 s
        r = run(["trainwatch", "run", "--web.listen-address", "none", "--eval-interval", "0.25", "--alertmanager",
                 am.url, "--", binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "80", "--log-interval", "5",
                 "--slow-reader", "100", "--lr-spike-at", "21"], timeout=120)
        assert r.returncode == 0, r.stderr
        fired = re.search(r"alert firing: \{alertname=\"TrainingLossNaN\"[^}]*\} value=(\d+)", r.stderr)
        assert fired, r.stderr
        streak = int(fired.group(1))
        assert 5 <= streak <= 6, f"fired after {streak} NaN step records"
        nan_steps = [int(m) for m in re.findall(r"global_step: (\d+), lr: [0-9.]+, loss: nan", r.stdout)]
        assert len(nan_steps) >= streak

        def notifications(status):
            return [a for req in hook.received("/am") for a in json.loads(req["body"])["alerts"]
                    if a["labels"]["alertname"] == "TrainingLossNaN" and a["status"] == status]

        firing = wait_until(lambda: notifications("firing"), timeout=10, what="the alert from Alertmanager")[0]
        assert firing["labels"]["run"] == "demo-train"
        assert f"for {streak} consecutive steps" in firing["annotations"]["summary"]
        # the run ended (exit 0): the rule no longer holds for it, and the last
        # evaluation resolved the alert
        assert re.search(r"alert resolved: \{alertname=\"TrainingLossNaN\"", r.stderr), r.stderr
        wait_until(lambda: notifications("resolved"), timeout=30,
                   what="the resolved notification; trainwatch said:\n" + r.stderr[-3000:])
    finally:
        hook.stop()


# ---- webhook formats, signatures, secrets --------------------------------------

def test_webhook_formats_and_signatures(tmp_path, procs):
    hook = WebhookReceiver()
    try:
        secret_file = tmp_path / "ding.secret"
        secret_file.write_text("SECdingtalk-secret-123\n")
        log = tmp_path / "train.log"
        append(log, [step_line(s, "2.0") for s in range(1, 3)])
        watch = procs(Watch, str(tmp_path), str(log),
                      "--webhook", hook.url + "/am",
                      "--webhook", "env:DING_URL", "--webhook-format", "dingtalk", "--webhook-secret-file", secret_file,
                      "--webhook", hook.url + "/slack", "--webhook-format", "slack",
                      "--webhook", hook.url + "/feishu", "--webhook-format", "feishu",
                      "--webhook-secret-env", "FEISHU_SECRET",
                      "--webhook", hook.url + "/wecom", "--webhook-format", "wecom",
                      env={"DING_URL": hook.url + "/ding?access_token=tok-abc", "FEISHU_SECRET": "feishu-s3cret"})
        append(log, [step_line(s, "nan") for s in range(3, 9)])
        paths = ["/am", "/ding", "/slack", "/feishu", "/wecom"]
        wait_until(lambda: all(hook.received(p) for p in paths), timeout=30, what="a firing message on every webhook")
        append(log, [step_line(s, "1.0") for s in range(9, 12)])
        wait_until(lambda: all(len(hook.received(p)) >= 2 for p in paths), timeout=30,
                   what="a resolved message on every webhook")

        am = [json.loads(r["body"]) for r in hook.received("/am")]
        assert [m["status"] for m in am] == ["firing", "resolved"]
        assert am[0]["version"] == "4" and am[0]["receiver"] == "trainwatch"
        assert am[0]["groupLabels"] == {"alertname": "TrainingLossNaN"}
        assert am[0]["commonLabels"]["run"] == "train" and am[0]["commonLabels"]["rank"] == "0"
        assert am[0]["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
        assert am[1]["alerts"][0]["endsAt"] > am[1]["alerts"][0]["startsAt"]
        assert re.fullmatch(r"[0-9a-f]{16}", am[0]["alerts"][0]["fingerprint"])

        for r in hook.received("/ding"):
            query = urllib.parse.parse_qs(urllib.parse.urlparse(r["path"]).query)
            assert query["access_token"] == ["tok-abc"]
            ts = query["timestamp"][0]
            assert abs(int(ts) / 1000 - time.time()) < 120
            want = base64.b64encode(hmac.new(b"SECdingtalk-secret-123", f"{ts}\nSECdingtalk-secret-123".encode(),
                                             hashlib.sha256).digest()).decode()
            assert query["sign"] == [want]
        ding = [json.loads(r["body"]) for r in hook.received("/ding")]
        assert ding[0]["msgtype"] == "markdown"
        assert ding[0]["markdown"]["title"] == "[FIRING] TrainingLossNaN"
        text = ding[0]["markdown"]["text"]
        assert "- run: train" in text and "- rank: 0" in text and "- host: " in text and "- value: " in text
        assert "consecutive steps" in text
        assert ding[1]["markdown"]["title"] == "[RESOLVED] TrainingLossNaN"

        slack = [json.loads(r["body"]) for r in hook.received("/slack")]
        assert slack[0]["text"].startswith("*[FIRING] TrainingLossNaN*")
        feishu = [json.loads(r["body"]) for r in hook.received("/feishu")]
        for m in feishu:
            key = f"{m['timestamp']}\nfeishu-s3cret".encode()
            assert m["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            assert m["msg_type"] == "text"
        assert "[FIRING] TrainingLossNaN" in feishu[0]["content"]["text"]
        wecom = [json.loads(r["body"]) for r in hook.received("/wecom")]
        assert wecom[0]["msgtype"] == "markdown" and "[RESOLVED]" in wecom[1]["markdown"]["content"]
        for r in hook.received("/"):
            assert r["headers"]["Content-Type"] == "application/json"

        # secrets and URL tokens are never printed
        watch.stop()
        err = watch.stderr()
        for secret in ("SECdingtalk-secret-123", "feishu-s3cret", "tok-abc"):
            assert secret not in err
    finally:
        hook.stop()


def test_receiver_down_then_failing_then_back(tmp_path, procs):
    port = free_port()
    log = tmp_path / "train.log"
    append(log, [step_line(s, "2.0") for s in range(1, 3)])
    watch = procs(Watch, str(tmp_path), str(log), "--webhook", f"http://127.0.0.1:{port}/hook?token=zzz")
    append(log, [step_line(s, "nan") for s in range(3, 9)])
    wait_until(lambda: "alert firing" in watch.stderr(), timeout=30, what="the alert to fire")
    err = wait_until(lambda: (lambda e: e if "notifying alertmanager-1" in e else None)(watch.stderr()),
                     timeout=30, what="the delivery failure to be logged")
    assert f"notifying alertmanager-1 (http://127.0.0.1:{port}) failed" in err
    assert "zzz" not in err and "/hook" not in err
    wait_until(lambda: re.search(r'trainwatch_notifications_errors_total\{receiver="alertmanager-1"\} [1-9]',
                                 watch.metrics()), timeout=30, what="the error counter")
    # the receiver comes up, answering 500 twice before it accepts
    hook = WebhookReceiver(port=port, fail_first=2)
    try:
        got = wait_until(lambda: hook.received("/hook"), timeout=90, what="the alert after the receiver came back")
        assert len(hook.received("/hook", answered=500)) == 2
        assert json.loads(got[0]["body"])["alerts"][0]["labels"]["alertname"] == "TrainingLossNaN"
        wait_until(lambda: "delivered again" in watch.stderr(), timeout=10, what="the recovery line")
        assert watch.proc.poll() is None
        assert re.search(r'trainwatch_notifications_sent_total\{receiver="alertmanager-1"\} 1', watch.metrics())
    finally:
        hook.stop()


class EchoingErrorReceiver:
    """Answers every POST with 403 and a body that echoes the request path
    (tokens included) and carries token, sign and key values, as real
    receivers' error answers do."""

    def __init__(self):
        import http.server
        import threading
        self.paths = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.paths.append(self.path)
                body = json.dumps({"detail": f"POST {self.path} refused", "error": "invalid_token",
                                   "access_token": "at-echoed-secret", "sign": "c2lnbmVkLWVjaG8=",
                                   "app_key": "k3y-echoed"}).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_receiver_errors_print_no_url_path_query_or_body_secret(tmp_path, procs):
    hook = EchoingErrorReceiver()
    base = f"http://127.0.0.1:{hook.port}"
    try:
        log = tmp_path / "train.log"
        append(log, [step_line(s, "2.0") for s in range(1, 3)])
        watch = procs(Watch, str(tmp_path), str(log),
                      "--webhook", base + "/services/T0AAAA/B0BBBB/SlackPathSecret42", "--webhook-format", "slack",
                      "--webhook", base + "/open-apis/bot/v2/hook/feishu-path-secret", "--webhook-format", "feishu",
                      "--webhook", "env:DING_URL", "--webhook-format", "dingtalk",
                      "--alertmanager", f"http://am-user:am-pass-word@127.0.0.1:{hook.port}",
                      env={"DING_URL": base + "/robot/send?access_token=ding-query-secret"})
        append(log, [step_line(s, "nan") for s in range(3, 9)])
        names = ["slack-1", "feishu-1", "dingtalk-1", "alertmanager-api-1"]
        err = wait_until(lambda: (lambda e: e if all(f"notifying {n} ({base}) failed: HTTP 403" in e for n in names)
                                  else None)(watch.stderr()), timeout=30, what="every receiver's failure line")
        assert len(hook.paths) >= 4  # the secrets below did reach the receiver
        watch.stop()
        err = watch.stderr()
        for secret in ("SlackPathSecret42", "T0AAAA", "feishu-path-secret", "ding-query-secret",
                       "am-user", "am-pass-word", "at-echoed-secret", "c2lnbmVkLWVjaG8", "k3y-echoed"):
            assert secret not in err, secret
        assert "invalid_token" in err  # what the receiver said is still there, redacted
    finally:
        hook.stop()
