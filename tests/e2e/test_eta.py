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
