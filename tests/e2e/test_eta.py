"""trainwatch_eta_seconds (docs/history.md#remaining-time): the planned
steps left (--max-steps, or the epochs and steps per epoch the log
prints) at the rate of the last steps, by the log's own timestamps so a
backlog read at once is not taken as instant; the log's own ETA where
nothing says how many steps are planned; 0 once the run has ended."""
import re
import subprocess
import time

from conftest import binary
from servers import http, wait_until


def kv_line(stamp, step, extra=""):
    t = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(1_780_000_000 + stamp))
    return f"[{t}] ppocr INFO: {extra}global_step: {step}, lr: 0.100000, loss: 1.5, avg_batch_cost: 0.1 s\n"


def eta_of(log, *args):
    """The trainwatch_eta_seconds a watch of log serves once it has read it."""
    addr = log.parent / "addr"
    addr.unlink(missing_ok=True)
    p = subprocess.Popen([binary("trainwatch"), "watch", "--from-start", "--no-history", "--web.listen-address",
                          "127.0.0.1:0", "--web.address-file", addr, "--web.linger", "0", *args, log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: addr.exists() and addr.read_text().strip(), what="the address file")
        url = "http://" + addr.read_text().strip() + "/metrics"

        def read():
            body = http(url)[2].decode()
            m = re.search(r"^trainwatch_eta_seconds\{[^}]*\} (\S+)$", body, re.M)
            return m and re.search(r"^trainwatch_train_step\{[^}]*\} (\S+)$", body, re.M) and (body, float(m.group(1)))
        return wait_until(read, timeout=30, what="trainwatch_eta_seconds")
    finally:
        p.terminate()
        p.communicate(timeout=30)


def test_eta_from_max_steps_at_the_logs_own_rate(tmp_path):
    # one record every 10 steps, one second apart by the log's clock: 10 steps/s
    log = tmp_path / "train.log"
    log.write_text("".join(kv_line(k, 10 * k) for k in range(1, 21)))
    body, eta = eta_of(log, "--max-steps", "1000")
    assert "trainwatch_train_step{" in body and eta == 80.0, eta  # 800 steps left at 10/s
    body, eta = eta_of(log, "--max-steps", "150")
    assert eta == 0.0  # past the plan: nothing left


def test_eta_from_the_epochs_and_steps_the_log_prints(tmp_path):
    # PaddleClas "[Epoch 2/4][Iter: 90/100]": epochs from 1, 100 steps each;
    # 20 steps every 2 s by the log's clock; its own eta (5 min) is not used
    log = tmp_path / "train.log"
    log.write_text("".join(
        f"[2026/12/06 10:00:{2 * k:02d}] ppcls INFO: [Train][Epoch 2/4][Iter: {20 * k - 10}/100]lr(LinearWarmup): "
        f"0.10000000, CELoss: 2.50000, loss: 2.50000, batch_cost: 0.20000s, reader_cost: 0.01000, "
        f"ips: 640.00000 samples/s, eta: 0:05:00\n" for k in range(1, 6)))
    _, eta = eta_of(log)
    assert eta == 21.0, eta  # (4 - 2) x 100 + (100 - 90) = 210 steps at 10/s


def test_eta_falls_back_to_the_logs_own_estimate(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(kv_line(k, 10 * k, "eta: 0:05:00, ") for k in range(1, 6)))
    _, eta = eta_of(log)
    assert eta == 300.0, eta


def clas_log(path, last_iter_of_epoch2, finished=False):
    """PaddleClas lines: 4 epochs of 100 iterations at 3 s a step, 2 s of it waiting for data."""
    lines = []
    for epoch in (1, 2):
        for it in range(10, 101, 10):
            if epoch == 2 and it > last_iter_of_epoch2:
                break
            t = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(1_780_000_000 + 30 * len(lines)))
            lines.append(f"[{t}] ppcls INFO: [Train][Epoch {epoch}/4][Iter: {it}/100]lr: 0.10000, loss: {2 / epoch:.5f}, "
                         "batch_cost: 3.00000s, reader_cost: 2.00000, ips: 42.6 samples/s, eta: 0:10:00\n")
    if finished:
        lines.append("training finished\n")
    path.write_text("".join(lines))
    return path


def test_analyze_says_the_time_left_and_what_hiding_the_data_wait_would_save(tmp_path):
    from conftest import analyze_json, run
    log = clas_log(tmp_path / "train.log", 50)
    report, _ = analyze_json("--no-history", log)
    s = report["summary"]
    assert s["steps_left"] == 250 and s["eta_seconds"] == 750  # (4 - 2) x 100 + 50 steps at 3 s
    assert s["eta_end"] == 1_780_000_000 + 30 * 14 + 750
    text = run(["trainwatch", "analyze", "--no-history", log]).stdout
    assert re.search(r"^  remaining +250 planned steps after the last: about 12m30s more, ending \d{4}-\d\d-\d\d "
                     r"\d\d:\d\d:\d\d by the log's clock$", text, re.M), text
    data = next(f for f in report["findings"] if f["rule"] == "data_loading_bound")
    assert "a step would take 1.000s instead of 3.000s" in data["evidence"]
    assert "the 250 steps left would take 4m10s instead of 12m30s: 8m20s of GPU time saved on 1 GPU" in data["evidence"]
    # a run that ended has nothing left; what-if then speaks of the steps logged
    report, _ = analyze_json("--no-history", clas_log(tmp_path / "done.log", 50, finished=True))
    assert report["summary"]["steps_left"] is None and report["summary"]["eta_seconds"] is None
    data = next(f for f in report["findings"] if f["rule"] == "data_loading_bound")
    assert re.search(r"over the 141 steps logged it waited 4m42s of 7m03s: 4m42s of GPU time on 1 GPU", data["evidence"])


def test_analyze_takes_the_plan_from_max_steps(tmp_path):
    """--max-steps where the log prints no plan (global steps alone): the
    steps left are the plan less the last global step, at the run's median
    step time; a plan already passed leaves none; a bad value is refused."""
    from conftest import analyze_json, run
    log = tmp_path / "plain.log"
    log.write_text("".join(kv_line(s, s) for s in range(1, 101)))
    report, _ = analyze_json("--no-history", log)
    assert report["summary"]["steps_left"] is None  # nothing says the plan
    report, _ = analyze_json("--no-history", "--max-steps", "1000", log)
    s = report["summary"]
    assert s["steps_left"] == 900 and abs(s["eta_seconds"] - 900 * 0.1) < 1e-6, s
    report, _ = analyze_json("--no-history", "--max-steps", "50", log)
    assert report["summary"]["steps_left"] is None  # past the plan: nothing left to time
    bad = run(["trainwatch", "analyze", "--no-history", "--max-steps", "many", log])
    assert bad.returncode == 2 and "--max-steps" in bad.stderr, bad.stderr
