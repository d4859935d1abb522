"""What a run's GPUs cost (docs/history.md#cost): `run` under the test
NVML library (tests/fake-nvml: two GPUs named "Fake H100 0/1", the
command's children on GPU 0), GPU time of the GPUs the command uses and
its idle share, money from --gpu-hour-cost or a price table, a budget and
the TrainingOverBudget rule fired by trainwatch's own evaluator; a bad
price table stops the run before the command starts. The real NVML path
is exercised by scripts/gpu-check.sh on a GPU machine."""
import json
import os
import re
import subprocess

from conftest import binary, run
from servers import http, wait_until


def fake_env(**extra):
    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    return dict(os.environ, TW_NVML_LIBRARY=fake, **extra)


def metric(body, name):
    m = re.search(rf"^{name}\{{[^}}]*\}} (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def demo_run(tmp_path, *options, env, steps=300):
    """A demo run with /metrics served; returns (its stderr, the last /metrics read while it ran)."""
    addr = tmp_path / "addr"
    addr.unlink(missing_ok=True)
    p = subprocess.Popen([binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0",
                          "--web.address-file", addr, "--web.linger", "0", *options, "--", binary("demo-train"),
                          "--epochs", "1", "--steps-per-epoch", str(steps), "--log-interval", "5",
                          "--slow-reader", "12"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wait_until(lambda: addr.exists() and addr.read_text().strip(), what="the address file")
    url = "http://" + addr.read_text().strip() + "/metrics"
    body = wait_until(lambda: (lambda b: b if (metric(b, "trainwatch_gpu_seconds_total") or 0) > 1 else None)(
        http(url)[2].decode()), timeout=60, what="two GPU-seconds")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return err, body


def test_gpu_time_and_cost_of_the_gpus_the_command_uses(tmp_path):
    err, body = demo_run(tmp_path, "--gpu-hour-cost", "3.6", env=fake_env())
    assert metric(body, "trainwatch_gpus_used") == 1  # GPU 0 only: the children's
    seconds = metric(body, "trainwatch_gpu_seconds_total")
    assert metric(body, "trainwatch_gpu_idle_seconds_total") == 0  # 37% busy: not idle
    assert abs(metric(body, "trainwatch_cost_total") - seconds * 3.6 / 3600) < 1e-9
    assert metric(body, "trainwatch_cost_per_hour") == 3.6
    m = re.search(r"^GPU time: (\d+) GPU-seconds, 0 GPU-seconds of it idle \(0%, under 10% utilisation\); "
                  r"cost (\S+), 0.00 of it idle$", err, re.M)
    assert m and int(m.group(1)) >= seconds - 1 and abs(float(m.group(2)) - int(m.group(1)) * 0.001) < 0.002, err


def test_idle_gpu_time_and_a_price_table(tmp_path):
    prices = tmp_path / "prices.txt"
    prices.write_text("# per GPU-hour\nA100 1.10\nfake h100   7.20  # first match, any case\nH100 9.99\n")
    err, body = demo_run(tmp_path, "--gpu-prices", prices, "--gpu-idle-below", "20", env=fake_env(FAKE_NVML_UTIL="5"))
    assert metric(body, "trainwatch_cost_per_hour") == 7.2
    assert metric(body, "trainwatch_gpu_idle_seconds_total") == metric(body, "trainwatch_gpu_seconds_total")
    assert "of it idle (100%, under 20% utilisation)" in err, err


def test_over_budget_fires_on_the_projection_before_the_money_is_spent(tmp_path):
    rules = tmp_path / "rules.yml"
    text = run(["trainwatch", "rules", "defaults"]).stdout
    waiting = "for: 2m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"The run will cost"
    assert text.count(waiting) == 1
    rules.write_text(text.replace(waiting, waiting.replace("for: 2m\n        ", "")))  # no wait: fires at once
    # 3600 per GPU-hour: a second of GPU 0 costs 1; 6000 steps take over a minute, so the
    # projection passes a budget of 30 within seconds while the money spent is still under it
    addr = tmp_path / "addr"
    p = subprocess.Popen([binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0",
                          "--web.address-file", addr, "--web.linger", "0", "--no-default-rules", "--rules", rules,
                          "--eval-interval", "1", "--gpu-hour-cost", "3600", "--budget", "30", "--",
                          binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "6000", "--log-interval", "5",
                          "--slow-reader", "12"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=fake_env())
    try:
        wait_until(lambda: addr.exists() and addr.read_text().strip(), what="the address file")
        base = "http://" + addr.read_text().strip()

        def firing():
            page = json.loads(http(base + "/alerts?format=json")[2])
            return [a for r in page["rules"] for a in r.get("alerts", [])
                    if a["labels"]["alertname"] == "TrainingOverBudget" and a["state"] == "firing"]
        alert = wait_until(firing, timeout=60, what="TrainingOverBudget firing")[0]
        body = http(base + "/metrics")[2].decode()
        spent, eta = metric(body, "trainwatch_cost_total"), metric(body, "trainwatch_eta_seconds")
        assert spent < 30 and eta > 0, body
        assert float(alert["value"]) > 30, alert  # the projection
        assert metric(body, "trainwatch_budget") == 30
    finally:
        p.terminate()
        p.communicate(timeout=60)
    # under a budget that holds, it does not fire
    err, _ = demo_run(tmp_path, "--no-default-rules", "--rules", rules, "--eval-interval", "1",
                      "--gpu-hour-cost", "0.36", "--budget", "1000", env=fake_env())
    assert "TrainingOverBudget" not in err, err


def test_a_bad_price_table_stops_before_the_command(tmp_path):
    marker = tmp_path / "ran"
    for text, said in (("H100\n", ":1: not 'GPU-MODEL PRICE'"), ("A100 1\nH100 cheap\n", ":2: not 'GPU-MODEL PRICE'")):
        prices = tmp_path / "prices.txt"
        prices.write_text(text)
        r = run(["trainwatch", "run", "--no-history", "--gpu-prices", prices, "--", "touch", marker])
        assert r.returncode == 2 and f"--gpu-prices {prices}{said}" in r.stderr and "not starting touch" in r.stderr
        assert not marker.exists()
    r = run(["trainwatch", "run", "--no-history", "--gpu-prices", tmp_path / "none.txt", "--", "touch", marker])
    assert r.returncode == 2 and "none.txt: No such file or directory" in r.stderr and not marker.exists()
    r = run(["trainwatch", "run", "--gpu-idle-below", "140", "--", "true"])
    assert r.returncode == 2 and "--gpu-idle-below takes a utilisation from 0 to 100" in r.stderr
