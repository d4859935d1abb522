"""`trainwatch watch` against logs that rotate under it: by rename and by
copy-truncate, mixed, over a thousand times, with and without kill -9 of the
watcher; every line must come out exactly once."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import binary
from servers import free_port, http, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def watcher(tmp_path, *args):
    return subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--state",
                             str(tmp_path / "state"), "--records", str(tmp_path / "records.jsonl"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def steps_seen(tmp_path):
    path = tmp_path / "records.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().split("\n")[:-1]:  # whole lines only: the writer may be mid-record
        r = json.loads(line)
        if r["kind"] == "step":
            out.append(r["global_step"])
    return out


def stop(proc, sig=signal.SIGTERM):
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def check_exactly_once(seen, total):
    missing = sorted(set(range(1, total + 1)) - set(seen))
    dupes = sorted({s for s in seen if seen.count(s) > 1}) if len(seen) != len(set(seen)) else []
    assert not missing, f"{len(missing)} lines lost, first {missing[:10]}"
    assert not dupes, f"{len(dupes)} lines counted twice, first {dupes[:10]}"
    assert len(seen) == total


def test_rotation_torture(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: "train.log" in (tmp_path / "state").read_text(), timeout=30, what="the watcher to start")
    # eight generations kept, as logrotate commonly does: a watcher more than
    # eight rotations behind (a few ms at this pace) would lose lines by design
    total, every = 24000, 20
    writer = subprocess.run([sys.executable, os.path.join(HERE, "rotate_writer.py"), str(log), str(total), str(every),
                             "1", "0.001", "8"], capture_output=True, text=True, timeout=600)
    assert writer.returncode == 0, writer.stderr
    assert int(writer.stdout) >= 1000
    wait_until(lambda: len(steps_seen(tmp_path)) >= total, timeout=60, what="the watcher to catch up")
    time.sleep(1)
    out, err = stop(w)
    check_exactly_once(steps_seen(tmp_path), total)
    assert "rotations" in err


def test_rotation_torture_with_kill_9(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    # The writer keeps sixteen rotated generations (0.4 s of log): long enough
    # for a watcher killed at random to come back (even an ASan build on a
    # busy machine) and find every line.
    total, every = 12000, 10
    # the watcher first: rotated generations already there when it starts
    # are history, not news, so it must be following before the first rotation
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: "train.log" in (tmp_path / "state").read_text(), timeout=30, what="the watcher to start")
    writer = subprocess.Popen([sys.executable, os.path.join(HERE, "rotate_writer.py"), str(log), str(total),
                               str(every), "7", "0.025", "16"], stdout=subprocess.PIPE, text=True)
    rng = random.Random(3)
    kills = 0
    while writer.poll() is None:
        time.sleep(rng.uniform(0.2, 2.0))
        w.kill()  # SIGKILL: no chance to save anything
        w.wait()
        kills += 1
        w = watcher(tmp_path, "--from-start", str(log))
    assert int(writer.stdout.read()) >= 1000
    wait_until(lambda: len(set(steps_seen(tmp_path))) >= total, timeout=60, what="the watcher to catch up")
    time.sleep(1.5)
    stop(w)
    assert kills >= 5
    check_exactly_once(steps_seen(tmp_path), total)


def test_glob_picks_up_new_rank_files_and_serves_metrics(tmp_path):
    logdir = tmp_path / "log"
    logdir.mkdir()
    port = free_port()
    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", f"127.0.0.1:{port}", "--job", "fleet",
                          str(logdir / "workerlog.*")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: http(f"http://127.0.0.1:{port}/-/healthy")[0] == 200 or None, what="the watcher's server")
    for rank in range(3):
        with open(logdir / f"workerlog.{rank}", "w") as f:
            for n in range(1, 6):
                f.write(f"[2024/03/09 15:15:3{n}] ppocr INFO: epoch: [1/9], global_step: {n * 10}, lr: 0.1, "
                        f"loss: {rank + 1.0 / n:.4f}, avg_reader_cost: 0.1 s, avg_batch_cost: 0.5 s\n")

    def steps():
        body = http(f"http://127.0.0.1:{port}/metrics")[2].decode()
        return {line.split("}")[0] + "}": line.split()[-1] for line in body.splitlines()
                if line.startswith("trainwatch_train_step{")}

    # the files may be read in more than one poll: wait for all three at their last step
    got = wait_until(lambda: (lambda s: s if len(s) == 3 and set(s.values()) == {"50"} else None)(steps()),
                     timeout=20, what="three ranks at step 50")
    assert got == {f'trainwatch_train_step{{job="fleet",rank="{r}"}}': "50" for r in range(3)}
    out, err = stop(w)
    assert "3 with training steps" in out


def test_deleted_file_and_binary_replacement(tmp_path):
    log = tmp_path / "train.log"
    with open(log, "w") as f:
        f.write("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: 1, lr: 0.1, loss: 0.5\n")
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: steps_seen(tmp_path) == [1] or None, timeout=10, what="the first line")
    os.unlink(log)
    time.sleep(0.5)
    log.write_bytes(bytes(range(256)) * 64)  # a binary file where the log was
    time.sleep(0.5)
    with open(log, "w") as f:
        f.write("[2024/03/09 15:15:34] ppocr INFO: epoch: [1/9], global_step: 2, lr: 0.1, loss: 0.4\n")
    wait_until(lambda: 2 in steps_seen(tmp_path) or None, timeout=10, what="the re-created file")
    out, err = stop(w)
    assert w.returncode in (0, 1)
    assert steps_seen(tmp_path) == [1, 2]


def test_stall_warning_and_usage_errors(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    w = watcher(tmp_path, "--stall-after", "1", str(log))
    time.sleep(0.3)
    with open(log, "a") as f:
        f.write("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: 7, lr: 0.1, loss: 0.5\n")
    time.sleep(3)
    out, err = stop(w)
    assert "no training progress for" in err and "after step 7" in err
    bad = subprocess.run([binary("trainwatch"), "watch"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no files to follow" in bad.stderr
    port = free_port()
    first = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", f"127.0.0.1:{port}", str(log)],
                             stderr=subprocess.PIPE, text=True)
    wait_until(lambda: http(f"http://127.0.0.1:{port}/-/healthy")[0] == 200 or None, what="the first watcher")
    second = subprocess.run([binary("trainwatch"), "watch", "--web.listen-address", f"127.0.0.1:{port}", str(log)],
                            capture_output=True, text=True, timeout=30)
    stop(first)
    assert second.returncode == 2 and "Address already in use" in second.stderr


def test_polling_fallback_without_inotify(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    env = dict(os.environ, TW_FOLLOW_POLL="1")
    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--records",
                          str(tmp_path / "records.jsonl"), "--from-start", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.3)
    total = 1000
    writer = subprocess.run([sys.executable, os.path.join(HERE, "rotate_writer.py"), str(log), str(total), "20", "5",
                             "0.1", "8"], capture_output=True, text=True, timeout=300)
    assert int(writer.stdout) == 50
    wait_until(lambda: len(steps_seen(tmp_path)) >= total, timeout=30, what="the polling watcher")
    out, err = stop(w)
    assert "polling" in err
    check_exactly_once(steps_seen(tmp_path), total)
