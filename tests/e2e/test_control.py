"""The control channel's in-process half (issue 30, protocol v1 in
docs/python.md "Control channel"): real training processes started with
TRAINWATCH_CONTROL pointing at a request file this test appends to, their
replies in PATH.ack, their checkpoints, learning rates and logs; stack
dumps on TRAINWATCH_STACK_SIGNAL in the JSON log, the text log and on
stderr; a 4-rank job hung in a collective (hang_ranks.py)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import BUILD

PYTHON = "/usr/bin/python3"
HERE = Path(__file__).resolve().parent


def py_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BUILD / "python")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "TRAINWATCH_CONTROL",
              "TRAINWATCH_STACK_SIGNAL", "TRAINWATCH_CHECKPOINT_DIR"):
        env.pop(k, None)
    if os.environ.get("TW_PY_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["TW_PY_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env.update(extra or {})
    return env


def wait_for(predicate, timeout=20, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


class Channel:
    """The supervisor's side: a private directory, the request file (0600),
    requests appended one write() each, replies read from PATH.ack."""

    def __init__(self, tmp_path):
        self.dir = tmp_path / "ctl"
        self.dir.mkdir(mode=0o700)
        self.path = self.dir / "requests"
        self.path.touch(mode=0o600)
        self.ack = Path(str(self.path) + ".ack")
        self.next_id = 1

    def send(self, action, at_step=None, time_=None, **fields):
        request = {"id": self.next_id, "action": action, "alert": "TestAlert",
                   "time": time.time() if time_ is None else time_, **fields}
        if at_step is not None:
            request["at_step"] = at_step
        self.next_id += 1
        self.raw(json.dumps(request) + "\n")
        return request["id"]

    def raw(self, text):
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def replies(self):
        if not self.ack.exists():
            return []
        return [json.loads(line) for line in self.ack.read_text().splitlines() if line.strip()]

    def hellos(self):
        return [r for r in self.replies() if r.get("hello") == 1]

    def answers(self):
        return [r for r in self.replies() if "hello" not in r]

    def env(self):
        return {"TRAINWATCH_CONTROL": str(self.path)}


class Trainer:
    """control_trainer.py in tmp_path, holding at --wait-file until go()."""

    def __init__(self, tmp_path, channel, *args, env=None):
        self.cwd = tmp_path
        self.channel = channel
        self.go_file = tmp_path / "go"
        extra = dict(channel.env() if channel else {}, **(env or {}))
        self.proc = subprocess.Popen([PYTHON, str(HERE / "control_trainer.py"), "--wait-file", str(self.go_file),
                                      *args], cwd=tmp_path, env=py_env(extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def wait_hello(self):
        return wait_for(self.channel.hellos, what="the hello line")

    def go(self):
        self.go_file.touch()

    def finish(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
        self.stderr = err
        return json.loads(out.strip().splitlines()[-1])

    def text_log(self):
        return (self.cwd / "logs" / "train.log").read_text()

    def json_log(self):
        return [json.loads(line) for line in (self.cwd / "logs" / "train.jsonl").read_text().splitlines()]


def run_trainer(tmp_path, requests, *args, env=None):
    """Starts the trainer, sends requests (a list of send() kwargs) after
    its hello, lets it run; returns (summary, channel, trainer)."""
    ch = Channel(tmp_path)
    t = Trainer(tmp_path, ch, *args, env=env)
    t.wait_hello()
    for r in requests:
        ch.send(**r)
    t.go()
    return t.finish(), ch, t


def control_records(trainer):
    return [r["trainwatch"] for r in trainer.json_log() if r["message"].startswith("control:")]


def lr_at(summary, step):
    return summary["lr"][str(step)]


@pytest.fixture(autouse=True)
def built():
    if not list((BUILD / "python" / "trainwatch").glob("_native*.so")):
        pytest.fail(f"{BUILD}/python/trainwatch/_native*.so is not built (run make build)")


# ---- hello ----------------------------------------------------------------------------------------


def test_the_hello_names_the_pid_rank_and_stack_signal(tmp_path):
    ch = Channel(tmp_path)
    t = Trainer(tmp_path, ch, "--steps", "3", env={"RANK": "3", "WORLD_SIZE": "4"})
    hello = t.wait_hello()
    t.go()
    t.finish()
    assert len(hello) == 1
    assert hello[0]["pid"] == t.proc.pid and hello[0]["rank"] == 3 and hello[0]["stack_signal"] == 12
    assert abs(hello[0]["time"] - time.time()) < 60
    assert oct(os.stat(ch.ack).st_mode & 0o777) == "0o600"


def test_without_trainwatch_control_nothing_is_read_or_written(tmp_path):
    t = Trainer(tmp_path, None, "--steps", "20")
    t.go()
    summary = t.finish()
    assert summary["steps_run"] == 20 and summary["counts"] is None
    assert not list(tmp_path.glob("**/*.ack")) and not (tmp_path / "checkpoints").exists()


def test_a_missing_request_file_is_said_once_and_training_goes_on(tmp_path):
    t = Trainer(tmp_path, None, "--steps", "20", env={"TRAINWATCH_CONTROL": str(tmp_path / "gone" / "requests")})
    t.go()
    summary = t.finish()
    assert summary["steps_run"] == 20
    assert summary["errors"] == {"open": 1, "reply": 1}  # the hello had nowhere to go
    assert t.stderr.count("control channel's open failed") == 1 and "Traceback" not in t.stderr


# ---- actions --------------------------------------------------------------------------------------


def test_checkpoint_is_saved_at_the_requested_step(tmp_path):
    summary, ch, t = run_trainer(tmp_path, [{"action": "checkpoint", "at_step": 12}], "--steps", "40")
    assert (tmp_path / "checkpoints" / "step12.ckpt").read_text() == "12"
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step12.ckpt"]
    [reply] = ch.answers()
    assert reply == {"id": 1, "pid": t.proc.pid, "rank": 0, "action": "checkpoint", "result": "done", "step": 12,
                     "detail": "saved checkpoints/step12.ckpt"}
    assert summary["steps_run"] == 40
    [rec] = control_records(t)
    assert rec["action"] == "checkpoint" and rec["result"] == "done" and rec["alert"] == "TestAlert"


def test_a_checkpoint_without_at_step_is_taken_at_the_next_step_boundary(tmp_path):
    summary, ch, t = run_trainer(tmp_path, [{"action": "checkpoint"}], "--steps", "5")
    assert ch.answers()[0]["step"] == 1 and (tmp_path / "checkpoints" / "step1.ckpt").exists()


@pytest.mark.parametrize("optimizer", ["paddle", "scheduler", "torch"])
def test_lr_factor_scales_the_learning_rate_from_the_requested_step(tmp_path, optimizer):
    summary, ch, t = run_trainer(tmp_path, [{"action": "lr", "factor": 0.5, "at_step": 20}], "--steps", "30",
                                 "--optimizer", optimizer)
    assert lr_at(summary, 20) == pytest.approx(0.1) and lr_at(summary, 21) == pytest.approx(0.05)
    assert lr_at(summary, 30) == pytest.approx(0.05)
    [reply] = ch.answers()
    assert reply["result"] == "done" and reply["step"] == 20 and reply["detail"] == "lr 0.1 -> 0.05"
    [rec] = control_records(t)
    assert rec["lr_old"] == pytest.approx(0.1) and rec["lr_new"] == pytest.approx(0.05)
    assert "control: lr (alert TestAlert) at step 20: done: lr 0.1 -> 0.05" in t.text_log()
    # the step records after it carry the new lr
    steps = {r["trainwatch"]["global_step"]: r["trainwatch"] for r in t.json_log() if r["message"].startswith("Step")}
    assert steps[20]["lr"] == pytest.approx(0.1) and steps[30]["lr"] == pytest.approx(0.05)


def test_torch_style_lr_scales_every_group_and_initial_lr(tmp_path):
    code = textwrap.dedent("""
        import sys; sys.path.insert(0, %r)
        from control_trainer import TorchLikeOptimizer
        from trainwatch.control import scale_lr
        opt = TorchLikeOptimizer(0.1)
        print(scale_lr(opt, 0.5), opt.param_groups)
    """ % str(HERE))
    r = subprocess.run([PYTHON, "-c", code], env=py_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("(0.1, 0.05) [{'lr': 0.05, 'initial_lr': 0.05}, "
                                "{'lr': 0.005, 'initial_lr': 0.005}]")


@pytest.mark.parametrize("mode", ["recorder", "timer", "callback"])
def test_stop_checkpoints_then_ends_the_loop(tmp_path, mode):
    summary, ch, t = run_trainer(tmp_path, [{"action": "stop", "at_step": 25}], "--steps", "200", "--mode", mode,
                                 "--steps-per-epoch", "1000")
    assert summary["steps_run"] == 25 and summary["should_stop"] is True
    assert (tmp_path / "checkpoints" / "step25.ckpt").read_text() == "25"
    [reply] = ch.answers()
    assert reply["action"] == "stop" and reply["result"] == "done" and reply["step"] == 25
    assert "after the checkpoint (saved checkpoints/step25.ckpt)" in reply["detail"]


def test_stop_in_hapi_fit_ends_mid_epoch(tmp_path):
    # hapi reads stop_training at the end of an epoch only: the callback ends
    # the epoch after this batch through num_iters, as fit(num_iters=) does
    summary, ch, t = run_trainer(tmp_path, [{"action": "stop", "at_step": 7}], "--steps", "200", "--mode",
                                 "callback", "--steps-per-epoch", "50")
    assert summary["steps_run"] == 7
    assert "train end" in t.text_log()


def test_requests_written_before_the_process_started_are_not_replayed(tmp_path):
    ch = Channel(tmp_path)
    ch.send("checkpoint", time_=time.time() - 3600)
    ch.send("stop", time_=time.time() - 3600)
    t = Trainer(tmp_path, ch, "--steps", "30")
    t.wait_hello()
    t.go()
    summary = t.finish()
    assert summary["steps_run"] == 30 and not (tmp_path / "checkpoints").exists()
    answers = ch.answers()
    assert [(a["id"], a["result"]) for a in answers] == [(1, "ignored"), (2, "ignored")]
    assert all(a["detail"] == "written before this process started" for a in answers)


def test_a_malformed_line_is_ignored_and_replied_to_and_the_next_request_still_works(tmp_path):
    ch = Channel(tmp_path)
    t = Trainer(tmp_path, ch, "--steps", "30")
    t.wait_hello()
    ch.raw("{this is not json\n")
    ch.raw('["a", "list"]\n')
    ch.send("reboot")
    ch.send("lr", factor=-1)
    ch.send("checkpoint", at_step=10)
    t.go()
    summary = t.finish()
    answers = ch.answers()
    assert [a["result"] for a in answers] == ["ignored"] * 4 + ["done"]
    assert answers[0]["id"] is None and answers[0]["detail"].startswith("malformed line")
    assert answers[2]["detail"] == "unknown action 'reboot'" and answers[3]["detail"] == "lr needs a factor > 0"
    assert summary["counts"] == {"ignored": 4, "done": 1} and summary["steps_run"] == 30


def test_each_id_is_acted_on_once(tmp_path):
    ch = Channel(tmp_path)
    t = Trainer(tmp_path, ch, "--steps", "30")
    t.wait_hello()
    line = json.dumps({"id": 7, "action": "lr", "factor": 0.5, "time": time.time(), "at_step": 5})
    ch.raw(line + "\n" + line + "\n")
    t.go()
    summary = t.finish()
    assert lr_at(summary, 30) == pytest.approx(0.05)
    assert [(a["id"], a["result"]) for a in ch.answers()] == [(7, "ignored"), (7, "done")]


def test_a_line_written_in_two_parts_is_read_whole(tmp_path):
    ch = Channel(tmp_path)
    t = Trainer(tmp_path, ch, "--steps", "400", "--step-seconds", "0.005")
    t.wait_hello()
    line = json.dumps({"id": 1, "action": "checkpoint", "time": time.time()}) + "\n"
    ch.raw(line[:20])
    t.go()
    time.sleep(0.3)
    ch.raw(line[20:])
    t.finish()
    [reply] = ch.answers()
    assert reply["result"] == "done" and reply["step"] > 1


def test_a_failing_save_replies_failed_and_the_loop_goes_on(tmp_path):
    summary, ch, t = run_trainer(tmp_path, [{"action": "checkpoint", "at_step": 10},
                                            {"action": "checkpoint", "at_step": 20}], "--steps", "40", "--fail-save")
    assert summary["steps_run"] == 40 and summary["errors"] == {"checkpoint": 2}
    answers = ch.answers()
    assert [(a["result"], a["step"]) for a in answers] == [("failed", 10), ("failed", 20)]
    assert answers[0]["detail"] == "OSError: [Errno 28] No space left on device: 'checkpoints/step10'"
    assert len(control_records(t)) == 2 and "Traceback" not in t.stderr


def test_stop_with_a_failing_save_still_stops_and_says_why(tmp_path):
    summary, ch, t = run_trainer(tmp_path, [{"action": "stop", "at_step": 5}], "--steps", "40", "--fail-save")
    assert summary["steps_run"] == 5
    [reply] = ch.answers()
    assert reply["result"] == "done" and "the checkpoint failed: OSError" in reply["detail"]


def test_a_request_without_a_save_function_is_ignored_with_the_reason(tmp_path):
    script = tmp_path / "nosave.py"
    script.write_text(textwrap.dedent("""
        import time, trainwatch
        rec = trainwatch.StepRecorder(None, metrics=False)
        for _ in range(200):
            time.sleep(0.002)
            rec.record(0.001, 0.0)
    """))
    ch = Channel(tmp_path)
    proc = subprocess.Popen([PYTHON, str(script)], cwd=tmp_path, env=py_env(ch.env()), stderr=subprocess.PIPE,
                            text=True)
    wait_for(ch.hellos, what="the hello line")
    ch.send("checkpoint")
    ch.send("lr", factor=0.5)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    answers = {a["id"]: a for a in ch.answers()}
    assert answers[1]["detail"] == "no save function and the model has no save()"
    assert answers[2]["detail"].startswith("no optimizer") and answers[2]["result"] == "ignored"


# ---- stack dumps ----------------------------------------------------------------------------------


def blocked_trainer(tmp_path, *args, env=None):
    ch = Channel(tmp_path)
    marker = tmp_path / "blocked"
    t = Trainer(tmp_path, ch, "--steps", "8", "--block-at", "4", "--block-marker", str(marker), "--block-seconds",
                "2", *args, env=env)
    hello = t.wait_hello()
    t.go()
    pid = int(wait_for(lambda: marker.exists() and marker.read_text(), what="all_reduce"))
    assert pid == t.proc.pid
    return ch, t, hello[0]


def test_a_dump_is_one_record_with_the_stacks_in_the_json_and_text_logs(tmp_path):
    ch, t, hello = blocked_trainer(tmp_path)
    os.kill(t.proc.pid, hello["stack_signal"])
    t.finish()
    dumps = [r for r in t.json_log() if r["message"] == "stack dump (signal SIGUSR2)"]
    assert len(dumps) == 1 and dumps[0]["log.level"] == "WARNING"
    stacks = dumps[0]["trainwatch"]["stacks"]
    assert stacks.startswith("Current thread 0x") and "(most recent call first):" in stacks
    assert 'control_trainer.py", line' in stacks and " in all_reduce\n" in stacks
    text = t.text_log().splitlines()
    i = next(n for n, line in enumerate(text) if line.endswith("stack dump (signal SIGUSR2)"))
    assert "| WARNING |" in text[i] and text[i + 1].startswith("Current thread 0x")
    assert any(line.endswith(" in all_reduce") for line in text[i + 1:i + 6])
    assert sum(line.endswith("stack dump (signal SIGUSR2)") for line in text) == 1


def test_without_a_logger_the_dump_goes_to_stderr_under_a_header(tmp_path):
    ch, t, hello = blocked_trainer(tmp_path, "--no-logger", env={"RANK": "1", "WORLD_SIZE": "2"})
    os.kill(t.proc.pid, signal.SIGUSR2)
    t.finish()
    lines = t.stderr.splitlines()
    i = lines.index(f"trainwatch: stack dump rank=1 pid={t.proc.pid} (signal SIGUSR2)")
    assert lines[i + 1].startswith("Current thread 0x") and lines[i + 2].endswith(" in all_reduce")


def test_trainwatch_stack_signal_picks_the_signal(tmp_path):
    ch, t, hello = blocked_trainer(tmp_path, env={"TRAINWATCH_STACK_SIGNAL": str(int(signal.SIGUSR1))})
    assert hello["stack_signal"] == int(signal.SIGUSR1)
    os.kill(t.proc.pid, signal.SIGUSR1)
    t.finish()
    assert "stack dump (signal SIGUSR1)" in t.text_log()


def dump_script(tmp_path, body, env):
    script = tmp_path / "dump.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen([PYTHON, str(script)], cwd=tmp_path, env=py_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_rank_stuck_in_c_code_holding_the_gil_still_gets_its_dump_out(tmp_path):
    # ctypes.PyDLL keeps the GIL through the call: no Python thread could run
    ch = Channel(tmp_path)
    # the signal goes to a helper thread (the main one blocks it), so the
    # sleep holding the GIL is not cut short by it
    proc = dump_script(tmp_path, """
        import ctypes, signal, threading, time, trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", json_file="train.jsonl", console_level=None)
        libc = ctypes.PyDLL(None)
        threading.Thread(target=time.sleep, args=(10,), daemon=True).start()
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
        def all_reduce():
            open("blocked", "w").close()
            libc.sleep(3)
        all_reduce()
    """, ch.env())
    wait_for(lambda: (tmp_path / "blocked").exists(), what="the blocking call")
    time.sleep(0.1)
    os.kill(proc.pid, signal.SIGUSR2)
    dump = wait_for(lambda: [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()
                             if "stacks" in line], timeout=2.5, what="the dump while the GIL is held")
    assert proc.poll() is None, "the dump was written after the call returned"
    assert " in all_reduce\n" in dump[0]["trainwatch"]["stacks"]
    assert proc.wait(timeout=30) == 0


def test_a_signal_handler_of_the_script_still_runs_after_the_dump(tmp_path):
    ch = Channel(tmp_path)
    proc = dump_script(tmp_path, """
        import signal, time
        got = []
        signal.signal(signal.SIGUSR2, lambda *a: got.append(1))
        import trainwatch
        open("ready", "w").close()
        deadline = time.time() + 10
        while not got and time.time() < deadline:
            time.sleep(0.01)
        print("handler ran" if got else "handler did not run")
    """, ch.env())
    wait_for(lambda: (tmp_path / "ready").exists(), what="the script")
    os.kill(proc.pid, signal.SIGUSR2)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "handler ran", err
    assert "trainwatch: stack dump rank=0" in err


def test_a_forked_child_says_no_hello_acts_on_nothing_and_survives_a_signal(tmp_path):
    ch = Channel(tmp_path)
    proc = dump_script(tmp_path, """
        import os, sys, time, trainwatch
        def save(path):
            open(path.replace("/", "_") + f".{os.getpid()}", "w").close()
        rec = trainwatch.StepRecorder(None, metrics=False, save=save)
        while not os.path.exists("go"):
            time.sleep(0.01)
        rec.record(0.0, 0.0)           # reads the request (due at step 50)
        pid = os.fork()
        if pid == 0:
            for _ in range(100):
                rec.record(0.0, 0.0)
            with open("child_ready.tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename("child_ready.tmp", "child_ready")
            time.sleep(1.5)
            os._exit(0 if not rec.should_stop else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, ch.env())
    wait_for(ch.hellos, what="the hello line")
    ch.send("stop", at_step=50)
    (tmp_path / "go").touch()
    child = int(wait_for(lambda: (tmp_path / "child_ready").exists() and (tmp_path / "child_ready").read_text(),
                         what="the child"))
    os.kill(child, signal.SIGUSR2)  # its dump goes to stderr, and it lives on
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "0", err
    # the child's own faulthandler text on its stderr, not the parent's reader
    # writing it under the parent's header
    assert "Current thread 0x" in err and "trainwatch: stack dump" not in err
    assert len(ch.hellos()) == 1 and ch.answers() == []
    assert not list(tmp_path.glob("checkpoints_step*"))


# ---- a hung 4-rank job ----------------------------------------------------------------------------


def test_hang_ranks_dumps_show_load_batch_on_the_hung_rank_and_all_reduce_on_the_others(tmp_path):
    ch = Channel(tmp_path)
    launcher = subprocess.Popen([PYTHON, str(HERE / "hang_ranks.py"), "--log-dir", "logs", "--hang-rank", "2",
                                 "--hang-at", "20"], cwd=tmp_path, env=py_env(ch.env()), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        hellos = wait_for(lambda: len(ch.hellos()) == 4 and ch.hellos(), what="4 hellos")
        assert sorted(h["rank"] for h in hellos) == [0, 1, 2, 3]
        # the others wait at step 20's barrier (rank 2 never reaches it)
        wait_for(lambda: len(list((tmp_path / "logs" / "barrier").glob("step20.rank*"))) == 3, what="the hang")
        time.sleep(0.2)
        for h in hellos:
            os.kill(h["pid"], h["stack_signal"])
        logs = tmp_path / "logs"

        def dumps(rank):
            p = logs / f"rank{rank}.jsonl"
            return [json.loads(line)["trainwatch"]["stacks"] for line in p.read_text().splitlines()
                    if '"stacks"' in line] if p.exists() else []

        for h in hellos:
            [stacks] = wait_for(lambda: dumps(h["rank"]), what=f"rank {h['rank']}'s dump")
            want, not_want = ("load_batch", "all_reduce") if h["rank"] == 2 else ("all_reduce", "load_batch")
            assert f" in {want}\n" in stacks and f" in {not_want}\n" not in stacks, (h, stacks)
            text = (logs / f"rank{h['rank']}.log").read_text()
            assert text.count("stack dump (signal SIGUSR2)") == 1 and f" in {want}" in text
        time.sleep(0.2)
        assert all(len(dumps(r)) == 1 for r in range(4))
    finally:
        launcher.send_signal(signal.SIGTERM)
        out, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 128 + signal.SIGTERM, err
    for h in ch.hellos():
        with pytest.raises(ProcessLookupError):
            os.kill(h["pid"], 0)
