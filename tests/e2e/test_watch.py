"""`trainwatch watch` against logs that rotate under it: by rename and by
copy-truncate, mixed, over a thousand times, with and without kill -9 of the
watcher; every line must come out exactly once. The torture cases also keep
more than 64 generations, write in 4 KiB blocks that split lines, write
multi-line records (OLMo metric blocks, tracebacks), rewrite a log in place
and reach one file by two names."""
import gzip
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import CORPUS, binary, run
from servers import free_port, http, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def watcher(tmp_path, *args):
    return subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--state",
                             str(tmp_path / "state"), "--records", str(tmp_path / "records.jsonl"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records_seen(tmp_path):
    path = tmp_path / "records.jsonl"
    if not path.exists():
        return []
    # whole lines only: the writer may be mid-record; the record is the ECS envelope's "trainwatch"
    return [json.loads(line)["trainwatch"] for line in path.read_text().split("\n")[:-1]]


def steps_seen(tmp_path):
    return [r["global_step"] for r in records_seen(tmp_path) if r["kind"] == "step"]


def writer(log, total, every, seed, pause, keep, *options, wait=True):
    cmd = [sys.executable, os.path.join(HERE, "rotate_writer.py"), str(log), str(total), str(every), str(seed),
           str(pause), str(keep), *options]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def started(tmp_path, name="train.log"):
    wait_until(lambda: name in (tmp_path / "state").read_text(), timeout=30, what="the watcher to start")


def watching_empty_log(tmp_path):
    """An empty train.log and a watcher that has started on it, from its start."""
    log = tmp_path / "train.log"
    log.write_text("")
    w = watcher(tmp_path, "--from-start", str(log))
    started(tmp_path)
    return log, w


def steps_reach(tmp_path, count, what, timeout=30):
    wait_until(lambda: len(steps_seen(tmp_path)) >= count or None, timeout=timeout, what=what)


def kill_while(w, proc, restart, rng, low=0.2, high=2.0):
    """kill -9 the watcher w at random moments while proc runs, starting it
    again each time; returns the last watcher and the number of kills."""
    kills = 0
    while proc.poll() is None:
        time.sleep(rng.uniform(low, high))
        w.kill()  # SIGKILL: no chance to save anything
        w.wait()
        kills += 1
        w = restart()
    return w, kills


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
    total, every = 16000, 16
    done = writer(log, total, every, 1, 0.001, 8)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 1000
    steps_reach(tmp_path, total, "the watcher to catch up", timeout=60)
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
    total, every = 4000, 10
    # the watcher first: rotated generations already there when it starts
    # are history, not news, so it must be following before the first rotation
    w = watcher(tmp_path, "--from-start", str(log))
    started(tmp_path)
    proc = writer(log, total, every, 7, 0.025, 16, wait=False)
    w, kills = kill_while(w, proc, lambda: watcher(tmp_path, "--from-start", str(log)), random.Random(3), 0.2, 1.2)
    assert int(proc.stdout.read()) >= 400
    wait_until(lambda: len(set(steps_seen(tmp_path))) >= total, timeout=60, what="the watcher to catch up")
    time.sleep(1.5)
    stop(w)
    assert kills >= 5
    check_exactly_once(steps_seen(tmp_path), total)


def test_glob_picks_up_new_rank_files_and_serves_metrics(tmp_path):
    logdir = tmp_path / "log"
    logdir.mkdir()
    port = free_port()
    err_path = tmp_path / "watch.err"
    with open(err_path, "w") as err_file:
        w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", f"127.0.0.1:{port}", "--run-name",
                              "fleet", str(logdir / "workerlog.*")], stdout=subprocess.PIPE, stderr=err_file, text=True)
    wait_until(lambda: http(f"http://127.0.0.1:{port}/-/healthy")[0] == 200 or None, what="the watcher's server")
    # files there before the follower's first scan are read from their end: wait for the scan
    wait_until(lambda: "workerlog.*: no file matches yet" in err_path.read_text() or None, what="the first scan")
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
    assert got == {f'trainwatch_train_step{{run="fleet",rank="{r}"}}': "50" for r in range(3)}
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
    steps_reach(tmp_path, total, "the polling watcher")
    out, err = stop(w)
    assert "polling" in err
    check_exactly_once(steps_seen(tmp_path), total)


def test_more_than_64_generations_with_kill_9(tmp_path):
    # 200 rotations, every generation kept: every one listed, sorted, and
    # remembered as read across restarts (a listing cut at 64 entries read
    # old generations again or missed new ones). None is deleted, so a
    # watcher that lags (kill -9 every 0.5-1.5 s on a loaded ASan run) can
    # always catch up: deletion under lag is test_rotation_torture's part.
    log, w = watching_empty_log(tmp_path)
    # tracebacks too, written in 1 KiB blocks: one cut by a copy-truncate goes
    # on in the truncated file, and a restart inside one reads it again whole
    total = 2000
    proc = writer(log, total, 10, 5, 0.02, 200, "--format", "traceback", "--chunk", "1024", wait=False)
    w, kills = kill_while(w, proc, lambda: watcher(tmp_path, "--from-start", str(log)), random.Random(5), 0.5, 1.5)
    rotations, tracebacks = map(int, proc.stdout.read().split())
    assert rotations == 200 and tracebacks == total // 7
    assert len(list(tmp_path.glob("train.log.*"))) == 200
    try:
        wait_until(lambda: len(set(steps_seen(tmp_path))) >= total, timeout=60, what="the watcher to catch up")
    except AssertionError:
        check_exactly_once(steps_seen(tmp_path), total)  # says which steps are missing
        raise
    time.sleep(1)
    stop(w)
    assert kills >= 2
    check_exactly_once(steps_seen(tmp_path), total)
    failures = [r["message"] for r in records_seen(tmp_path) if r["kind"] == "event" and r["event"] == "exception"]
    assert sorted(failures) == sorted(f"RuntimeError: failure {n}" for n in range(7, total + 1, 7))


def test_block_buffered_writer_copy_truncate(tmp_path):
    # 4 KiB writes split lines; a copy-truncate then leaves the copy inside a
    # line whose rest is the first bytes of the truncated file: one line, not
    # two damaged ones
    log, w = watching_empty_log(tmp_path)
    total = 3000
    done = writer(log, total, 75, 2, 0.02, 8, "--chunk", "4096", "--rotate", "copytruncate")
    assert done.returncode == 0 and int(done.stdout) == 40
    steps_reach(tmp_path, total, "the watcher to catch up", timeout=60)
    time.sleep(0.5)
    stop(w)
    steps = [r for r in records_seen(tmp_path) if r["kind"] == "step"]
    damaged = [r for r in steps if abs(r["loss"] - 1.0 / r["global_step"]) > 1e-6]
    assert not damaged, f"{len(damaged)} damaged records, first {damaged[:2]}"
    check_exactly_once([r["global_step"] for r in steps], total)


def step_lines(first, end):
    return "".join(f"[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.001000, "
                   f"loss: {1.0 / n:.6f}\n" for n in range(first, end))


def paused(w):
    """SIGSTOP the watcher for the block: the writer runs ahead of it, as it
    does on a loaded machine, at the exact point a test needs."""
    class Pause:
        def __enter__(self):
            w.send_signal(signal.SIGSTOP)

        def __exit__(self, *exc):
            w.send_signal(signal.SIGCONT)
    return Pause()


def two_rotations_behind(tmp_path, begin_copy):
    """The watcher reads steps 1-10, then falls two rotations behind: a
    rename (steps 11-20 in the new file), then the next rotation's copy,
    begun by begin_copy(log) and not truncated yet. Returns the log and the
    watcher once it has read steps 1-20."""
    log = tmp_path / "train.log"
    log.write_text(step_lines(1, 11))
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: len(steps_seen(tmp_path)) == 10 or None, timeout=30, what="the first generation")
    with paused(w):
        os.replace(log, f"{log}.1")
        log.write_text(step_lines(11, 21))
        os.replace(f"{log}.1", f"{log}.2")
        begin_copy(log)
    steps_reach(tmp_path, 20, "the renamed generation")
    time.sleep(0.5)
    return log, w


def copy_truncate(log, then=""):
    """logrotate's copytruncate: log copied to log.1, truncated, then `then` written."""
    shutil.copyfile(log, f"{log}.1")
    os.truncate(log, 0)
    with open(log, "a") as f:
        f.write(then)


def all_once(tmp_path, w, total, what):
    steps_reach(tmp_path, total, what)
    time.sleep(0.5)
    stop(w)
    check_exactly_once(steps_seen(tmp_path), total)


def test_copy_of_the_next_generation_is_read_once(tmp_path):
    # The copy (train.log.1) holds the lines of the file now at the name:
    # read as a generation of its own, its lines came out twice.
    log, w = two_rotations_behind(tmp_path, lambda log: shutil.copyfile(log, f"{log}.1"))
    os.truncate(log, 0)
    with open(log, "a") as f:
        f.write(step_lines(21, 31))
    all_once(tmp_path, w, 30, "the truncated file")


def test_copy_seen_empty_is_read_when_written(tmp_path):
    # The copy is seen just created, empty: taken for a generation read (an
    # empty one), the lines written into it afterwards were never read (here
    # 21-25, which the watcher never saw at the name).
    log, w = two_rotations_behind(tmp_path, lambda log: open(f"{log}.1", "wb").close())
    with paused(w):
        with open(log, "a") as f:
            f.write(step_lines(21, 26))
        with open(f"{log}.1", "r+b") as copy:  # the copy written, in the same file
            copy.write(log.read_bytes())
        os.truncate(log, 0)
        with open(log, "a") as f:
            f.write(step_lines(26, 31))
    all_once(tmp_path, w, 30, "the copy's lines")


def test_only_rotation_names_are_generations(tmp_path):
    # workerlog.10 extends the name workerlog.1 but is another rank's log, and
    # workerlog.1.2.gz is a generation compressed: when workerlog.1 rotates,
    # neither is read as lines of it (both were: 6 steps too many, and gzip
    # bytes as lines)
    log = tmp_path / "workerlog.1"
    log.write_text(step_lines(1, 6))
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: len(steps_seen(tmp_path)) == 5 or None, timeout=30, what="the first generation")
    (tmp_path / "workerlog.10").write_text(step_lines(100, 106))
    with gzip.open(tmp_path / "workerlog.1.2.gz", "wt") as compressed:
        compressed.write(step_lines(200, 300))
    os.replace(log, tmp_path / "workerlog.1.1")
    log.write_text(step_lines(6, 11))
    steps_reach(tmp_path, 10, "the second generation")
    time.sleep(0.5)
    out, err = stop(w)
    check_exactly_once(steps_seen(tmp_path), 10)
    assert "10 lines from 1 files (1 rotations" in err, err


@pytest.mark.parametrize("by_glob", [False, True], ids=["path", "glob"])
def test_restart_while_the_name_is_missing(tmp_path, by_glob):
    # Killed, then started again (twice) in the moment a rename rotation has
    # taken the name away and not created it again: the position saved in
    # the renamed generation must be used when the name comes back (it was
    # not, and the second start saved a state without it; with a glob, the
    # state lost it at the first start).
    log = tmp_path / "train.log"
    log.write_text(step_lines(1, 11))
    target = str(tmp_path / "*.log") if by_glob else str(log)
    waiting = "no file matches yet" if by_glob else "does not exist yet"
    w = watcher(tmp_path, "--from-start", target)
    wait_until(lambda: len(steps_seen(tmp_path)) == 10 or None, timeout=30, what="the first lines")
    time.sleep(0.5)  # saved
    w.kill()
    w.wait()
    with open(log, "a") as f:
        f.write(step_lines(11, 16))  # unseen
    os.replace(log, f"{log}.1")
    for _ in range(2):
        w = watcher(tmp_path, "--from-start", target)
        wait_until(lambda: waiting in w.stderr.readline() or None, timeout=30, what="the wait")
        time.sleep(0.3)
        w.kill()
        w.wait()
    w = watcher(tmp_path, "--from-start", target)
    wait_until(lambda: waiting in w.stderr.readline() or None, timeout=30, what="the wait")
    log.write_text(step_lines(16, 21))
    all_once(tmp_path, w, 20, "the rest")


def test_generation_beginning_as_the_file_does_is_read_in_order(tmp_path):
    # A copy-truncate the watcher did not see, and the writer begins the
    # truncated file with the banner the copy begins with too: the first
    # bytes read (the banner) must not make the copy pass for a copy of the
    # file at the name (it did: steps 6-10 came before 1-5).
    log, w = watching_empty_log(tmp_path)
    banner = "==== training resumed ====\n"
    with paused(w):
        log.write_text(banner + step_lines(1, 6))
        copy_truncate(log)
        time.sleep(0.05)
        with open(log, "a") as f:
            f.write(banner)
    time.sleep(1)
    with open(log, "a") as f:
        f.write(step_lines(6, 11))
    steps_reach(tmp_path, 10, "the first ten steps")
    os.replace(f"{log}.1", f"{log}.2")
    copy_truncate(log, step_lines(11, 16))
    all_once(tmp_path, w, 15, "the rest")
    assert steps_seen(tmp_path) == list(range(1, 16))


def test_a_log_new_to_the_state_keeps_its_history_out(tmp_path):
    # Restarted with a state that knows train.log, the watcher is also given
    # eval.log, whose rotated generation eval.log.1 is already there: that
    # is history, as it is without a state. It was read as news, at eval.log's
    # first rotation: 5 steps too many.
    log, other = tmp_path / "train.log", tmp_path / "eval.log"
    log.write_text(step_lines(1, 6))
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: len(steps_seen(tmp_path)) == 5 or None, timeout=30, what="the first lines")
    stop(w)
    (tmp_path / "eval.log.1").write_text(step_lines(100, 105))
    other.write_text(step_lines(6, 11))
    w = watcher(tmp_path, "--from-start", str(log), str(other))
    steps_reach(tmp_path, 10, "eval.log")
    os.replace(f"{other}.1", f"{other}.2")
    os.replace(other, f"{other}.1")
    other.write_text(step_lines(11, 16))
    all_once(tmp_path, w, 15, "eval.log rotated")


def test_olmo_blocks_across_kill_9(tmp_path):
    # multi-line records across restarts: the state must point at the start
    # of the open block, and the graceful stop at the end delivers the last
    # step (an OLMo block ends only when the next one starts)
    log, w = watching_empty_log(tmp_path)
    total = 400
    proc = writer(log, total, 40, 4, 0.3, 8, "--format", "olmo", "--chunk", "700", wait=False)
    w, kills = kill_while(w, proc, lambda: watcher(tmp_path, "--from-start", str(log)), random.Random(4), 0.2, 0.6)
    assert int(proc.stdout.read()) == 10
    wait_until(lambda: len(set(steps_seen(tmp_path))) >= total - 1, timeout=60, what="the watcher to catch up")
    time.sleep(0.5)
    stop(w)
    assert kills >= 5
    check_exactly_once(steps_seen(tmp_path), total)


def test_traceback_and_olmo_block_cut_by_restarts(tmp_path):
    log = tmp_path / "train.log"
    head = ("Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    main()\n"
            "  File \"train.py\", line 40, in main\n")
    tail = "    raise RuntimeError(\"failure\")\nRuntimeError: failure at step 40\n"
    log.write_text("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: 1, lr: 0.1, loss: 0.5\n" + head)
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: steps_seen(tmp_path) == [1] or None, timeout=10, what="the first line")
    time.sleep(0.5)  # saved with the traceback open
    w.kill()
    w.wait()
    with open(log, "a") as f:
        f.write(tail)
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: any(r["kind"] == "event" for r in records_seen(tmp_path)) or None, timeout=10,
               what="the exception")
    stop(w)
    events = [r for r in records_seen(tmp_path) if r["kind"] == "event"]
    assert [e["event"] for e in events] == ["exception"]
    assert "RuntimeError: failure at step 40" in events[0]["message"]

    # an OLMo log: stopped gracefully, the watcher delivers the last step;
    # started again, it goes on without doubling it
    olmo = tmp_path / "olmo.log"
    block = ("2025-12-27 22:14:36.270\thost:0\tolmo.train:990\tINFO\t[step={n}/100,epoch=0]\n"
             "    train/CrossEntropyLoss={loss}\n")
    olmo.write_text("".join(block.format(n=n, loss=1.0 / n) for n in (1, 2, 3)))
    (tmp_path / "state").unlink()
    (tmp_path / "records.jsonl").unlink()
    w = watcher(tmp_path, "--from-start", str(olmo))
    wait_until(lambda: steps_seen(tmp_path) == [1, 2] or None, timeout=10, what="two steps")
    time.sleep(0.3)
    stop(w)
    assert steps_seen(tmp_path) == [1, 2, 3]
    with open(olmo, "a") as f:
        f.write(block.format(n=4, loss=0.25) + "    optim/total_grad_norm=1.0\n")
    w = watcher(tmp_path, "--from-start", str(olmo))
    wait_until(lambda: (tmp_path / "state").stat().st_size > 0 or None, what="the state")
    time.sleep(0.5)
    stop(w)
    assert steps_seen(tmp_path) == [1, 2, 3, 4]


def test_same_file_under_two_names_is_read_once(tmp_path):
    logdir = tmp_path / "log"
    logdir.mkdir()
    target = logdir / "run1.log"
    target.write_text("".join(f"[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.1, "
                              f"loss: {1.0 / n:.4f}\n" for n in range(1, 11)))
    os.symlink("run1.log", logdir / "latest.log")  # matched by the glob too
    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--records",
                          str(tmp_path / "records.jsonl"), "--from-start", str(logdir / "*.log*"), str(target),
                          f"{logdir}/./run1.log"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    steps_reach(tmp_path, 10, "the steps", timeout=10)
    with open(target, "a") as f:
        f.write("[2024/03/09 15:15:34] ppocr INFO: epoch: [1/9], global_step: 11, lr: 0.1, loss: 0.09\n")
    wait_until(lambda: 11 in steps_seen(tmp_path) or None, timeout=10, what="step 11")
    time.sleep(0.5)
    out, err = stop(w)
    check_exactly_once(steps_seen(tmp_path), 11)
    assert err.count("the same file as") == 2, err
    assert "restart" not in out


def test_log_rewritten_in_place_while_down(tmp_path):
    # the same inode rewritten with `>`, starting with the same 300-byte
    # banner: the saved offset is not a position in the new content
    log = tmp_path / "train.log"
    banner = "".join(f"# config {k:03d}: {'x' * 50}\n" for k in range(6))
    line = "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.1, loss: 0.5\n"
    log.write_text(banner + "".join(line.format(n=n) for n in range(1, 51)))
    w = watcher(tmp_path, "--from-start", str(log))
    steps_reach(tmp_path, 50, "50 steps", timeout=10)
    time.sleep(0.3)
    stop(w)
    ino = log.stat().st_ino
    with open(log, "w") as f:  # O_TRUNC: the same inode
        f.write(banner + "".join(line.format(n=n) for n in range(1001, 1151)))
    assert log.stat().st_ino == ino
    w = watcher(tmp_path, "--from-start", str(log))
    steps_reach(tmp_path, 200, "the new content", timeout=10)
    time.sleep(0.3)
    stop(w)
    assert steps_seen(tmp_path) == list(range(1, 51)) + list(range(1001, 1151))


def test_records_write_error_keeps_the_state_before_it(tmp_path):
    # a file-size limit makes the records file "full" after 20 KB (as a full
    # disk would): the state must stay before the records not written, so a
    # restart with room finds every record, once
    log = tmp_path / "train.log"
    total = 300
    log.write_text("".join(f"[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.1, "
                           f"loss: {1.0 / n:.6f}\n" for n in range(1, total + 1)))

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))

    full = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--state",
                             str(tmp_path / "state"), "--records", str(tmp_path / "records.jsonl"), "--from-start",
                             str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=small_disk)
    time.sleep(1.5)
    out, err = stop(full)
    assert full.returncode == 2, err
    assert err.count("no more records are written") == 1, err
    written = (tmp_path / "records.jsonl").stat().st_size
    assert 0 < written <= 20000
    sink = int((tmp_path / "state").read_text().split("\n")[1].split()[1])
    assert sink <= written
    w = watcher(tmp_path, str(log))
    steps_reach(tmp_path, total, "the records after a restart", timeout=10)
    time.sleep(0.3)
    stop(w)
    check_exactly_once(steps_seen(tmp_path), total)


def test_state_that_cannot_be_saved_is_said_once(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    # stderr is a pipe: the file-size limit below applies to regular files only
    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--state",
                          str(tmp_path / "state"), str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    started(tmp_path)
    # the disk fills up: no state file can be written any more
    resource.prlimit(w.pid, resource.RLIMIT_FSIZE, (40, resource.RLIM_INFINITY))
    with open(log, "a") as f:
        f.write("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: 1, lr: 0.1, loss: 0.5\n")
    time.sleep(2)
    assert not (tmp_path / "state.tmp").exists()
    assert " 0 0 0 " in (tmp_path / "state").read_text()  # still the position before the line
    resource.prlimit(w.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    wait_until(lambda: " 0 0 0 " not in (tmp_path / "state").read_text() or None, timeout=10, what="a save")
    out, err = stop(w)
    assert err.count("cannot be saved (File too large)") == 1, err
    assert err.count("saved again") == 1, err
    assert not (tmp_path / "state.tmp").exists()


def test_restart_inside_a_line_longer_than_1_mib(tmp_path):
    log = tmp_path / "train.log"
    line = "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.1, loss: 0.5\n"
    with open(log, "w") as f:
        f.write(line.format(n=1) + "x" * (1536 * 1024))
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: "lines_cut" or None, what="")
    wait_until(lambda: int((tmp_path / "state").read_text().split("\n")[2].split()[3]) > (1 << 20) or None,
               timeout=10, what="the state inside the long line")
    w.kill()
    w.wait()
    with open(log, "a") as f:
        f.write(" " + line.format(n=999) + line.format(n=2))
    w = watcher(tmp_path, "--from-start", str(log))
    wait_until(lambda: 2 in steps_seen(tmp_path) or None, timeout=10, what="step 2")
    stop(w)
    assert steps_seen(tmp_path) == [1, 2]


def test_fifo_is_refused_and_duration_kept(tmp_path):
    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([binary("trainwatch"), "watch", "--web.listen-address", "none", "--duration", "1",
                           str(fifo)], capture_output=True, text=True, timeout=30)
    assert "not a regular file" in done.stderr
    assert "lines from" in done.stderr  # the final report came


def test_missing_file_is_said_and_waited_for(tmp_path):
    log = tmp_path / "nothere.log"
    err_path = tmp_path / "err.txt"
    with open(err_path, "w") as err_file:
        w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--records",
                              str(tmp_path / "records.jsonl"), str(log)], stdout=subprocess.PIPE, stderr=err_file)
    wait_until(lambda: "does not exist yet" in err_path.read_text() or None, timeout=10, what="the warning")
    log.write_text("[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: 1, lr: 0.1, loss: 0.5\n")
    wait_until(lambda: steps_seen(tmp_path) == [1] or None, timeout=10, what="the file's line")
    stop(w)
    err = err_path.read_text()
    assert err.count("nothere.log: does not exist yet: waiting for it") == 1, err
    assert "nothere.log: appeared: following it" in err


def test_more_files_than_descriptors(tmp_path):
    # 600 files with 128 descriptors: the watcher takes the hard limit, then
    # closes the files idle longest and opens them again when they change
    logdir = tmp_path / "log"
    logdir.mkdir()
    count = 600
    line = "[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.1, loss: 0.5\n"
    for k in range(count):
        (logdir / f"worker.{k}.log").write_text(line.format(n=k * 10 + 1))

    def few_descriptors():
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--state",
                          str(tmp_path / "state"), "--records", str(tmp_path / "records.jsonl"), "--from-start",
                          str(logdir / "*.log")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=few_descriptors)
    steps_reach(tmp_path, count, "the first lines")
    for k in range(count):
        with open(logdir / f"worker.{k}.log", "a") as f:
            f.write(line.format(n=k * 10 + 2))
    steps_reach(tmp_path, 2 * count, "the second lines")
    time.sleep(0.5)
    out, err = stop(w)
    assert "not followed" not in err, err
    assert sorted(steps_seen(tmp_path)) == sorted(k * 10 + n for k in range(count) for n in (1, 2))
    assert f"from {count} files" in err


def test_records_are_ecs_lines_that_analyze_reads_back(tmp_path):
    """watch --records writes Elastic Common Schema lines (a log shipper
    sends them as they are); the record inside is analyze --records' own,
    and analyze reads the file back to the same records as the log."""
    log = CORPUS / "paddle-suites" / "ppdet-rtdetr-ssdd-1gpu.log"
    if not log.exists():
        pytest.skip(f"{log} is not there (the shared corpus)")
    records = tmp_path / "records.jsonl"
    w = subprocess.Popen([binary("trainwatch"), "watch", "--web.listen-address", "none", "--from-start", "--records",
                          str(records), "--duration", "3", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out, err = w.communicate(timeout=60)
    assert w.returncode in (0, 1), err
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert lines
    for line in lines:
        assert line["event.dataset"] == "trainwatch.record" and line["ecs.version"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["@timestamp"])
        assert line["log.level"] in ("info", "warn", "error") and line["message"]
        assert line["host.name"] == socket.gethostname() and line["process.pid"] == w.pid
        assert line["log.file.path"] == line["trainwatch"]["file"] == str(log)
    bare = run(["trainwatch", "analyze", "--records", log]).stdout.splitlines()
    assert [line["trainwatch"] for line in lines] == [json.loads(b) for b in bare]
    again = run(["trainwatch", "analyze", "--records", records]).stdout.splitlines()
    assert again == bare
