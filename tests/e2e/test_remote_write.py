"""--remote-write URL: the metrics of `watch` and `run` sent to a real
Prometheus started with --web.enable-remote-write-receiver (remote-write
1.0: protobuf WriteRequest, snappy) and read back through its query API;
a receiver that is down then up gets what was queued meanwhile; a full
queue drops its oldest samples and counts them; 429/5xx are retried, other
4xx are not."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import binary
from servers import Prometheus, WebhookReceiver, free_port, http, wait_until


def step_line(step, loss):
    return (f"[2026/12/02 10:00:{step % 60:02d}] ppocr INFO: epoch: [1/1], global_step: {step}, lr: 0.100000, "
            f"loss: {loss}, acc: 0.5, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.10000 s, avg_samples: 128.0, "
            f"ips: 1280.0 samples/s, eta: 0:00:10, max_mem_reserved: 10 MB\n")


def append(path, lines):
    with open(path, "a") as f:
        f.writelines(lines)


def receiver(procs, tmp_path, port=None):
    return procs(Prometheus, str(tmp_path), [], extra_args=["--web.enable-remote-write-receiver"], port=port)


class Watch:
    """trainwatch watch --remote-write on one log file; /metrics on a free port."""

    def __init__(self, log, *extra):
        self.port = free_port()
        self.proc = subprocess.Popen([binary("trainwatch"), "watch", "--from-start", "--run-name", "train",
                                      "--web.listen-address", f"127.0.0.1:{self.port}", *extra, str(log)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: self.proc.poll() is not None or http(self.url() + "/-/healthy")[0] == 200,
                   what="trainwatch watch to serve")

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def metric(self, name):
        """{labels text: value} of one metric of the watcher's /metrics."""
        body = http(self.url() + "/metrics")[2].decode()
        return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", body, re.M)}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.communicate()


@pytest.fixture
def watches():
    started = []

    def start(*args):
        w = Watch(*args)
        started.append(w)
        return w
    yield start
    for w in started:
        w.stop()


def test_series_and_values_reach_prometheus(procs, watches, tmp_path):
    prom = receiver(procs, tmp_path)
    log = tmp_path / "train.log"
    append(log, [step_line(s, f"{3 - s / 10:.2f}") for s in range(1, 6)])
    w = watches(log, "--remote-write", prom.url + "/api/v1/write", "--remote-write-interval", "0.5")
    got = prom.wait_for('trainwatch_train_loss{run="train"} == 2.5', timeout=30)
    labels = got[0]["metric"]
    # the target labels a static scrape of this /metrics would give: job
    # trainwatch, the address served as instance; run and rank its own
    assert labels == {"__name__": "trainwatch_train_loss", "job": "trainwatch", "instance": f"127.0.0.1:{w.port}",
                      "run": "train", "rank": "0"}
    assert float(prom.wait_for('trainwatch_train_metric{run="train",name="acc"}')[0]["value"][1]) == 0.5
    # a series with no run of its own gets none added: a scrape would not add one
    build = prom.wait_for("trainwatch_build_info")[0]["metric"]
    assert build["instance"] == f"127.0.0.1:{w.port}" and "run" not in build and build["version"], build
    # histograms arrive as their _bucket, _sum and _count series
    assert float(prom.wait_for('trainwatch_step_duration_seconds_count{run="train"}')[0]["value"][1]) == 5
    # the last values are sent at the end, however short the interval left
    append(log, [step_line(6, "1.25")])
    wait_until(lambda: w.metric("trainwatch_train_loss").get('{run="train",rank="0"}') == 1.25, what="step 6")
    out, err = w.stop()
    assert w.proc.returncode == 0, err
    assert float(prom.query('last_over_time(trainwatch_train_loss{run="train"}[1m])')[0]["value"][1]) == 1.25
    assert "remote write" not in err  # it never failed


def test_not_served_the_series_get_host_run_and_rank(procs, tmp_path):
    """With no /metrics served nothing else names the run: the instance is
    this host and every series carries the run (and rank when set)."""
    prom = receiver(procs, tmp_path)
    r = subprocess.run([binary("trainwatch"), "run", "--run-name", "solo", "--web.listen-address",
                        "none", "--remote-write", prom.url + "/api/v1/write", "--remote-write-interval", "0.5", "--",
                        binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "20"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, RANK="3"))
    assert r.returncode == 0, r.stderr
    build = prom.wait_for('trainwatch_build_info{run="solo"}')[0]["metric"]
    assert {k: build[k] for k in ("job", "instance", "run", "rank")} == \
        {"job": "trainwatch", "instance": socket.gethostname(), "run": "solo", "rank": "3"}, build


def test_scraped_and_remote_written_series_have_the_same_labels(procs, tmp_path):
    """One run found through --sd-file and also remote-writing: a Prometheus
    that only scrapes it and one that only receives from it hold the same
    label sets, so one that does both holds each series once."""
    sd = tmp_path / "sd" / "node.json"
    sd.parent.mkdir()
    (tmp_path / "scrape").mkdir()
    (tmp_path / "receive").mkdir()
    scraper = procs(Prometheus, str(tmp_path / "scrape"), [{
        "job_name": "fleet", "honor_labels": True,
        "file_sd_configs": [{"files": [str(sd.parent / "*.json")], "refresh_interval": "1s"}]}])
    rw = receiver(procs, tmp_path / "receive")
    p = subprocess.Popen([binary("trainwatch"), "run", "--run-name", "both", "--web.listen-address", "127.0.0.1:0",
                          "--sd-file", sd, "--sd-job", "fleet", "--remote-write", rw.url + "/api/v1/write",
                          "--remote-write-interval", "0.5", "--web.linger", "0", "--", binary("demo-train"),
                          "--epochs", "1", "--steps-per-epoch", "6000", "--log-interval", "5",
                          "--slow-reader", "20"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def label_sets(prom):
            # the scrape (OpenMetrics) also stores each counter's _created
            # start time as a series; remote write sends no _created
            return sorted(tuple(sorted(s.items())) for s in prom.series('{__name__=~"trainwatch_.*",run="both"}')
                          if not s["__name__"].endswith("_created"))

        def settled():
            a, b = label_sets(scraper), label_sets(rw)
            return (a, b) if a and a == b else None
        # both fill as the run goes; once equal they stay equal
        try:
            scraped, received = wait_until(settled, timeout=30, what="the same series in both Prometheus servers")
        except AssertionError:
            a, b = set(label_sets(scraper)), set(label_sets(rw))
            raise AssertionError(f"only scraped: {sorted(a - b)[:5]}; only received: {sorted(b - a)[:5]}")
        assert any(dict(s)["__name__"] == "trainwatch_train_step" for s in scraped)
        one = dict([s for s in scraped if dict(s)["__name__"] == "trainwatch_train_step"][0])
        assert one["job"] == "fleet" and one["instance"].startswith("127.0.0.1:") and one["host"] == socket.gethostname()
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)


def queued(w):
    return sum(w.metric("trainwatch_remote_write_queue_samples").values())


def test_receiver_down_then_up_gets_what_was_queued(procs, watches, tmp_path):
    port = free_port()
    log = tmp_path / "train.log"
    append(log, [step_line(s, "2.0") for s in range(1, 4)])
    w = watches(log, "--remote-write", f"http://127.0.0.1:{port}/api/v1/write", "--remote-write-interval", "0.5")
    # nobody listens: samples wait in the queue, the batch is retried
    wait_until(lambda: queued(w) > 0 and sum(w.metric("trainwatch_remote_write_retries_total").values()) >= 2,
               timeout=30, what="retries while the receiver is down")
    down_since = time.time()
    time.sleep(1)
    append(log, [step_line(4, "1.5")])
    wait_until(lambda: w.metric("trainwatch_train_loss").get('{run="train",rank="0"}') == 1.5, what="step 4")
    time.sleep(1)
    prom = receiver(procs, tmp_path, port=port)
    up_since = time.time()
    # the queue drains into it: the values from while it was down are there, in order
    wait_until(lambda: queued(w) < 100 and sum(w.metric("trainwatch_remote_write_samples_total").values()) > 0,
               timeout=60, what="the queue to drain")
    # the batches go out one interval apart: the series is read once the
    # value logged while the receiver was down (1.5) has come in; a query
    # taken earlier read only the first batch (a CI run under load)
    def loss_series():
        matrix = prom.query('trainwatch_train_loss{run="train"}[10m]')
        return matrix if matrix and 1.5 in [float(v) for t, v in matrix[0]["values"]] else None

    matrix = wait_until(loss_series, timeout=30, what="the loss series with the value logged while it was down")
    values = matrix[0]["values"]
    before = [float(v) for t, v in values if t < up_since]
    assert before and min(t for t, v in values) < down_since
    assert before[0] == 2.0 and 1.5 in [float(v) for t, v in values]
    assert [t for t, v in values] == sorted(t for t, v in values)
    dropped = w.metric("trainwatch_remote_write_dropped_samples_total")
    assert sum(dropped.values()) == 0, dropped
    out, err = w.stop()
    assert "failed" in err and "works again" in err, err


def test_a_full_queue_drops_the_oldest_and_counts_them(watches, tmp_path):
    port = free_port()  # nobody listens
    log = tmp_path / "train.log"
    append(log, [step_line(s, "2.0") for s in range(1, 4)])
    w = watches(log, "--remote-write", f"http://127.0.0.1:{port}/api/v1/write", "--remote-write-interval", "0.25",
                "--remote-write-queue", "50")

    def full():
        d = w.metric("trainwatch_remote_write_dropped_samples_total")
        full = [v for k, v in d.items() if 'reason="queue_full"' in k]
        return queued(w) == 50 and full and full[0] > 0

    wait_until(full, timeout=30, what="a full queue dropping samples")
    # the end: what is still queued is dropped (counted) once the drain time is over, or sooner
    out, err = w.stop()
    assert w.proc.returncode == 0, err


def test_5xx_and_429_are_retried_4xx_is_not(watches, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken\n")
    log = tmp_path / "train.log"
    append(log, [step_line(s, "2.0") for s in range(1, 4)])
    flaky = WebhookReceiver(fail_first=2, fail_status=503)
    limited = WebhookReceiver(fail_first=1, fail_status=429)
    refusing = WebhookReceiver(fail_first=1000, fail_status=400)
    try:
        w = watches(log, "--remote-write", flaky.url + "/write", "--remote-write", limited.url + "/write",
                    "--remote-write", refusing.url + "/write", "--remote-write-interval", "60",
                    "--remote-write-bearer-token-file", token)
        out, err = w.stop()  # one collection at the end, drained
        assert w.proc.returncode == 0, err
        # the same batch, sent until taken
        assert [r["answered"] for r in flaky.requests] == [503, 503, 200]
        assert [r["answered"] for r in limited.requests] == [429, 200]
        assert len({r["body"] for r in flaky.requests}) == 1
        # a 400 is final: sent once, its samples dropped
        assert [r["answered"] for r in refusing.requests] == [400]
        first = flaky.requests[0]
        headers = {k.lower(): v for k, v in first["headers"].items()}
        assert headers["content-encoding"] == "snappy"
        assert headers["content-type"] == "application/x-protobuf"
        assert headers["x-prometheus-remote-write-version"] == "0.1.0"
        assert headers["authorization"] == "Bearer s3cr3t-t0ken"
        assert "s3cr3t" not in err
        assert err.count("refused a batch: HTTP 400") == 1
    finally:
        for r in (flaky, limited, refusing):
            r.stop()


@pytest.mark.parametrize("args, said", [
    (["--remote-write", "ftp://x/write"], "ftp://x: not an http:// or https:// URL"),
    (["--remote-write", "http://127.0.0.1:1/w", "--remote-write-bearer-token-file", "/no/such/token"],
     "/no/such/token: No such file or directory"),
    (["--remote-write", "http://127.0.0.1:1/w", "--remote-write-queue", "0"], "--remote-write-queue must be"),
])
def test_bad_remote_write_options_stop_before_starting(tmp_path, args, said):
    marker = tmp_path / "started"
    r = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "none", *args, "--", "touch", marker],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert said in r.stderr
    assert not marker.exists()
