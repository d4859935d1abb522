"""trainwatch in a fleet, against real components on 127.0.0.1: runs found
through the file_sd files they write (--sd-file), the printed scrape configs
(promtool and a real Prometheus), the Grafana dashboard's queries, the
runbook links, and a simulated fleet of 16 supervised demo runs on four
"nodes" whose alerts reach one Alertmanager once each, from trainwatch and
from a Prometheus loading the exported rules alike."""
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

import pytest

from conftest import SOURCE, binary, run
from servers import Alertmanager, Process, Prometheus, WebhookReceiver, free_port, http, wait_until


def name_option():
    """The option naming a run: --run-name where this trainwatch has it
    (issue 17's run label), else --job (the label before it)."""
    return "--run-name" if "--run-name" in run(["trainwatch", "run", "--help"]).stdout else "--job"


class Supervised(Process):
    """trainwatch run on the demo trainer, on a free port, its target in sd."""

    def __init__(self, workdir, name, sd, demo_args, extra=(), env=None):
        args = [binary("trainwatch"), "run", name_option(), name, "--web.listen-address", "127.0.0.1:0",
                "--sd-file", sd, *extra, "--", binary("demo-train"), "--batch", "16", *demo_args]
        old = dict(os.environ)
        os.environ.update(env or {})
        try:
            super().__init__(args, workdir, f"run-{name}")
        finally:
            os.environ.clear()
            os.environ.update(old)
        found = wait_until(lambda: re.search(r"serving /metrics on (127\.0\.0\.1:\d+)", self.stderr()),
                           what=f"run {name} to serve")
        self.target = found.group(1)
        self.url = "http://" + self.target

    def page(self):
        status, headers, body = http(self.url + "/alerts?format=json")
        assert status == 200 and headers["Content-Type"] == "application/json", (status, body)
        return json.loads(body)

    def wait(self, timeout=60):
        rc = self.proc.wait(timeout=timeout)
        self.err.flush()
        return rc


def entries(path):
    """The target groups of an sd file, parsed as Prometheus would."""
    return json.loads(path.read_text()) if path.exists() else []


def sd_job(sd_glob, name="trainwatch"):
    """The file_sd scrape job trainwatch prometheus-config prints, as JSON."""
    text = run(["trainwatch", "prometheus-config", "file-sd", "--sd-files", sd_glob, "--job", name]).stdout
    assert "honor_labels: true" in text and sd_glob in text, text
    return {"job_name": name, "honor_labels": True,
            "file_sd_configs": [{"files": [sd_glob], "refresh_interval": "1s"}]}


# ---- --sd-file ------------------------------------------------------------------

def test_sd_file_runs_are_discovered_scraped_and_removed(tmp_path, procs):
    sd = tmp_path / "node1.json"
    prom = procs(Prometheus, str(tmp_path), [sd_job(str(tmp_path / "*.json"))])
    long_demo = ["--epochs", "1", "--steps-per-epoch", "4000", "--log-interval", "5", "--slow-reader", "20"]
    a = procs(Supervised, str(tmp_path), "alpha", sd, long_demo)
    b = procs(Supervised, str(tmp_path), "beta", sd, long_demo)
    groups = entries(sd)
    assert sorted(g["targets"][0] for g in groups) == sorted([a.target, b.target])
    for g in groups:
        assert {"run", "rank", "host"} <= set(g["labels"]), g
    # Prometheus picks both up with no change to its configuration
    up = prom.wait_for('up{job="trainwatch"} == 1', count=2, timeout=30)
    assert {s["metric"]["run"] for s in up} == {"alpha", "beta"}
    step = prom.wait_for('trainwatch_train_step{run="beta"}', timeout=30)[0]["metric"]
    assert step["instance"] == b.target and step["rank"] == "0" and step["host"]
    assert not [k for k in step if k.startswith("exported_")], step
    # a run killed outright leaves its entry; the next writer drops it
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(timeout=10)
    assert a.target in [g["targets"][0] for g in entries(sd)]
    c = procs(Supervised, str(tmp_path), "gamma", sd, long_demo)
    assert sorted(g["targets"][0] for g in entries(sd)) == sorted([b.target, c.target])
    # a run that ends removes its own entry, and Prometheus drops the target
    b.stop()
    assert [g["targets"][0] for g in entries(sd)] == [c.target]
    wait_until(lambda: not prom.query('up{run="beta"}'), timeout=30, what="beta's target to leave Prometheus")
    c.stop()
    assert entries(sd) == []


def test_sd_file_writers_started_at_once_lose_no_entry(tmp_path):
    """Eight runs started together on one file: the lock serializes their
    rewrites, so every target is there, and gone once they end."""
    sd = tmp_path / "node.json"
    procs_ = [subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--sd-file", sd,
                                "--web.linger", "0", "--", "sleep", "3"], stderr=subprocess.PIPE, text=True) for _ in range(8)]
    wait_until(lambda: len(entries(sd)) == 8, timeout=30, what="eight entries")
    assert len({g["targets"][0] for g in entries(sd)}) == 8
    assert {g["labels"]["__meta_trainwatch_pid"] for g in entries(sd)} == {str(p.pid) for p in procs_}
    for p in procs_:
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert entries(sd) == []
    assert not list(tmp_path.glob("node.json.tmp.*"))


def test_sd_file_in_another_shape_is_refused_before_the_command(tmp_path):
    sd = tmp_path / "hand.json"
    sd.write_text('[\n  {\n    "targets": ["x:1"]\n  }\n]\n')
    r = run(["trainwatch", "run", "--web.listen-address", "127.0.0.1:0", "--sd-file", sd, "--", "touch",
             tmp_path / "started"])
    assert r.returncode == 2, r.stderr
    assert re.search(r"--sd-file .*hand\.json:2: not a file trainwatch wrote", r.stderr), r.stderr
    assert not (tmp_path / "started").exists()
    assert sd.read_text().startswith('[\n  {\n')  # left as it was
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--sd-file", sd, "--", "true"])
    assert r.returncode == 2 and "--sd-file needs /metrics served" in r.stderr, r.stderr


# ---- printed configurations -------------------------------------------------------

def promtool_has_kubernetes(tmp_path):
    probe = tmp_path / "probe.yml"
    probe.write_text("scrape_configs:\n  - job_name: k\n    kubernetes_sd_configs:\n      - role: pod\n")
    return subprocess.run(["promtool", "check", "config", str(probe)], capture_output=True).returncode == 0


@pytest.mark.parametrize("kind", ["static", "file-sd", "kubernetes"])
def test_printed_scrape_configs_pass_promtool(tmp_path, kind):
    rules = tmp_path / "trainwatch-rules.yml"
    assert run(["trainwatch", "rules", "export", "-o", rules]).returncode == 0
    args = ["trainwatch", "prometheus-config", kind, "--rules", rules, "--alertmanager", "127.0.0.1:9093"]
    if kind == "static":
        args += ["--target", "node1:9464", "--target", "node2:9464"]
    text = run(args).stdout
    config = tmp_path / "prometheus.yml"
    config.write_text(text)
    if kind == "kubernetes" and not promtool_has_kubernetes(tmp_path):
        # Debian's Prometheus is built without Kubernetes discovery: check the
        # rest of the job (its relabeling) on a static job instead, and say so
        text = text.replace("    kubernetes_sd_configs:\n      - role: pod\n",
                            "    static_configs:\n      - targets: [\"a:1\"]\n")
        config.write_text(text)
        print("promtool here has no kubernetes_sd_configs: checked the relabeling on a static job")
    check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 11 rules found" in check.stdout
    assert "rule_files:" in text and str(rules) in text


def test_prometheus_config_bad_usage(tmp_path):
    r = run(["trainwatch", "prometheus-config", "consul"])
    assert r.returncode == 2 and "'consul': expected one of static, file-sd, kubernetes" in r.stderr
    r = run(["trainwatch", "prometheus-config", "file-sd", "--target", "a:1"])
    assert r.returncode == 2 and "--target is for static" in r.stderr


# ---- Grafana ------------------------------------------------------------------------

def dashboard():
    r = run(["trainwatch", "grafana"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_dashboard_has_grafanas_schema_fields():
    d = dashboard()
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 39
    assert d["title"] and d["uid"] and isinstance(d["panels"], list) and d["panels"]
    names = [v["name"] for v in d["templating"]["list"]]
    assert names == ["datasource", "run", "rank", "instance"]
    assert d["templating"]["list"][0]["type"] == "datasource" and d["templating"]["list"][0]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(set(ids)) == len(ids)
    for p in d["panels"]:
        assert p["type"] and p["title"] and set(p["gridPos"]) == {"h", "w", "x", "y"}
        assert p["datasource"]["uid"] == "${datasource}"
        assert p["targets"] and all(t["refId"] and t["expr"] for t in p["targets"])
        for t in p["targets"]:
            assert all(f'{v}=~"${v}"' in t["expr"] for v in ("run", "rank", "instance")), t["expr"]
    titles = " ".join(p["title"] for p in d["panels"]).lower()
    for word in ("loss", "learning rate", "step time", "throughput", "data-wait", "memory", "gpu utilization",
                 "gpu memory", "gpu power", "health"):
        assert word in titles, word
    alerts = [a for a in d["annotations"]["list"] if a.get("expr")]
    assert alerts and "ALERTS" in alerts[0]["expr"]


def grafana_expr(expr):
    """A panel query as Grafana sends it with every variable at All."""
    for name in ("run", "rank", "instance"):
        expr = expr.replace(f"${name}", ".*")
    return expr.replace("$__rate_interval", "1m")


def test_every_dashboard_query_returns_data_from_a_real_prometheus(tmp_path, procs):
    """A demo run (under the fake NVML: two GPUs) found through file_sd by a
    Prometheus started with the printed prometheus.yml and the exported rules;
    its learning-rate fault makes TrainingLossNaN fire, so the alert
    annotation has data too. Every panel query and variable then answers."""
    rules = tmp_path / "trainwatch-rules.yml"
    assert run(["trainwatch", "rules", "export", "-o", rules]).returncode == 0
    sd = tmp_path / "sd" / "node.json"
    sd.parent.mkdir()
    text = run(["trainwatch", "prometheus-config", "file-sd", "--sd-files", str(sd.parent / "*.json"), "--rules",
                rules, "--interval", "1s"]).stdout
    (tmp_path / "prometheus.yml").write_text(text.replace("refresh_interval: 1m", "refresh_interval: 1s"))
    port = free_port()
    prom = procs(Process, ["prometheus", f"--config.file={tmp_path}/prometheus.yml",
                           f"--storage.tsdb.path={tmp_path}/tsdb", f"--web.listen-address=127.0.0.1:{port}",
                           "--log.level=warn"], str(tmp_path), "prometheus")
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http(url + "/-/ready")[0] == 200, what="Prometheus to be ready")

    def query(q):
        status, _, body = http(url + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        data = json.loads(body)
        assert status == 200 and data["status"] == "success", (q, data)
        return data["data"]["result"]

    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    demo = procs(Supervised, str(tmp_path), "dash", sd,
                 ["--epochs", "1", "--steps-per-epoch", "3000", "--log-interval", "5", "--slow-reader", "20",
                  "--lr-spike-at", "150"], env={"TW_NVML_LIBRARY": fake})
    wait_until(lambda: query('ALERTS{alertstate="firing", alertname="TrainingLossNaN"}'), timeout=60,
               what="Prometheus to fire TrainingLossNaN on the demo")
    d = dashboard()
    metrics = http(demo.url + "/metrics")[2].decode()
    for p in d["panels"]:
        for t in p["targets"]:
            if "trainwatch_health_score" in t["expr"] and "trainwatch_health_score" not in metrics:
                print(f"panel {p['title']}: this trainwatch exports no trainwatch_health_score; its query ran empty")
                assert query(grafana_expr(t["expr"])) == []
                continue
            result = wait_until(lambda: query(grafana_expr(t["expr"])), timeout=20,
                                what=f"data for panel {p['title']}: {t['expr']}")
            assert all(s["metric"].get("run") == "dash" for s in result), result
    for a in d["annotations"]["list"]:
        if a.get("expr"):
            assert query(grafana_expr(a["expr"])), a["expr"]
    for v in d["templating"]["list"][1:]:
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", v["query"]["query"])
        series = http(url + "/api/v1/series?" + urllib.parse.urlencode(
            {"match[]": grafana_expr(m.group(1))}))[2]
        values = {s[m.group(2)] for s in json.loads(series)["data"] if m.group(2) in s}
        assert values, v["name"]
    demo.stop()


# ---- runbooks ---------------------------------------------------------------------------

def github_anchor(heading):
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def test_every_runbook_url_leads_to_a_docs_section():
    text = run(["trainwatch", "rules", "defaults"]).stdout
    links = re.findall(r'runbook_url: "([^"#]+)#([^"]+)"', text)
    alerts = re.findall(r"- alert: (\w+)", text)
    assert len(links) == len(alerts) == 11
    for path, anchor in links:
        page = SOURCE / path
        headings = {github_anchor(h) for h in re.findall(r"^#+ (.*)$", page.read_text(), re.M)}
        assert anchor in headings, (path, anchor)


# ---- the fleet ------------------------------------------------------------------------------

def fleet_rules(tmp_path):
    """The built-in rules with the no-progress floor cut from 60 s to 5 s (the
    only change), exported for Prometheus and given to trainwatch alike."""
    text = run(["trainwatch", "rules", "defaults"]).stdout
    assert text.count(", 60)") == 1 and text.count("+ 60)") == 1
    fast = tmp_path / "fleet-defaults.yml"
    fast.write_text(text.replace(", 60)", ", 5)").replace("+ 60)", "+ 5)"))
    exported = tmp_path / "exported.yml"
    r = run(["trainwatch", "rules", "export", "--no-default-rules", "--rules", fast, "-o", exported])
    assert r.returncode == 0, r.stderr
    return fast, exported


def notified(hook):
    """{(alertname, run): set of statuses} from Alertmanager's notifications."""
    out = {}
    for r in hook.received("/am"):
        for a in json.loads(r["body"])["alerts"]:
            out.setdefault((a["labels"]["alertname"], a["labels"].get("run")), set()).add(a["status"])
    return out


def test_fleet_alerts_arrive_once_and_resolve_when_runs_end(tmp_path, procs):
    """16 runs on 4 nodes (one sd file each): 14 train and finish cleanly, one
    stalls, one's loss turns NaN. trainwatch's own alerts and Prometheus's
    (the same exported rules, external label cluster=fleet on both) reach one
    Alertmanager as one alert each, with the same labels; they resolve when
    the run ends; nothing fires for the others. Every run also remote-writes
    to the same Prometheus: its series carry the labels the scrape gives, so
    each run's series and each alert are there once, not twice."""
    hook = WebhookReceiver()
    try:
        fast, exported = fleet_rules(tmp_path)
        am = procs(Alertmanager, str(tmp_path), webhook=hook.url + "/am")
        prom = procs(Prometheus, str(tmp_path), [sd_job(str(tmp_path / "node*.json"))], rule_files=[exported],
                     alertmanager=am.url, external_labels={"cluster": "fleet"},
                     extra_args=["--web.enable-remote-write-receiver"])
        common = ["--no-default-rules", "--rules", fast, "--eval-interval", "1", "--alertmanager", am.url,
                  "--external-label", "cluster=fleet", "--sd-job", "trainwatch",
                  "--remote-write", prom.url + "/api/v1/write", "--remote-write-interval", "1"]
        steady = ["--epochs", "1", "--log-interval", "5", "--slow-reader", "20"]
        runs = {}
        for i in range(16):
            name = {0: "stall", 1: "nan"}.get(i, f"clean{i:02d}")
            demo = steady + {"stall": ["--steps-per-epoch", "6000", "--stall-at", "100", "--stall-seconds", "600"],
                             "nan": ["--steps-per-epoch", "6000", "--lr-spike-at", "100"]}.get(
                                 name, ["--steps-per-epoch", "400"])
            runs[name] = procs(Supervised, str(tmp_path), name, tmp_path / f"node{i % 4}.json", demo, common)
        # every run is discovered and scraped through its node's file
        wait_until(lambda: len(prom.query("count by (run) (last_over_time(trainwatch_train_step[10m]))")) == 16,
                   timeout=60, what="Prometheus to scrape all 16 runs")
        expected = {("TrainingNoProgress", "stall"), ("TrainingLossNaN", "nan")}

        def both_firing():
            am_alerts = [a for a in am.alerts() if (a["labels"]["alertname"], a["labels"].get("run")) in expected]
            prom_alerts = [a for a in prom.alerts() if a["state"] == "firing"
                           and (a["labels"]["alertname"], a["labels"].get("run")) in expected]
            ours = [a for r in ("stall", "nan") for rule in runs[r].page()["rules"] for a in rule.get("alerts", [])
                    if a["state"] == "firing"]
            return (am_alerts, prom_alerts, ours) if len(prom_alerts) == 2 and len(ours) == 2 else None

        am_alerts, prom_alerts, ours = wait_until(both_firing, timeout=90, what="both alerts firing in both")
        # scraped and remote-written, each run's step is one series
        steps = prom.query("count by (run) (trainwatch_train_step)")
        assert len(steps) == 16 and all(s["value"][1] == "1" for s in steps), steps
        written = http(runs["nan"].url + "/metrics")[2].decode()
        assert re.search(r"trainwatch_remote_write_samples_total\{[^}]*\} [1-9]", written), "nothing remote-written"
        time.sleep(3)  # both have sent (Prometheus every evaluation, trainwatch as it fired)
        am_alerts = [a for a in am.alerts() if (a["labels"]["alertname"], a["labels"].get("run")) in expected]
        # one alert each in Alertmanager, with the labels both senders give it
        assert sorted((a["labels"]["alertname"], a["labels"]["run"]) for a in am_alerts) == sorted(expected), am_alerts
        for a in am_alerts:
            key = (a["labels"]["alertname"], a["labels"]["run"])
            theirs = [p for p in prom_alerts if (p["labels"]["alertname"], p["labels"]["run"]) == key][0]
            mine = [o for o in ours if (o["labels"]["alertname"], o["labels"]["run"]) == key][0]
            assert a["labels"] == dict(theirs["labels"], cluster="fleet"), (a["labels"], theirs["labels"])
            assert a["labels"] == dict(mine["labels"], cluster="fleet"), (a["labels"], mine["labels"])
        assert "alert firing" in runs["stall"].stderr() and "alert firing" in runs["nan"].stderr()
        sent = http(prom.url + "/metrics")[2].decode()
        assert re.search(r"prometheus_notifications_sent_total\{[^}]*\} [1-9]", sent), "Prometheus sent nothing"
        # trainwatch's generatorURL is its /alerts page
        nan_alert = [a for a in am_alerts if a["labels"]["run"] == "nan"][0]
        assert nan_alert["generatorURL"] == runs["nan"].url + "/alerts" or "/graph?g0.expr=" in nan_alert["generatorURL"]
        assert b"TrainingLossNaN" in http(runs["nan"].url + "/alerts")[2]
        # the clean runs end by themselves, cleanly
        for name, r in runs.items():
            if name.startswith("clean"):
                assert r.wait(timeout=120) == 0, r.stderr()
        # the two runs are stopped: their alerts resolve
        runs["stall"].stop()
        runs["nan"].stop()
        wait_until(lambda: not [a for a in am.alerts() if (a["labels"]["alertname"], a["labels"].get("run"))
                                in expected], timeout=60, what="both alerts to resolve in Alertmanager")
        wait_until(lambda: all("resolved" in notified(hook).get(k, set()) for k in expected), timeout=60,
                   what="Alertmanager's resolved notifications")
        # nothing fired for a run that finished cleanly, in trainwatch or in Prometheus
        assert set(notified(hook)) == expected, notified(hook)
        for name, r in runs.items():
            if name.startswith("clean"):
                assert "alert firing" not in r.stderr(), r.stderr()
        fired = prom.query('count by (alertname, run) (last_over_time(ALERTS{alertstate="firing"}[10m]))')
        assert {(s["metric"]["alertname"], s["metric"]["run"]) for s in fired} == expected, fired
        assert all(s["value"][1] == "1" for s in fired), fired  # once each, not once per path
        assert all(entries(tmp_path / f"node{i}.json") == [] for i in range(4))
    finally:
        hook.stop()


def fired_by_trainwatch(r):
    """The alert names a run's trainwatch said it fired."""
    return set(re.findall(r'alert firing: \{alertname="(\w+)"', r.stderr()))


def fired_by_prometheus(prom, run_name):
    fired = prom.query(f'count by (alertname) (last_over_time(ALERTS{{alertstate="firing",run="{run_name}"}}[10m]))')
    return {s["metric"]["alertname"] for s in fired}


def test_prometheus_fires_the_same_alerts_on_the_same_data_nan_stall_crash(tmp_path, procs):
    """docs/alerts.md: a Prometheus that scrapes the runs (found through
    --sd-file) and loads the exported rules fires what trainwatch fires. A
    crash is the hard case: the command exits at once, and only because
    trainwatch keeps serving /metrics after the end (--web.linger, two scrape
    intervals by default here) does Prometheus scrape the exception and fire
    TrainingFailed."""
    fast, exported = fleet_rules(tmp_path)
    prom = procs(Prometheus, str(tmp_path), [sd_job(str(tmp_path / "node*.json"))], rule_files=[exported])
    common = ["--no-default-rules", "--rules", fast, "--eval-interval", "1"]
    steady = ["--epochs", "1", "--log-interval", "5", "--slow-reader", "20"]
    demos = {"crash": ["--steps-per-epoch", "2000", "--crash-at", "300"],
             "nan": ["--steps-per-epoch", "6000", "--lr-spike-at", "100"],
             "stall": ["--steps-per-epoch", "6000", "--stall-at", "100", "--stall-seconds", "600"]}
    runs = {name: procs(Supervised, str(tmp_path), name, tmp_path / f"node{i}.json", steady + demos[name], common)
            for i, name in enumerate(demos)}
    expected = {"crash": {"TrainingFailed"}, "nan": {"TrainingLossNaN"}, "stall": {"TrainingNoProgress"}}
    # the crash ends the command; trainwatch exits with its status
    assert runs["crash"].wait(timeout=90) == 1, runs["crash"].stderr()
    for name in ("nan", "stall"):
        wait_until(lambda: expected[name] <= fired_by_trainwatch(runs[name]), timeout=90,
                   what=f"trainwatch to fire {expected[name]} for {name}")
    for name in demos:
        wait_until(lambda: expected[name] <= fired_by_prometheus(prom, name), timeout=60,
                   what=f"Prometheus to fire {expected[name]} for {name} (it fired "
                        f"{fired_by_prometheus(prom, name)})")
    runs["nan"].stop()
    runs["stall"].stop()
    time.sleep(2)  # the evaluations of the runs' last scrapes
    for name in demos:
        assert fired_by_trainwatch(runs[name]) == expected[name], (name, runs[name].stderr())
        assert fired_by_prometheus(prom, name) == fired_by_trainwatch(runs[name]), name
    assert "for a last scrape (--web.linger)" in runs["crash"].stderr(), runs["crash"].stderr()
    assert all(entries(tmp_path / f"node{i}.json") == [] for i in range(3))


def test_linger_ends_after_the_next_scrape_or_its_limit(tmp_path):
    """--web.linger: a run nobody scrapes and with no --sd-file exits at
    once; told to linger, it serves until a scrape after the end and then
    exits without waiting out the limit; a signal ends the wait."""
    demo = [binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "20"]
    start = time.monotonic()
    r = run(["trainwatch", "run", "--web.listen-address", "127.0.0.1:0", "--", *demo])
    assert r.returncode == 0 and "--web.linger" not in r.stderr, r.stderr
    assert time.monotonic() - start < 20
    addr = tmp_path / "addr"
    p = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--web.address-file",
                          addr, "--web.linger", "2m", "--", *demo], stderr=subprocess.PIPE, text=True)
    wait_until(lambda: addr.exists() and addr.read_text().strip(), timeout=30, what="the address file")
    url = "http://" + addr.read_text().strip() + "/metrics"
    wait_until(lambda: b'event="exit"' in http(url)[2], timeout=30, what="the command's exit in /metrics")
    assert p.poll() is None  # still serving after the command ended
    t0 = time.monotonic()
    body = http(url)[2].decode()  # a scrape after the end: the wait ends once its interval has passed
    assert re.search(r'trainwatch_log_events_total\{[^}]*event="exit"[^}]*\} 1', body), body
    # the exit can reach /metrics a moment before the wait begins (a slow,
    # sanitized build): as a Prometheus would, scrape again now and then
    while p.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(1)
        try:
            http(url, timeout=2)
        except OSError:
            pass  # it has just stopped serving
    _, err = p.communicate(timeout=10)
    assert p.returncode == 0 and "up to 120 s more, for a last scrape" in err, err
    assert time.monotonic() - t0 < 60
    # a signal ends the wait at once
    p = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--web.linger", "10m",
                          "--", *demo], stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # the 20 steps are done well before
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0 and "stopped serving /metrics on a signal" in err, err


@pytest.mark.parametrize("value", ["soon", "-3s", "1x"])
def test_linger_refuses_a_bad_duration(value):
    r = run(["trainwatch", "run", "--web.linger", value, "--", "true"])
    assert r.returncode == 2 and f"--web.linger must be a duration (30s, 2m, 0) or auto, not '{value}'" in r.stderr, \
        r.stderr


# ---- Kubernetes examples ------------------------------------------------------------------

def test_kubernetes_sidecar_runs_as_written_and_the_podmonitor_selects_it(tmp_path):
    import yaml
    pod = yaml.safe_load((SOURCE / "examples" / "kubernetes" / "training-pod.yaml").read_text())
    monitor = yaml.safe_load((SOURCE / "examples" / "kubernetes" / "podmonitor.yaml").read_text())
    sidecar = [c for c in pod["spec"]["containers"] if c["name"] == "trainwatch"][0]
    # the PodMonitor's selector and port name the sidecar's
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in [p["name"] for p in sidecar["ports"]]
    port = str(sidecar["ports"][0]["containerPort"])
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == port
    # the sidecar's arguments, run here on a log in the shared volume's place
    (tmp_path / "train.log").write_text("".join(
        f"[2026/12/02 18:22:15] ppocr INFO: epoch: [1/1], global_step: {s}, lr: 0.100000, loss: 2.5, "
        f"avg_reader_cost: 0.01 s, avg_batch_cost: 0.02 s, ips: 100.0 samples/s\n" for s in range(1, 6)))
    args = [a.replace("/logs", str(tmp_path)).replace(":" + port, "127.0.0.1:0") for a in sidecar["args"]]
    args = [str(tmp_path / "train.log") if a.endswith("*.log") else a for a in args]
    r = run(["trainwatch", *args, "--duration", "1"])
    assert r.returncode == 0, r.stderr
    assert "5 lines from 1 files" in r.stderr and "serving /metrics on 127.0.0.1:" in r.stderr
    assert "step 1 -> 5" in r.stdout, r.stdout


@pytest.mark.parametrize("value", ["cluster", "9x=1", "a-b=1", "=v", "cluster="])
def test_external_label_must_be_name_value(tmp_path, value):
    r = run(["trainwatch", "run", "--web.listen-address", "none", "--external-label", value, "--", "touch",
             tmp_path / "started"])
    assert r.returncode == 2 and f"--external-label '{value}': expected NAME=VALUE" in r.stderr, r.stderr
    assert not (tmp_path / "started").exists()
