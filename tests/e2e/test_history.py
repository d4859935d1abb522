"""The run history (docs/history.md): analyze, run and watch record every
run in one SQLite file; `trainwatch runs` lists and shows them and prunes
the file; `trainwatch compare` lays runs side by side. Checked through the
real binaries and, for what is stored, through Python's own sqlite3 reading
the same file; many writers at once; a corrupt, locked or newer file is one
line on stderr and the command's own result is unchanged."""
import json
import os
import re
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import BUILD, CORPUS, binary, run

HAPI = CORPUS / "paddle-hapi" / "hapi-mnist-lenet-fit-progressbar.txt"


def needs_corpus():
    if not CORPUS.exists():
        pytest.skip(f"the shared corpus is not at {CORPUS}")


def ppocr_log(path, steps=200, reader=0.01, batch=0.1, lr=0.1, env=()):
    """A PaddleOCR-style log: the environment lines given, then steps whose
    loss falls as 3/(1 + step*lr) plus a little noise that repeats."""
    lines = [f"{line}\n" for line in env]
    for s in range(1, steps + 1):
        loss = 3 / (1 + s * lr) + 0.01 * ((s * 7) % 5)
        lines.append(f"[2026/12/06 10:{s // 60 % 60:02d}:{s % 60:02d}] ppocr INFO: epoch: [1/1], global_step: {s}, "
                     f"lr: {lr:.6f}, loss: {loss:.5f}, avg_reader_cost: {reader:.5f} s, avg_batch_cost: {batch:.5f} s, "
                     f"avg_samples: 64.0, ips: {64 / batch:.1f} samples/s, eta: 0:00:10\n")
    path.write_text("".join(lines))
    return path


def runs_json(db, *args):
    r = run(["trainwatch", "runs", *(["--history", db] if db else []), "--json", *args])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_analyze_records_the_run_and_runs_lists_it(tmp_path):
    needs_corpus()
    db = tmp_path / "h" / "runs.db"
    r = run(["trainwatch", "analyze", "--json", "--history", db, HAPI])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    report = json.loads(r.stdout)
    listed = runs_json(db)
    assert listed["schema"] == "trainwatch.runs/1" and len(listed["runs"]) == 1
    e = listed["runs"][0]
    s = report["summary"]
    assert e["source"] == "analyze" and e["job"] == HAPI.name and e["inputs"] == str(HAPI)
    assert e["last_step"] == s["last_step"] and e["step_records"] == s["step_records"]
    assert e["final_loss"] == pytest.approx(s["final_loss"]) and e["health"] == report["health"]["score"]
    assert e["findings"] == len(report["findings"])
    # what the file holds, read with Python's sqlite3: WAL, schema 3, the series downsampled
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert c.execute("PRAGMA user_version").fetchone()[0] == 3
        series = dict(c.execute("SELECT metric, count FROM series WHERE run = ?", (e["id"],)).fetchall())
    assert 0 < series["loss"] <= 600 and "step_time" in series
    shown = runs_json(db, "show", str(e["id"]))["run"]
    loss = [s for s in shown["series"] if s["metric"] == "loss"][0]["points"]
    assert loss[-1][1] == pytest.approx(s["final_loss"]) and len(loss) == series["loss"]
    text = run(["trainwatch", "runs", "--history", db]).stdout
    assert re.search(rf"^{e['id']}\s+\d{{4}}-\d\d-\d\d \d\d:\d\d\s+{re.escape(HAPI.name[:28])}", text, re.M), text
    show = run(["trainwatch", "runs", "--history", db, "show", HAPI.name]).stdout
    assert f"run {e['id']}: {HAPI.name}" in show and "loss first/best/final" in show


def test_no_history_records_nothing_and_the_default_is_xdg_data_home(tmp_path):
    needs_corpus()
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"))
    r = run(["trainwatch", "analyze", "--no-history", HAPI], env=env)
    assert r.returncode == 0 and not (tmp_path / "data").exists()
    r = run(["trainwatch", "analyze", HAPI], env=env)
    assert r.returncode == 0 and (tmp_path / "data" / "trainwatch" / "runs.db").exists()
    r = run(["trainwatch", "runs", "--json"], env=env)
    assert len(json.loads(r.stdout)["runs"]) == 1


def test_sixteen_writers_at_once_lose_nothing(tmp_path):
    log = ppocr_log(tmp_path / "train.log", steps=2000)
    db = tmp_path / "runs.db"
    procs = [subprocess.Popen([binary("trainwatch"), "analyze", "--quiet", "--history", db, "--history-job",
                               f"job{i % 4}", log], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(16)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 16 and errors == [""] * 16, errors
    listed = runs_json(db)["runs"]
    assert len(listed) == 16 and len({e["id"] for e in listed}) == 16
    assert sorted(e["job"] for e in listed) == sorted(f"job{i % 4}" for i in range(16))
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("SELECT count(DISTINCT run) FROM series").fetchone()[0] == 16
    assert len(runs_json(db, "--job", "job2")["runs"]) == 4


def test_a_corrupt_history_is_one_line_and_the_analysis_goes_on(tmp_path):
    needs_corpus()
    db = tmp_path / "runs.db"
    db.write_bytes(b"this is not a database\n" * 200)
    before = db.read_bytes()
    plain = run(["trainwatch", "analyze", "--no-history", HAPI])
    r = run(["trainwatch", "analyze", "--history", db, HAPI])
    assert r.returncode == plain.returncode == 0 and r.stdout == plain.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and str(db) in lines[0] and "not recorded" in lines[0], r.stderr
    assert "not a database" in lines[0]
    assert db.read_bytes() == before  # nothing written over it
    r = run(["trainwatch", "runs", "--history", db])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "not a database" in r.stderr


def test_a_locked_history_waits_a_little_then_goes_on(tmp_path):
    needs_corpus()
    db = tmp_path / "runs.db"
    assert run(["trainwatch", "analyze", "--history", db, HAPI]).returncode == 0
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        start = time.monotonic()
        r = run(["trainwatch", "analyze", "--history", db, HAPI])
        took = time.monotonic() - start
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.returncode == 0 and "locked" in r.stderr and "not recorded" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1 and took < 60
    assert len(runs_json(db)["runs"]) == 1


def test_a_history_from_a_newer_trainwatch_is_refused_untouched(tmp_path):
    needs_corpus()
    db = tmp_path / "runs.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA user_version = 99")
    r = run(["trainwatch", "analyze", "--history", db, HAPI])
    assert r.returncode == 0 and "newer trainwatch (schema 99" in r.stderr, r.stderr
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 99
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] == 0


def test_prune_keeps_the_newest_and_drops_the_old(tmp_path):
    log = ppocr_log(tmp_path / "train.log", steps=50)
    db = tmp_path / "runs.db"
    for _ in range(5):
        assert run(["trainwatch", "analyze", "--history", db, log]).returncode == 0
    ids = [e["id"] for e in runs_json(db)["runs"]]
    r = run(["trainwatch", "runs", "--history", db, "prune", "--keep", "2"])
    assert r.returncode == 0 and r.stdout == "removed 3 runs\n", r.stdout
    assert [e["id"] for e in runs_json(db)["runs"]] == ids[:2]
    with sqlite3.connect(db) as c:  # their rows went with them
        assert c.execute("SELECT count(DISTINCT run) FROM series").fetchone()[0] == 2
        c.execute("UPDATE runs SET recorded = recorded - 40 * 86400 WHERE id = ?", (ids[1],))
    r = run(["trainwatch", "runs", "--history", db, "prune", "--older-than", "30d"])
    assert r.stdout == "removed 1 run\n" and [e["id"] for e in runs_json(db)["runs"]] == ids[:1]
    for bad, said in ((["prune"], "--keep N or --older-than"), (["prune", "--keep", "x"], "--keep takes"),
                      (["prune", "--older-than", "soon"], "--older-than takes"), (["show", "999"], "no run 999"),
                      (["frobnicate"], "unknown verb")):
        r = run(["trainwatch", "runs", "--history", db, *bad])
        assert r.returncode == 2 and said in r.stderr, (bad, r.stderr)


def demo(db, name, *args):
    r = run(["trainwatch", "run", "--history", db, "--web.listen-address", "none", "--run-name", name, "--",
             binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "600", "--log-interval", "5", *args],
            timeout=300)
    assert r.returncode == 0, r.stderr


def test_compare_two_recorded_runs_says_why_one_is_slower(tmp_path):
    """Two demo runs under `trainwatch run`, the second with a slow data
    loader: compare finds it slower per step and says the data wait rose."""
    db = tmp_path / "runs.db"
    demo(db, "quick", "--slow-reader", "1")
    demo(db, "starved", "--slow-reader", "30")  # a sleep: far beyond what load adds to a step
    listed = runs_json(db)["runs"]
    assert [e["name"] for e in listed] == ["starved", "quick"]
    assert {e["source"] for e in listed} == {"run"} and listed[0]["job"] == "demo-train"
    r = run(["trainwatch", "compare", "--history", db, "quick", "starved"])
    assert r.returncode == 0, r.stderr
    verdict = r.stdout.split("verdict:\n")[1]
    assert re.search(r"B is (\d+% |\d+\.\dx )slower per step .*: data wait rose from \d+% to \d+%", verdict), r.stdout
    j = json.loads(run(["trainwatch", "compare", "--history", db, "--json", "quick", "starved"]).stdout)
    assert j["schema"] == "trainwatch.compare/1" and [e["name"] for e in j["runs"]] == ["quick", "starved"]
    a, b = j["runs"]
    assert b["step_time_p50"] > 1.5 * a["step_time_p50"] and b["data_share"] > a["data_share"] + 0.1
    # the same seed and learning rate: the loss curves are one curve
    assert j["against_first"][0]["loss_overlap"] and not j["against_first"][0]["loss_parted"], j
    same = run(["trainwatch", "compare", "--history", db, "quick", "quick"]).stdout
    assert "B follows A within the runs' noise" in same and "same speed per step" in same, same


def test_compare_log_files_on_the_fly_finds_where_curves_part_and_what_changed(tmp_path):
    """Two logs read now (not recorded): the second has a larger learning
    rate (its loss falls faster from the start) and states fewer data
    workers; compare names both."""
    a = ppocr_log(tmp_path / "a.log", lr=0.01, reader=0.01, env=["PaddlePaddle: 2.5.2", "num_workers: 8"])
    b = ppocr_log(tmp_path / "b.log", lr=0.05, reader=0.06, env=["PaddlePaddle: 2.5.2", "num_workers: 2"])
    db = tmp_path / "runs.db"
    r = run(["trainwatch", "compare", "--history", db, a, b])
    assert r.returncode == 0, r.stderr
    assert not db.exists()  # log files are read, not recorded: the history was never opened
    out = r.stdout
    assert re.search(r"^  num_workers\s+8\s+2\s*$", out, re.M), out
    assert "PaddlePaddle" not in out.split("differ:")[1].split("verdict")[0]  # the same in both
    m = re.search(r"B parts from A at step (\d+)", out)
    assert m and int(m.group(1)) <= 20, out
    assert "num_workers 8 -> 2" in out and "data wait rose from 10% to 60%" in out, out


def test_compare_refuses_what_it_cannot_read(tmp_path):
    db = tmp_path / "runs.db"
    r = run(["trainwatch", "compare", "--history", db, "only-one"])
    assert r.returncode == 2 and "two to 8 runs" in r.stderr
    r = run(["trainwatch", "compare", "--history", db, "nosuchrun", "other"])
    assert r.returncode == 2 and "no run nosuchrun in the history" in r.stderr, r.stderr
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00\xff binary \x00\n" * 50)
    good = ppocr_log(tmp_path / "good.log", steps=20)
    r = run(["trainwatch", "compare", "--history", db, good, junk])
    assert r.returncode == 2 and str(junk) in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_watch_records_the_run_it_followed(tmp_path):
    log = ppocr_log(tmp_path / "train.log", steps=30)
    db = tmp_path / "runs.db"
    r = run(["trainwatch", "watch", "--history", db, "--from-start", "--duration", "1", "--web.listen-address",
             "none", log])
    assert r.returncode == 0, r.stderr
    (e,) = runs_json(db)["runs"]
    assert e["source"] == "watch" and e["name"] == "train" and e["last_step"] == 30
    assert e["ended"] - e["started"] == pytest.approx(1, abs=5)


def findings_of(report, rule):
    return [f for f in report["findings"] if f["rule"] == rule]


def test_baseline_names_a_run_slower_than_its_jobs_last_runs(tmp_path):
    """Three runs of the demo job, then one with a slow data loader: it is
    slower than the job's history, naming the runs it was compared with; a
    fourth normal run afterwards is not."""
    db = tmp_path / "runs.db"

    def demo_report(name, reader):
        out = tmp_path / f"{name}.json"
        r = run(["trainwatch", "run", "--history", db, "--web.listen-address", "none", "--run-name", name,
                 "--report", out, "--", binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "300",
                 "--log-interval", "5", "--slow-reader", str(reader), "--compute-ms", "30"], timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(out.read_text())

    # 10 ms of reading a batch and 30 ms of (sleeping) compute: a step of
    # about 40 ms that a loaded machine does not stretch by a quarter (at
    # 1 ms a busy CI machine made a normal run 33% slower than its history;
    # at 11 ms of reading alone, an ASan run beside a build made one 46%
    # slower); the starved run's 70 ms is 75% slower
    for i in range(3):
        first = demo_report(f"base{i}", 10)
        assert not findings_of(first, "slower_than_history")  # fewer than three before it: not judged
    slow = findings_of(demo_report("starved", 40), "slower_than_history")
    assert len(slow) == 1 and slow[0]["severity"] == "warning", slow
    ids = [str(e["id"]) for e in runs_json(db)["runs"] if e["name"].startswith("base")]
    assert "Slower than the last 3 runs of job demo-train" in slow[0]["title"]
    assert re.search(r"over runs \d+, \d+ and \d+", slow[0]["evidence"]) and all(i in slow[0]["evidence"] for i in ids)
    again = demo_report("base3", 10)
    assert not findings_of(again, "slower_than_history"), again["findings"]
    # the finding is recorded with the run
    shown = runs_json(db, "show", "starved")["run"]
    assert "slower_than_history" in [f["rule"] for f in shown["finding_list"]]


def test_live_baseline_gauges_and_the_slower_than_history_alert(tmp_path):
    """The baseline live (docs/alerts.md#trainingslowerthanhistory): a run
    with fewer than three runs of its job before it serves no baseline
    gauge; after three, a run whose data loader sleeps 40 ms a batch (the
    others 10 ms) serves the job's median step time, the runs it is from
    and its own step time over it, and TrainingSlowerThanHistory (its `for`
    taken out) fires on /alerts while it runs."""
    from servers import http, wait_until
    db = tmp_path / "runs.db"
    rules = tmp_path / "rules.yml"
    text = run(["trainwatch", "rules", "defaults"]).stdout
    waiting = "for: 5m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"Steps take"
    assert text.count(waiting) == 1
    rules.write_text(text.replace(waiting, waiting.replace("for: 5m\n        ", "")))  # no wait: fires at once

    def served(name, reader, steps):
        addr = tmp_path / f"{name}.addr"
        p = subprocess.Popen([binary("trainwatch"), "run", "--history", db, "--web.listen-address", "127.0.0.1:0",
                              "--web.address-file", addr, "--web.linger", "0", "--run-name", name,
                              "--no-default-rules", "--rules", rules, "--eval-interval", "1", "--",
                              binary("demo-train"), "--epochs", "1", "--steps-per-epoch", str(steps),
                              "--log-interval", "5", "--slow-reader", str(reader)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: addr.exists() and addr.read_text().strip(), what="the address file")
        return p, "http://" + addr.read_text().strip()

    def body_with(base, name):
        return wait_until(lambda: (lambda b: b if re.search(rf"^{name}\b", b, re.M) else None)(
            http(base + "/metrics")[2].decode()), timeout=60, what=name)

    for i in range(2):
        r = run(["trainwatch", "run", "--history", db, "--web.listen-address", "none", "--run-name", f"base{i}",
                 "--", binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "300", "--log-interval", "5",
                 "--slow-reader", "10"], timeout=300)
        assert r.returncode == 0, r.stderr
    # two runs before it: too few, no gauge, no alert, no error
    p, base = served("base2", 10, 300)
    body = body_with(base, "trainwatch_train_step")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "trainwatch_baseline" not in body and "trainwatch_step_time_vs_baseline" not in body, body
    assert "baseline" not in err, err
    # three before it: the baseline, and a starved run over it
    p, base = served("starved", 40, 3000)
    try:
        body = body_with(base, "trainwatch_step_time_vs_baseline")
        runs = re.search(r'^trainwatch_baseline_runs\{run="starved"\} (\S+)$', body, re.M)
        p50 = re.search(r'^trainwatch_baseline_step_seconds\{run="starved",stat="p50"\} (\S+)$', body, re.M)
        limit = re.search(r'^trainwatch_baseline_step_seconds\{run="starved",stat="limit"\} (\S+)$', body, re.M)
        assert runs and float(runs.group(1)) == 3, body
        # the median of the three runs' own p50s as the history kept them (not a time bound: load stretches steps)
        kept = sorted(e["step_time_p50"] for e in runs_json(db)["runs"] if e["name"] in ("base0", "base1", "base2"))
        assert p50 and len(kept) == 3 and abs(float(p50.group(1)) - kept[1]) <= 1e-9 * kept[1], (kept, body)
        assert limit and float(limit.group(1)) >= 1.25 * float(p50.group(1)), body
        ratio = re.search(r'^trainwatch_step_time_vs_baseline\{run="starved",rank="0"\} (\S+)$', body, re.M)
        assert ratio and float(ratio.group(1)) > 1, body

        def firing():
            page = json.loads(http(base + "/alerts?format=json")[2])
            return [a for r in page["rules"] for a in r.get("alerts", [])
                    if a["labels"]["alertname"] == "TrainingSlowerThanHistory" and a["state"] == "firing"]
        alert = wait_until(firing, timeout=60, what="TrainingSlowerThanHistory firing")[0]
        assert alert["labels"]["run"] == "starved" and float(alert["value"]) > 1.25, alert
    finally:
        p.terminate()
        p.communicate(timeout=60)
    # the exposition is one promtool accepts
    check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_baseline_names_a_loss_behind_its_jobs_last_runs(tmp_path):
    db = tmp_path / "runs.db"

    def analyzed(name, lr):
        log = ppocr_log(tmp_path / f"{name}.log", steps=300, lr=lr)
        r = run(["trainwatch", "analyze", "--json", "--history", db, "--history-job", "ocr", log])
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout)

    for i in range(3):
        assert not findings_of(analyzed(f"base{i}", 0.05), "loss_behind_history")
    behind = findings_of(analyzed("low-lr", 0.002), "loss_behind_history")
    assert len(behind) == 1 and "Loss behind the last 3 runs of job ocr" in behind[0]["title"], behind
    assert behind[0]["step"] == 300
    assert not findings_of(analyzed("base3", 0.05), "loss_behind_history")
    assert not findings_of(analyzed("better", 0.2), "loss_behind_history")  # ahead is not behind


def test_runs_and_compare_from_a_real_prometheus(tmp_path, procs):
    """At fleet scale (docs/history.md#from-a-prometheus): two runs under
    `trainwatch run`, found through --sd-file and scraped by a real
    Prometheus, listed by `runs --prometheus` and compared by `compare
    --prometheus` through its query and query_range APIs: the starved one
    is slower per step with more data wait, as the SQLite history says of
    the same runs; what Prometheus itself answers agrees."""
    from servers import Prometheus
    from test_fleet import Supervised, sd_job
    prom = procs(Prometheus, str(tmp_path), [sd_job(str(tmp_path / "node*.json"))])
    # Prometheus sees a run from its first scrape (file_sd refresh and the
    # scrape interval: a second or two in): both run long enough to share steps
    demos = {"quick": ["--steps-per-epoch", "3000", "--slow-reader", "6"],
             "starved": ["--steps-per-epoch", "1500", "--slow-reader", "20"]}
    # the starved run under the stand-in NVML with a price: its GPU time and money are series too
    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    priced = {"starved": (["--gpu-hour-cost", "3.6"], {"TW_NVML_LIBRARY": fake})}
    runs = {name: procs(Supervised, str(tmp_path), name, tmp_path / f"node{i}.json",
                        ["--epochs", "1", "--log-interval", "5", *args],
                        ["--history", tmp_path / "runs.db", *priced.get(name, ([], {}))[0]],
                        env=priced.get(name, ([], {}))[1])
            for i, (name, args) in enumerate(demos.items())}
    for name, p in runs.items():
        assert p.wait(timeout=180) == 0, p.stderr()
    from servers import wait_until
    wait_until(lambda: not prom.query("trainwatch_train_step"), what="Prometheus to see the runs' targets gone")
    url = prom.url
    listed = runs_json(None, "--prometheus", url)["runs"]
    by_name = {e["name"]: e for e in listed}
    assert set(by_name) == {"quick", "starved"}, listed
    for name, e in by_name.items():
        assert e["source"] == "prometheus" and e["job"] == "demo-train" and e["outcome"] == "ended", e
        top = prom.query(f'max(max_over_time(trainwatch_train_step{{run="{name}"}}[1h]))')
        assert e["last_step"] == int(float(top[0]["value"][1])), (e, top)
        assert e["duration_seconds"] > 3, e
    assert [e["name"] for e in runs_json(None, "--prometheus", url, "--job", "demo-train", "--limit", "1")["runs"]] \
        == [listed[0]["name"]]
    assert runs_json(None, "--prometheus", url, "--job", "other")["runs"] == []
    assert [e["name"] for e in runs_json(None, "--prometheus", url, "list", 'run=~"st.*"')["runs"]] == ["starved"]
    table = run(["trainwatch", "runs", "--prometheus", url]).stdout
    (BUILD / "test-artifacts").mkdir(exist_ok=True)
    (BUILD / "test-artifacts" / "runs-prometheus.txt").write_text(table)  # docs/history.md shows one
    assert re.search(r"^RUN\s+STARTED\s+JOB", table, re.M) and re.search(r"^starved\s", table, re.M), table
    out = run(["trainwatch", "compare", "--prometheus", url, 'run="quick"', '{run="starved"}'])
    assert out.returncode == 0, out.stderr
    verdict = out.stdout.split("verdict:\n")[1]
    assert re.search(r"B is (\d+% |\d+\.\dx )slower per step", verdict), out.stdout
    assert "B follows A within the runs' noise" in out.stdout or "B parts from A" in out.stdout, out.stdout
    j = json.loads(run(["trainwatch", "compare", "--prometheus", url, "--json", 'run="quick"',
                        'run="starved"']).stdout)
    a, b = j["runs"]
    assert b["step_time_p50"] > 1.5 * a["step_time_p50"] and b["data_share"] > a["data_share"], j
    assert a["gpu_seconds"] is None and a["cost"] is None, a  # no GPU counted: unknown, not 0
    assert b["gpu_seconds"] > 1 and b["gpus"] >= 1, b
    assert abs(b["cost"] - b["gpu_seconds"] / 3600 * 3.6) < 0.01, b
    # the SQLite history of the same two runs says the same
    local = json.loads(run(["trainwatch", "compare", "--history", tmp_path / "runs.db", "--json", "quick",
                            "starved"]).stdout)
    la, lb = local["runs"]
    assert (lb["step_time_p50"] > la["step_time_p50"]) == (b["step_time_p50"] > a["step_time_p50"])
    assert abs(lb["gpu_seconds"] - b["gpu_seconds"]) <= 2 * lb["gpus"], (lb, b)  # to the last scrape
    show = run(["trainwatch", "runs", "--prometheus", url, "show", 'run="starved"'])
    assert show.returncode == 0 and "series: loss" in show.stdout and "step_time" in show.stdout, show.stdout
    assert "gpu_util" in show.stdout, show.stdout  # DCGM_FI_DEV_GPU_UTIL of the stand-in NVML's GPUs


def test_prometheus_sources_that_cannot_answer_are_one_line(tmp_path, procs):
    from servers import Prometheus, free_port
    prom = procs(Prometheus, str(tmp_path), [])
    dead = f"http://127.0.0.1:{free_port()}"
    cases = [
        (["compare", "--prometheus", dead, 'run="a"', 'run="b"'], "127.0.0.1"),
        (["runs", "--prometheus", dead], "127.0.0.1"),
        (["compare", "--prometheus", prom.url, 'run="a"', 'run="b"'], 'no run {run="a"} with training steps'),
        (["compare", "--prometheus", prom.url, 'run=~"(', 'run="b"'], "bad_data"),
        (["compare", "--prometheus", prom.url, "{}", 'run="b"'], "not a label selector"),
        (["runs", "--prometheus", prom.url, "prune", "--keep", "1"], "own retention"),
    ]
    for args, said in cases:
        r = run(["trainwatch", *args])
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.splitlines()) == 1, (args, r.stderr)
    empty = run(["trainwatch", "runs", "--prometheus", prom.url])
    assert empty.returncode == 0 and "no runs with training steps" in empty.stdout, empty.stdout


def test_prometheus_header_reaches_the_server_and_credentials_stay_out_of_errors(tmp_path):
    """--prometheus-header (Mimir's X-Scope-OrgID) is sent with every
    query; a server answering something other than the API's JSON is one
    line that names it by its origin, without the URL's user:password."""
    from servers import WebhookReceiver
    fake = WebhookReceiver()  # answers {"errcode":0}: not the API's JSON
    try:
        url = fake.url.replace("http://", "http://alice:s3cret@") + "/prom"
        r = run(["trainwatch", "compare", "--prometheus", url, "--prometheus-header", "X-Scope-OrgID: team-a",
                 "--prometheus-header", "X-Extra: 1", 'run="a"', 'run="b"'])
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "s3cret" not in r.stderr and "alice" not in r.stderr and fake.url in r.stderr, r.stderr
        got = fake.received("/prom/api/v1/query")
        assert got and got[0]["headers"].get("X-Scope-OrgID") == "team-a" and got[0]["headers"].get("X-Extra") == "1"
        assert got[0]["body"].startswith(b"query=") and b"time=" in got[0]["body"], got[0]
    finally:
        fake.stop()
    bad = run(["trainwatch", "runs", "--prometheus", "http://127.0.0.1:1", "--prometheus-header", "no colon"])
    assert bad.returncode == 2 and "'Name: value'" in bad.stderr, bad.stderr
