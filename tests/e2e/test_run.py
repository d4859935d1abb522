"""`trainwatch run -- CMD`: the demo trainer supervised for real (its metrics
read back through a real Prometheus and a real Pushgateway), output passed
through and logged with rotation, signals forwarded, exit statuses kept."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import binary
from servers import Prometheus, Process, Pushgateway, free_port, http, wait_until


def tw_run(*args, timeout=300, **kwargs):
    return subprocess.run([binary("trainwatch"), "run", *[str(a) for a in args]], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def demo(*flags):
    return ["--", binary("demo-train"), "--batch", "8", *flags]


def test_prometheus_scrapes_a_supervised_run(procs, tmp_path):
    port = free_port()
    # our series carry their own job label: honor it, as for a Pushgateway
    prom = procs(Prometheus, str(tmp_path), [{"job_name": "tw", "honor_labels": True,
                                              "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}])
    log = tmp_path / "train.log"
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", f"127.0.0.1:{port}", "--log-file",
                             str(log), *demo("--epochs", "3", "--steps-per-epoch", "40", "--log-interval", "5",
                                             "--slow-reader", "60")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # while it runs, Prometheus scrapes it; read the progress back as it goes
    seen = wait_until(lambda: prom.query('trainwatch_train_step{job="demo-train"} > 0'), timeout=60,
                      what="a training step in Prometheus")
    assert seen[0]["metric"]["rank"] == "0"
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [l for l in log.read_text().splitlines() if "global_step:" in l]
    by_step = {int(m.group(1)): float(m.group(2)) for m in
               (re.search(r"global_step: (\d+), lr: [0-9.]+, loss: ([0-9.]+)", l) for l in lines)}
    count = len(lines)
    # what Prometheus scraped matches the trainer's own log: the last step it saw
    # is a step of the log, and the loss beside it is that step's (or, if the
    # scrape fell between the two updates, the next one's)
    step = int(float(prom.query('max_over_time(trainwatch_train_step{job="demo-train"}[1m])')[0]["value"][1]))
    loss = float(prom.query('last_over_time(trainwatch_train_loss{job="demo-train"}[1m])')[0]["value"][1])
    assert step in by_step
    steps = sorted(by_step)
    nxt = steps[min(steps.index(step) + 1, len(steps) - 1)]
    assert abs(loss - by_step[step]) < 1e-6 or abs(loss - by_step[nxt]) < 1e-6
    assert step >= steps[len(steps) // 2]  # it scraped well into the run
    counted = float(prom.query('max_over_time(trainwatch_step_duration_seconds_count{job="demo-train"}[1m])')[0]["value"][1])
    assert 0 < counted <= count
    assert float(prom.query('max_over_time(trainwatch_process_tree_resident_memory_bytes{job="demo-train"}[1m])')[0]["value"][1]) > 1e5
    # stdout passed through unchanged and logged
    assert out == log.read_text()
    assert "== trainwatch: demo-train" in err and "Summary" in err


def test_output_log_rotation(tmp_path):
    log = tmp_path / "train.log"
    result = tw_run("--web.listen-address", "none", "--log-file", log, "--log-max-bytes", "1500", "--log-backups", "3",
                    *demo("--epochs", "2", "--steps-per-epoch", "50", "--log-interval", "2"))
    assert result.returncode == 0
    files = [log] + [tmp_path / f"train.log.{i}" for i in (1, 2, 3)]
    assert all(f.exists() for f in files) and not (tmp_path / "train.log.4").exists()
    assert all(f.stat().st_size <= 1500 for f in files)
    kept = "".join(f.read_text() for f in reversed(files))
    assert result.stdout.endswith(kept)  # the newest lines, in order, none split


def test_exit_status_is_the_commands(tmp_path):
    assert tw_run("--web.listen-address", "none", "--", "sh", "-c", "exit 3").returncode == 3
    assert tw_run("--web.listen-address", "none", "--", "sh", "-c", "kill -9 $$").returncode == 137
    missing = tw_run("--web.listen-address", "none", "--", str(tmp_path / "no-such-command"))
    assert missing.returncode == 127 and "No such file or directory" in missing.stderr


def test_sigterm_is_forwarded_to_the_group(tmp_path):
    marker = tmp_path / "got-term"
    script = f"trap 'touch {marker}; exit 143' TERM; sleep 30 & wait"
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "none", "--", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert marker.exists()


def test_child_that_ignores_sigterm_is_killed_after_grace(tmp_path):
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "none", "--kill-after", "1", "--",
                             "sh", "-c", "trap '' TERM; sleep 30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(1)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 137
    assert "killing it" in err
    assert time.monotonic() - start < 10


def test_port_in_use_does_not_start_the_command(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        marker = tmp_path / "started"
        result = tw_run("--web.listen-address", f"127.0.0.1:{port}", "--", "touch", marker)
    assert result.returncode == 2
    assert "Address already in use" in result.stderr and "not starting touch" in result.stderr
    assert not marker.exists()
    bad = tw_run("--bogus", "--", "true")
    assert bad.returncode == 2


def test_final_metrics_reach_the_pushgateway(procs, tmp_path):
    gw = procs(Pushgateway, str(tmp_path))
    result = tw_run("--web.listen-address", "none", "--pushgateway", gw.url, "--rank", "3",
                    *demo("--epochs", "1", "--steps-per-epoch", "20", "--log-interval", "5"))
    assert result.returncode == 0, result.stderr
    text = gw.metrics()
    host = socket.gethostname()
    want = f'trainwatch_train_step{{instance="{host}",job="demo-train",rank="3"}} 20'
    assert want in text, text[-2000:]


def test_gpu_metrics_through_nvml(tmp_path):
    """The fake NVML library (the one allowed stand-in: no GPU here) reports two
    GPUs with fixed values and 1 GiB used by each child of the caller."""
    import os
    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    port = free_port()
    env = dict(os.environ, TW_NVML_LIBRARY=fake)
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", f"127.0.0.1:{port}",
                             *demo("--epochs", "2", "--steps-per-epoch", "40", "--log-interval", "5",
                                   "--slow-reader", "50")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)

    def gpu_series():
        body = http(f"http://127.0.0.1:{port}/metrics")[2].decode()
        series = {}
        for line in body.splitlines():
            if line.startswith(("DCGM_", "trainwatch_gpu_")):
                name, value = line.rsplit(" ", 1)
                series[name] = float(value)
        sampled = any(k.startswith("trainwatch_gpu_process_memory_bytes") and v > 0 for k, v in series.items())
        return series if sampled else None

    series = wait_until(gpu_series, timeout=30, what="GPU series")
    labels = 'job="demo-train",rank="0",gpu="0",UUID="GPU-fake-0",modelName="Fake H100 0"'
    assert series[f"DCGM_FI_DEV_GPU_UTIL{{{labels}}}"] == 37
    assert series[f"DCGM_FI_DEV_FB_USED{{{labels}}}"] == 10240
    assert series[f"DCGM_FI_DEV_FB_FREE{{{labels}}}"] == 71680
    assert series[f"DCGM_FI_DEV_POWER_USAGE{{{labels}}}"] == 250.5
    assert series[f"DCGM_FI_DEV_GPU_TEMP{{{labels}}}"] == 65
    assert series[f"DCGM_FI_DEV_SM_CLOCK{{{labels}}}"] == 1755
    assert series[f"trainwatch_gpu_clock_event_reasons{{{labels}}}"] == 4
    assert series[f"trainwatch_gpu_process_memory_bytes{{{labels}}}"] == 1 << 30
    gpu1 = 'job="demo-train",rank="0",gpu="1",UUID="GPU-fake-1",modelName="Fake H100 1"'
    assert series[f"DCGM_FI_DEV_GPU_UTIL{{{gpu1}}}"] == 81
    assert series[f"trainwatch_gpu_process_memory_bytes{{{gpu1}}}"] == 0
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert "sampling 2 GPU(s) through NVML" in err
    assert "GPU: utilization averaged 59% over 2 GPU(s)" in err


def test_no_nvml_means_no_gpu_metrics_and_no_failure(tmp_path):
    import os
    env = dict(os.environ, TW_NVML_LIBRARY=str(tmp_path / "libnvidia-ml.so.1"))
    result = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "none", "--", "true"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0
    lines = [l for l in result.stderr.splitlines() if "GPU" in l]
    assert lines[0].startswith("trainwatch run: no GPU metrics: ") and "libnvidia-ml.so.1" in lines[0]


def run_under_terminal(args):
    """Runs a command with a pseudo-terminal as its stdin, stdout and stderr,
    as a person at a terminal would; returns (status, everything shown)."""
    import pty
    import select
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True, start_new_session=True)
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.wait(timeout=30), shown


def test_on_a_terminal_the_command_gets_a_terminal(tmp_path):
    log = tmp_path / "out.log"
    script = "test -t 1 && test -t 2 && echo BOTH-TTY; printf 'step 1\\rstep 2\\n'; echo on-stderr >&2"
    status, shown = run_under_terminal([binary("trainwatch"), "run", "--web.listen-address", "none", "--log-file",
                                        str(log), "--", "sh", "-c", script])
    assert status == 0
    assert b"BOTH-TTY" in shown
    # the command's bytes reach the log unchanged: no \r\n translation, the \r of a redraw kept
    assert log.read_bytes() == b"BOTH-TTY\nstep 1\rstep 2\non-stderr\n"
    plain = tw_run("--web.listen-address", "none", "--", "sh", "-c", "test -t 1 && echo TTY || echo NOT-A-TTY")
    assert plain.stdout == "NOT-A-TTY\n"


def test_idle_gpus_while_waiting_for_data_is_a_finding(tmp_path):
    import json
    fake = os.path.join(os.path.dirname(binary("trainwatch")), "fake-nvml", "libnvidia-ml.so.1")
    env = dict(os.environ, TW_NVML_LIBRARY=fake, FAKE_NVML_UTIL="12")
    report = tmp_path / "report.json"
    result = subprocess.run([binary("trainwatch"), "run", "--web.listen-address", "none", "--report", str(report),
                             *demo("--epochs", "1", "--steps-per-epoch", "60", "--log-interval", "5",
                                   "--slow-reader", "60")], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0
    findings = {f["rule"]: f for f in json.loads(report.read_text())["findings"]}
    gpu = findings["gpu_underused"]
    assert gpu["title"] == "GPU utilization averaged 12% while steps waited for data"
    assert "data wait was" in gpu["evidence"] and "data_loading_bound" in gpu["recommendation"]
    assert "data_loading_bound" in findings
    assert "GPU utilization averaged 12%" in result.stderr
