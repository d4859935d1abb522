"""`trainwatch run -- CMD`: the demo trainer supervised for real (its metrics
read back through a real Prometheus and a real Pushgateway), output passed
through and logged with rotation, signals forwarded, exit statuses kept."""
import json
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


def tw_version():
    return subprocess.run([binary("trainwatch"), "--version"], capture_output=True, text=True).stdout.split()[-1]


def demo(*flags):
    return ["--", binary("demo-train"), "--batch", "8", *flags]


def test_prometheus_scrapes_a_supervised_run(procs, tmp_path):
    port = free_port()
    # a stock scrape configuration: no honor_labels, the target's job and instance
    prom = procs(Prometheus, str(tmp_path), [{"job_name": "tw", "scrape_interval": "1s",
                                              "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}])
    log = tmp_path / "train.log"
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", f"127.0.0.1:{port}", "--log-file",
                             str(log), *demo("--epochs", "3", "--steps-per-epoch", "40", "--log-interval", "5",
                                             "--slow-reader", "60")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # while it runs, Prometheus scrapes it; read the progress back as it goes
    seen = wait_until(lambda: prom.query('trainwatch_train_step{run="demo-train"} > 0'), timeout=60,
                      what="a training step in Prometheus")
    assert seen[0]["metric"]["rank"] == "0"
    assert seen[0]["metric"]["job"] == "tw" and seen[0]["metric"]["instance"] == f"127.0.0.1:{port}"
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [l for l in log.read_text().splitlines() if "global_step:" in l]
    by_step = {int(m.group(1)): float(m.group(2)) for m in
               (re.search(r"global_step: (\d+), lr: [0-9.]+, loss: ([0-9.]+)", l) for l in lines)}
    count = len(lines)
    # what Prometheus scraped matches the trainer's own log: the last step it saw
    # is a step of the log, and the loss beside it is that step's (or, if the
    # scrape fell between the two updates, the next one's)
    step = int(float(prom.query('max_over_time(trainwatch_train_step{run="demo-train"}[1m])')[0]["value"][1]))
    loss = float(prom.query('last_over_time(trainwatch_train_loss{run="demo-train"}[1m])')[0]["value"][1])
    assert step in by_step
    steps = sorted(by_step)
    nxt = steps[min(steps.index(step) + 1, len(steps) - 1)]
    assert abs(loss - by_step[step]) < 1e-6 or abs(loss - by_step[nxt]) < 1e-6
    assert step >= steps[len(steps) // 2]  # it scraped well into the run
    counted = float(prom.query('max_over_time(trainwatch_step_duration_seconds_count{run="demo-train"}[1m])')[0]["value"][1])
    assert 0 < counted <= count
    assert float(prom.query('max_over_time(trainwatch_process_tree_resident_memory_bytes{run="demo-train"}[1m])')[0]["value"][1]) > 1e5
    # no series of trainwatch's had a label the scrape had to rename
    for series in prom.series('{__name__=~"trainwatch_.+|DCGM_.+"}'):
        assert not [k for k in series if k.startswith("exported_")], series
        assert series["job"] == "tw" and series["instance"] == f"127.0.0.1:{port}"
    info = prom.query('last_over_time(trainwatch_run_info[5m])')[0]["metric"]
    assert {k: info[k] for k in ("run", "rank", "host", "version")} == {
        "run": "demo-train", "rank": "0", "host": socket.gethostname(), "version": tw_version()}
    assert info["command"].startswith(binary("demo-train") + " --batch 8")
    build = prom.query('last_over_time(trainwatch_build_info[5m])')[0]["metric"]
    assert build["version"] == tw_version() and build["revision"] and build["compiler"]
    # the steps counted are the steps the log printed by the last scrape
    steps_total = float(prom.query('max_over_time(trainwatch_train_steps_total{run="demo-train"}[1m])')[0]["value"][1])
    assert steps_total in by_step and steps_total >= step
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
    want = f'trainwatch_train_step{{instance="{host}",job="demo-train",rank="3",run="demo-train"}} 20'
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
    labels = 'run="demo-train",rank="0",gpu="0",UUID="GPU-fake-0",modelName="Fake H100 0"'
    assert series[f"DCGM_FI_DEV_GPU_UTIL{{{labels}}}"] == 37
    assert series[f"DCGM_FI_DEV_FB_USED{{{labels}}}"] == 10240
    assert series[f"DCGM_FI_DEV_FB_FREE{{{labels}}}"] == 71680
    assert series[f"DCGM_FI_DEV_POWER_USAGE{{{labels}}}"] == 250.5
    assert series[f"DCGM_FI_DEV_GPU_TEMP{{{labels}}}"] == 65
    assert series[f"DCGM_FI_DEV_SM_CLOCK{{{labels}}}"] == 1755
    assert series[f"trainwatch_gpu_clock_event_reasons{{{labels}}}"] == 4
    assert series[f"trainwatch_gpu_process_memory_bytes{{{labels}}}"] == 1 << 30
    gpu1 = 'run="demo-train",rank="0",gpu="1",UUID="GPU-fake-1",modelName="Fake H100 1"'
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


def test_thousands_of_ranks_in_the_output_do_not_kill_the_command(tmp_path):
    """More ranks than the live series limit allows: the series past it are
    refused and counted; run keeps going and the command's status is kept."""
    port = free_port()
    script = ("import sys, time\n"
              "for n in range(3335): print(f'[Rank {n}] steps: 10 loss: 0.1')\n"
              "sys.stdout.flush(); time.sleep(3)\n")
    out_file = tmp_path / "out"
    with open(out_file, "w") as out:  # a file, not a pipe nobody reads yet: passthrough waits for its reader
        proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", f"127.0.0.1:{port}", "--",
                                 "/usr/bin/python3", "-c", script], stdout=out, stderr=subprocess.PIPE, text=True)
    body = wait_until(lambda: (lambda b: b if 'rank="3334"' in b else None)(
        http(f"http://127.0.0.1:{port}/metrics")[2].decode()), timeout=60, what="rank 3334's series")
    dropped = [l for l in body.splitlines() if l.startswith("trainwatch_dropped_series_total ")]
    assert dropped and float(dropped[0].split()[1]) > 0
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert out_file.read_text().count("\n") == 3335


def test_stdout_and_stderr_are_one_ordered_stream(tmp_path):
    """Both streams go through one pipe: the log keeps the order the command
    wrote in, and a traceback on stderr is found at its own line."""
    log = tmp_path / "train.log"
    report = tmp_path / "report.json"
    script = ("import sys\n"
              "for i in range(1, 9):\n"
              "    print(f'epoch: [1/1], global_step: {i}, loss: 1.0', flush=True)\n"
              "    print(f'warning {i}', file=sys.stderr, flush=True)\n"
              "raise RuntimeError('boom')\n")
    result = tw_run("--web.listen-address", "none", "--log-file", log, "--report", report, "--",
                    "/usr/bin/python3", "-c", script)
    assert result.returncode == 1
    lines = log.read_text().splitlines()
    assert lines[:4] == ["epoch: [1/1], global_step: 1, loss: 1.0", "warning 1",
                         "epoch: [1/1], global_step: 2, loss: 1.0", "warning 2"]
    error_at = lines.index("RuntimeError: boom") + 1
    assert lines[error_at - 3] == "Traceback (most recent call last):"
    import json
    findings = {f["rule"]: f for f in json.loads(report.read_text())["findings"]}
    assert "crash" in findings and "failed_launches" not in findings, findings.keys()
    assert f"RuntimeError: boom ({log}:{error_at})" in findings["crash"]["evidence"]
    apart = tw_run("--web.listen-address", "none", "--separate-stderr", "--", "sh", "-c", "echo out; echo err >&2")
    assert apart.stdout == "out\n" and "err\n" in apart.stderr


def test_sigterm_to_run_is_reported_as_the_signal(tmp_path):
    report = tmp_path / "report.json"
    script = "trap 'exit 143' TERM; echo 'epoch: [1/3], global_step: 5, loss: 1.0'; sleep 30 & wait"
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "none", "--report", str(report),
                             "--", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    import json
    findings = {f["rule"]: f for f in json.loads(report.read_text())["findings"]}
    assert "failed_launches" not in findings, findings.keys()
    assert "killed" in findings
    assert "forwarded signal 15" in findings["killed"]["evidence"]


def test_run_says_where_it_listens(tmp_path):
    proc = subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address", "127.0.0.1:0", "--",
                             "sleep", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.match(r"trainwatch run: serving /metrics on 127\.0\.0\.1:(\d+)$", line.rstrip("\n"))
        if m:
            port = int(m.group(1))
            break
    assert port and port != 0
    # it serves from the moment it says so; the command's process-tree series
    # come once the command is started, a moment later
    status, _, body = http(f"http://127.0.0.1:{port}/metrics")
    assert status == 200 and b"process_start_time_seconds" in body
    wait_until(lambda: b"trainwatch_process_tree_processes" in http(f"http://127.0.0.1:{port}/metrics")[2],
               timeout=10, what="the process-tree series")
    proc.terminate()
    proc.communicate(timeout=30)


FETCH = ("import sys, urllib.request\n"
         "address = open(sys.argv[1]).read()\n"
         "body = urllib.request.urlopen('http://' + address.strip() + '/metrics').read().decode()\n"
         "print(address.strip(), 'trainwatch_run_info{' in body)\n")


def test_port_0_is_written_to_the_address_file_before_the_command_starts(tmp_path):
    """The command itself reads the address file and scrapes the address it
    names: the file is complete before the command starts."""
    address_file = tmp_path / "address"
    result = tw_run("--web.listen-address", "127.0.0.1:0", "--web.address-file", address_file, "--",
                    "python3", "-c", FETCH, address_file)
    assert result.returncode == 0, result.stderr
    printed = re.search(r"trainwatch run: serving /metrics on (127\.0\.0\.1:(\d+))$", result.stderr, re.M)
    assert printed and int(printed.group(2)) != 0
    assert result.stdout == f"{printed.group(1)} True\n"
    assert address_file.read_text() == printed.group(1) + "\n"
    assert [p.name for p in tmp_path.iterdir()] == ["address"]  # no temporary file left


def test_local_rank_offset_gives_each_rank_its_own_port(tmp_path):
    base = free_port()
    procs, files = [], []
    for local_rank in range(2):
        files.append(tmp_path / f"address.{local_rank}")
        env = dict(os.environ, LOCAL_RANK=str(local_rank))
        procs.append(subprocess.Popen([binary("trainwatch"), "run", "--web.listen-address",
                                       f"127.0.0.1:{base}+LOCAL_RANK", "--web.address-file", files[-1], "--",
                                       "python3", "-c", FETCH + "import time; time.sleep(1)\n", files[-1]],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    outs = [p.communicate(timeout=60) for p in procs]
    for local_rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, err
        assert out == f"127.0.0.1:{base + local_rank} True\n"
        assert f"serving /metrics on 127.0.0.1:{base + local_rank}" in err


def test_run_info_names_the_run_from_the_launchers_variables(tmp_path):
    """The command reads trainwatch's /metrics itself: trainwatch_run_info
    carries rank, local rank and world size from torchrun's variables."""
    address_file = tmp_path / "address"
    show = ("import sys, urllib.request\n"
            "body = urllib.request.urlopen('http://' + open(sys.argv[1]).read().strip() + '/metrics').read().decode()\n"
            "print([l for l in body.splitlines() if l.startswith('trainwatch_run_info')][0])\n")
    env = dict(os.environ, RANK="5", LOCAL_RANK="1", WORLD_SIZE="8")
    for k in ("PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK", "PADDLE_LOCAL_RANK", "PADDLE_TRAINERS_NUM"):
        env.pop(k, None)
    result = tw_run("--web.listen-address", "127.0.0.1:0", "--web.address-file", address_file, "--run-name", "exp7",
                    "--", "python3", "-c", show, address_file, env=env)
    assert result.returncode == 0, result.stderr
    labels = dict(re.findall(r'(\w+)="([^"]*)"', result.stdout))
    escaped = show.replace("\n", "\\n")  # as the exposition escapes a newline in a label value
    assert labels == {"run": "exp7", "command": f"python3 -c {escaped} {address_file}", "host": socket.gethostname(),
                      "rank": "5", "local_rank": "1", "world_size": "8", "version": tw_version()}
    assert result.stdout.rstrip().endswith("} 1")


@pytest.mark.parametrize("address, said", [
    ("127.0.0.1:9464+NODE", "expected HOST:PORT+LOCAL_RANK or HOST:PORT+RANK"),
    ("127.0.0.1:+LOCAL_RANK", "expected HOST:PORT+LOCAL_RANK or HOST:PORT+RANK"),
    ("127.0.0.1:65535+RANK", "port 65538 is past 65535"),
])
def test_bad_port_offset_is_refused(tmp_path, address, said):
    marker = tmp_path / "started"
    result = tw_run("--web.listen-address", address, "--", "touch", marker, env=dict(os.environ, RANK="3"))
    assert result.returncode == 2
    assert said in result.stderr and address in result.stderr
    assert not marker.exists()


def test_address_file_without_a_server_is_refused(tmp_path):
    marker = tmp_path / "started"
    result = tw_run("--web.listen-address", "none", "--web.address-file", tmp_path / "a", "--", "touch", marker)
    assert result.returncode == 2 and "--web.address-file needs /metrics served" in result.stderr
    assert not marker.exists() and not (tmp_path / "a").exists()


def test_unwritable_address_file_does_not_start_the_command(tmp_path):
    marker = tmp_path / "started"
    result = tw_run("--web.listen-address", "127.0.0.1:0", "--web.address-file", tmp_path / "no-dir" / "a", "--",
                    "touch", marker)
    assert result.returncode == 2
    assert "--web.address-file" in result.stderr and "no-dir/a" in result.stderr
    assert not marker.exists()


def test_report_path_is_checked_before_the_command_starts(tmp_path):
    marker = tmp_path / "started"
    result = tw_run("--web.listen-address", "none", "--report", tmp_path / "no-such-dir" / "r.json", "--",
                    "touch", marker)
    assert result.returncode == 2
    assert "no-such-dir/r.json" in result.stderr and "not starting touch" in result.stderr
    assert not marker.exists()


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs: a disk that fills up (needs root to mount)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up (needs root): {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def test_full_disk_under_log_file_and_report(small_fs):
    """The log file on a disk that fills: said once, lines dropped whole, the
    command unharmed. The report on a full disk: no empty file, a non-zero
    status although the command succeeded."""
    (small_fs / "filler").write_bytes(b"x" * 60 * 1024)
    log = small_fs / "train.log"
    script = "for i in range(2000): print(f'epoch: [1/1], global_step: {i}, loss: 1.0')"
    result = tw_run("--web.listen-address", "none", "--log-file", log, "--", "/usr/bin/python3", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 2000
    said = [l for l in result.stderr.splitlines() if "No space left on device" in l]
    assert len(said) == 1 and str(log) in said[0]
    text = log.read_text()
    assert text == "" or text.endswith("\n")
    assert all(l.startswith("epoch: [1/1], global_step: ") for l in text.splitlines())
    # the disk is full: the report cannot be written
    report = small_fs / "report.json"
    result = tw_run("--web.listen-address", "none", "--report", report, "--", "/usr/bin/python3", "-c", script)
    assert result.returncode != 0
    assert "--report" in result.stderr and str(report) in result.stderr
    assert not report.exists()
    assert not [p for p in small_fs.iterdir() if ".tmp." in p.name]


def test_rotation_never_splits_a_line_written_in_pieces(tmp_path):
    """A writer that flushes in odd-sized pieces (block buffering): every
    rotated file holds whole lines only."""
    log = tmp_path / "train.log"
    script = ("import os, random, time\n"
              "random.seed(3)\n"
              "data = ''.join(f'epoch: [1/1], global_step: {i}, loss: {random.random():.{i % 13}f}\\n' for i in range(3000)).encode()\n"
              "i = 0\n"
              "while i < len(data):\n"
              "    n = random.randint(1, 700)\n"
              "    os.write(1, data[i:i + n]); i += n; time.sleep(0.0005)\n")
    result = tw_run("--web.listen-address", "none", "--log-file", log, "--log-max-bytes", "4000", "--log-backups",
                    "5", "--", "/usr/bin/python3", "-c", script)
    assert result.returncode == 0
    files = [log] + [tmp_path / f"train.log.{i}" for i in range(1, 6)]
    for f in files:
        text = f.read_text()
        assert text.endswith("\n") and text.startswith("epoch: "), f
        assert len(text) <= 4000
    kept = "".join(f.read_text() for f in reversed(files))
    assert result.stdout.endswith(kept)


def test_a_clean_exit_is_not_read_as_exit_status_1():
    result = tw_run("--web.listen-address", "none", "--", "true")
    assert result.returncode == 0
    events = [l for l in result.stderr.splitlines() if l.strip().startswith("events")]
    assert events and events[0].split(None, 1)[1] == "1 exit", events


def cited_lines(text):
    """(file name, line) of every run.log* position a text cites."""
    return [(m.group(1), int(m.group(2))) for m in re.finditer(r"\b(run\.log(?:\.\d+)?):(\d+)\b", text)]


def line_of(directory, name, number):
    return (directory / name).read_text().splitlines()[number - 1]


def test_evidence_names_the_generation_that_holds_the_line(tmp_path):
    """--log-file rotates while the run goes on: the findings, the JSON report
    and the HTML report cite the generation that now holds each line, and the
    line quoted is that line (cited run.log:N while run.log held 10 lines
    before)."""
    (tmp_path / "run.log").write_text("an earlier run's line\n" * 3)  # ours start after these
    result = tw_run("--web.listen-address", "none", "--log-file", "run.log", "--log-max-bytes", "3000",
                    "--log-backups", "5", "--report", "r.json", "--html", "r.html",
                    *demo("--lr-spike-at", "150"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    nan = [f for f in report["findings"] if f["rule"] == "nan_loss"]
    assert nan, report["findings"]
    assert nan[0]["file"].startswith("run.log.") and "loss: nan" in line_of(tmp_path, nan[0]["file"], nan[0]["line"])
    assert "global_step: 160," in line_of(tmp_path, nan[0]["file"], nan[0]["line"])
    cites = [c for f in report["findings"] for c in cited_lines(f["evidence"])]
    assert cites
    for name, number in cites:
        assert (tmp_path / name).exists() and number <= len((tmp_path / name).read_text().splitlines()), (name, number)
    assert f"{nan[0]['file']}:{nan[0]['line']}" in nan[0]["evidence"]
    html_page = (tmp_path / "r.html").read_text()
    quoted = re.findall(r'<blockquote class="logline">([^<]*)', html_page)
    assert quoted and any("global_step: 160," in q and "loss: nan" in q for q in quoted)


def test_evidence_of_a_line_rotated_away_says_so(tmp_path):
    """With too few backups to keep the NaN line, the evidence says which line
    of the output it was and that it is gone, never a line of run.log that
    holds something else."""
    result = tw_run("--web.listen-address", "none", "--log-file", "run.log", "--log-max-bytes", "3000",
                    "--log-backups", "1", "--report", "r.json", *demo("--lr-spike-at", "150"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    nan = [f for f in report["findings"] if f["rule"] == "nan_loss"][0]
    assert re.search(r"output line \d+, rotated out of run\.log", nan["evidence"]), nan["evidence"]
    assert nan["file"] is None
    for f in report["findings"]:
        for name, number in cited_lines(f["evidence"]):
            assert number <= len((tmp_path / name).read_text().splitlines())
