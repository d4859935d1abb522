"""What alerts do to the run (docs/actions.md): `run --on-alert` and rule
files' actions: sections with real processes. A plain training script
(act_trainer.py) pauses so trainwatch sees stalls; an alert Hung fires on
trainwatch_stalled. Checked: exec: commands get the alert in their
environment and no shell (hostile label values stay text), once per firing
and the cooldown, dry run, slow and failing commands that never hold up the
evaluation, signals to the ranks and not their data-loader workers, the
control channel's requests and the trainer's replies, the default stack
dump on a stall, the counters and the /alerts page, and what watch refuses."""
import json
import os
import pathlib
import re
import subprocess
import sys

from conftest import binary, run
from servers import http, wait_until

TRAINER = pathlib.Path(__file__).with_name("act_trainer.py")
HUNG = """groups:
  - name: actions-test
    rules:
      - alert: Hung
        expr: trainwatch_stalled > 0
        labels:
          severity: critical
          note: {note}
"""
FIRING = r'alert firing: \{alertname="Hung"'
RUN_NAME = "python3"  # the run's name: the command's
HOSTILE = "'$(touch PWNED); `touch PWNED2`; \"x\" && rm -rf ~ #'"


def rules(tmp_path, note="plain", extra=""):
    path = tmp_path / "hung.yml"
    path.write_text(HUNG.format(note=note) + extra)
    return path


def act_run(tmp_path, *options, trainer=(), timeout=120, rule_file=None, stdout=False):
    """`trainwatch run` of act_trainer.py with the Hung rule; returns (exit status, stderr, signals seen)
    and with stdout=True the command's output too."""
    signals = tmp_path / "signals.txt"
    signals.write_text("")
    rule_file = rule_file or rules(tmp_path)
    cmd = [binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0", "--web.linger", "0",
           "--no-default-rules", "--rules", str(rule_file), "--eval-interval", "0.2", "--stall-after", "0.8",
           *[str(o) for o in options], "--", sys.executable, str(TRAINER), "--signals", str(signals),
           *[str(t) for t in trainer]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    seen = signals.read_text().splitlines()
    return (p.returncode, p.stderr, seen, p.stdout) if stdout else (p.returncode, p.stderr, seen)


def action_lines(err, result=None):
    lines = [l for l in err.splitlines() if l.startswith("trainwatch run: action ") and " on " in l]
    return [l for l in lines if result is None or f": {result}" in l.split(" on ", 1)[1]]


def test_exec_gets_the_alert_in_its_environment_and_no_shell_reads_its_labels(tmp_path):
    out = tmp_path / "alert.json"
    code = ("import json,os,sys; json.dump({k: v for k, v in os.environ.items() if k.startswith('TW_')},"
            " open(sys.argv[1], 'w'))")
    status, err, _ = act_run(tmp_path, "--on-alert", f'Hung=exec:{sys.executable} -c "{code}" {out}',
                             trainer=["--pause", "10:2"], rule_file=rules(tmp_path, note=HOSTILE))
    assert status == 0, err
    env = json.loads(out.read_text())
    labels = json.loads(env["TW_ALERT_LABELS"])
    assert env["TW_ALERT_NAME"] == "Hung" and labels["alertname"] == "Hung"
    assert labels["note"] == HOSTILE[1:-1]  # as the rule file says it, no shell read it
    assert env["TW_RUN"] == RUN_NAME
    assert float(env["TW_ALERT_VALUE"]) == 1 and float(env["TW_ALERT_STARTS_AT"]) > 1.7e9
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    assert len(action_lines(err, "done")) == 1, err


def test_once_per_firing_and_the_cooldown(tmp_path):
    count = tmp_path / "count.txt"
    append = f"exec:{sys.executable} -c \"open('{count}', 'a').write('x')\""
    trainer = ["--steps", "40", "--pause", "10:2", "--pause", "25:2"]
    status, err, _ = act_run(tmp_path, "--on-alert", f"Hung={append}", trainer=trainer)
    assert status == 0, err
    assert len(re.findall(FIRING, err)) == 2, err  # two stalls: the alert fired twice ...
    assert count.read_text() == "x", err  # ... and acted once (default cooldown 5m) though evaluated many times
    count.unlink()
    status, err, _ = act_run(tmp_path, "--on-alert", f"Hung={append}", "--action-cooldown", "0", trainer=trainer)
    assert status == 0, err
    assert count.read_text() == "xx", err  # once per firing, not once per evaluation


def test_dry_run_says_what_it_would_do_and_does_nothing(tmp_path):
    touched = tmp_path / "touched"
    status, err, signals = act_run(tmp_path, "--dry-run-actions", "--on-alert", f"Hung=exec:touch {touched}",
                                   "--on-alert", "Hung=signal:USR1", "--on-alert", "Hung=checkpoint",
                                   trainer=["--pause", "10:2"])
    assert status == 0, err
    assert "3 alert actions (dry run: said, not done)" in err, err
    dry = action_lines(err, "dry_run")
    assert len(dry) == 3, err
    assert any(f"would run touch {touched}" in l for l in dry) and any("would send SIGUSR1" in l for l in dry)
    assert not touched.exists() and signals == []


def test_slow_and_failing_commands_never_hold_up_the_evaluation(tmp_path):
    late = tmp_path / "late"
    status, err, _ = act_run(tmp_path, "--action-timeout", "1", "--action-cooldown", "0",
                             "--on-alert", "Hung=exec:sleep 30",
                             "--on-alert", "Hung=exec:/nonexistent/command --flag",
                             "--on-alert", f"Hung=exec:{sys.executable} -c \"open('{late}', 'a').write('x')\"",
                             trainer=["--steps", "40", "--pause", "10:2", "--pause", "25:2"])
    assert status == 0, err
    assert late.read_text() == "xx", err  # the second firing acted while the first sleep was running
    assert len(action_lines(err, "timeout")) == 2 and "killed after 1 s" in err, err
    failed = action_lines(err, "failed")
    assert len(failed) == 2 and "/nonexistent/command: No such file or directory" in failed[0], err


def test_signals_go_to_the_ranks_not_their_workers(tmp_path):
    status, err, signals = act_run(tmp_path, "--on-alert", "Hung=signal:USR1", "--on-alert", "Hung=signal:HUP:rank=1",
                                   trainer=["--ranks", "2", "--pause", "10:2"])
    assert status == 0, err
    got = sorted(tuple(s.split()[:2] + [s.split()[3]]) for s in signals)
    assert got == [("rank", "0", "SIGUSR1"), ("rank", "1", "SIGHUP"), ("rank", "1", "SIGUSR1")], (signals, err)
    done = action_lines(err, "done")
    assert any("SIGUSR1 to rank 0 (pid" in l and "rank 1 (pid" in l for l in done), err
    assert any("SIGHUP to rank 1 (pid" in l and "rank 0" not in l.split("(SIGHUP")[1] for l in done), err


def test_a_plain_process_is_signalled_when_no_process_has_a_rank(tmp_path):
    status, err, signals = act_run(tmp_path, "--on-alert", "Hung=signal:USR1", trainer=["--pause", "10:2"])
    assert status == 0, err
    assert [s.split()[0] + " " + s.split()[3] for s in signals] == ["main SIGUSR1"], (signals, err)


def test_control_requests_reach_the_trainer_and_its_replies_come_back(tmp_path):
    status, err, _ = act_run(tmp_path, "--on-alert", "Hung=checkpoint", "--on-alert", "Hung=lr:0.5",
                             trainer=["--control", "--steps", "40", "--pause", "10:2"])
    assert status == 0, err
    requested = action_lines(err, "requested")
    assert len(requested) == 2 and "request 1" in requested[0] and "request 2" in requested[1], err
    assert re.search(r"trainer rank 0: checkpoint \(request 1\): done at step 1[01]: saved", err), err
    assert re.search(r"trainer rank 0: lr \(request 2\): done at step 1[01]: lr 0\.1 -> 0\.05", err), err
    # stop ends the run early, cleanly
    status, err, _, out = act_run(tmp_path, "--on-alert", "Hung=stop", stdout=True,
                                  trainer=["--control", "--steps", "400", "--pause", "10:2"])
    assert status == 0 and "trainer rank 0: stop (request 1): done" in err, err
    assert re.search(r"^control: stop at step 1[01]: stopping$", out, re.M) and "step 400/400" not in out, out


def test_a_stall_dumps_the_stacks_of_processes_that_registered(tmp_path):
    status, err, _, out = act_run(tmp_path, trainer=["--faulthandler", "--control", "--pause", "10:3"], stdout=True)
    assert status == 0, err
    done = [l for l in err.splitlines() if "action stall=dump-stacks on a stall" in l]
    assert len(done) == 1 and ": done (SIGUSR2 to rank 0 (pid" in done[0], err
    # faulthandler wrote the dump to the script's stderr (the command's output): where it waits
    assert re.search(r'File ".*act_trainer.py", line \d+ in wait_in_collective', out), out
    # without --control the script never said hello: nothing is sent, said once
    status, err, _, out = act_run(tmp_path, trainer=["--faulthandler", "--pause", "10:2"], stdout=True)
    assert status == 0 and "wait_in_collective" not in out, out
    assert err.count("no process of the run has the trainwatch package") == 1, err
    status, err, _, out = act_run(tmp_path, "--no-stack-dumps", trainer=["--faulthandler", "--control", "--pause",
                                                                         "10:2"], stdout=True)
    assert status == 0 and "wait_in_collective" not in out and "dump-stacks" not in err, err


def test_actions_are_counted_and_shown_on_the_alerts_page(tmp_path):
    signals = tmp_path / "signals.txt"
    addr = tmp_path / "addr"
    p = subprocess.Popen([binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0",
                          "--web.address-file", addr, "--web.linger", "0", "--no-default-rules", "--rules",
                          rules(tmp_path), "--eval-interval", "0.2", "--stall-after", "0.8",
                          "--on-alert", "Hung{severity=\"critical\"}=exec:true", "--", sys.executable, TRAINER,
                          "--signals", signals, "--pause", "10:30"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_until(lambda: addr.exists() and addr.read_text().strip(), what="the address file")
        base = "http://" + addr.read_text().strip()
        line = 'trainwatch_actions_total{alert="Hung",action="exec",result="done"} 1'
        body = wait_until(lambda: (lambda b: b if line in b else None)(http(base + "/metrics")[2].decode()),
                          timeout=30, what="the action counted")
        assert "# TYPE trainwatch_actions_total counter" in body
        page = json.loads(http(base + "/alerts?format=json")[2])
        configured = [a for a in page["actions"] if a["from"] == "--on-alert"]
        assert configured[0]["action"] == 'Hung{severity="critical"}=exec:true' and configured[0]["times"] == 1
        assert configured[0]["last"].startswith('Hung{') and configured[0]["last"].endswith("done: exit status 0")
        html = http(base + "/alerts")[2].decode()
        assert "<h2>Actions</h2>" in html and "Hung{severity=&quot;critical&quot;}=exec:true" in html
        check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        p.terminate()
        p.communicate(timeout=60)


def test_rule_file_actions_section(tmp_path):
    extra = """actions:
  - alert: Hung{severity="critical"}
    action: exec:touch fired-from-file
    cooldown: 10m
"""
    path = rules(tmp_path, extra=extra)
    check = run(["trainwatch", "rules", "check", path])
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 1 rules found\n  and 1 action (trainwatch's own: rules export leaves them out)" in check.stdout
    exported = run(["trainwatch", "rules", "export", "--no-default-rules", "--rules", path])
    assert exported.returncode == 0 and "\nactions:" not in exported.stdout and "Hung" in exported.stdout
    (tmp_path / "exported.yml").write_text(exported.stdout)
    promtool = subprocess.run(["promtool", "check", "rules", tmp_path / "exported.yml"], capture_output=True, text=True)
    assert promtool.returncode == 0, promtool.stdout + promtool.stderr
    status, err, _ = act_run(tmp_path, trainer=["--pause", "10:2"], rule_file=path)
    assert status == 0 and (tmp_path / "fired-from-file").exists(), err
    assert re.search(r"action Hung\{severity=\"critical\"\}=exec:touch fired-from-file on Hung\{.*\}: done", err), err


def test_bad_actions_stop_before_the_command_starts(tmp_path):
    marker = tmp_path / "started"
    cases = [("--on-alert", "Hung=frobnicate", "unknown action"),
             ("--on-alert", "Hung=signal:NOPE", "unknown signal"),
             ("--on-alert", "Hung=lr:-1", "lr: takes a factor above 0"),
             ("--on-alert", "Hung=exec:sh -c 'unclosed", "unclosed quote"),
             ("--on-alert", "Hung[5m]=stop", "alert selector"),
             ("--on-alert", "no equals sign", "expected ALERTNAME[{matchers}]=ACTION"),
             ("--action-cooldown", "soon", "--action-cooldown needs a duration")]
    for flag, value, words in cases:
        p = run(["trainwatch", "run", "--no-history", "--web.listen-address", "127.0.0.1:0", flag, value,
                 "--", "touch", marker])
        assert p.returncode == 2 and words in p.stderr and not marker.exists(), (value, p.stderr)
        assert len(p.stderr.strip().splitlines()) <= 2, p.stderr
    path = rules(tmp_path, extra="actions:\n  - alert: Hung\n    action: reboot\n")
    check = run(["trainwatch", "rules", "check", path])
    assert check.returncode == 1 and "FAILED: " in check.stdout and "'Hung=reboot': unknown action" in check.stdout
    p = run(["trainwatch", "run", "--no-history", "--rules", path, "--", "touch", marker])
    line = path.read_text().splitlines().index("  - alert: Hung") + 1
    assert p.returncode == 2 and f"{path}:{line} 'Hung=reboot': unknown action" in p.stderr, p.stderr
    assert "not starting touch" in p.stderr and not marker.exists()


def test_watch_takes_only_exec_actions(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step   1/30 - loss: 2.0000 - 50ms/step\n")
    p = run(["trainwatch", "watch", "--no-history", "--on-alert", "Hung=checkpoint", log], timeout=30)
    assert p.returncode == 2, p.stderr
    assert "checkpoint acts on the training processes, which only `trainwatch run` has" in p.stderr


# ---- with the trainwatch package (python/, docs/python.md#control-channel) ----

HERE = pathlib.Path(__file__).parent


def package_env():
    from conftest import BUILD
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), PYTHONDONTWRITEBYTECODE="1")
    if os.environ.get("TW_PY_PRELOAD"):  # the ASan build: its runtime first for CPython, whose own leaks are not ours
        env["LD_PRELOAD"] = os.environ["TW_PY_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def package_run(tmp_path, *options, script, args):
    cmd = [binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0", "--web.linger", "0",
           "--no-default-rules", "--rules", str(rules(tmp_path)), "--eval-interval", "0.2", "--stall-after", "0.8",
           *options, "--", sys.executable, str(HERE / script), *[str(a) for a in args]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=package_env())


def test_the_package_checkpoints_and_lowers_the_lr_when_run_asks(tmp_path):
    p = package_run(tmp_path, "--on-alert", "Hung=checkpoint", "--on-alert", "Hung=lr:0.5",
                    script="control_trainer.py",
                    args=["--console", "--steps", "300", "--block-at", "100", "--block-seconds", "2.5"])
    assert p.returncode == 0, p.stderr
    assert re.search(r"trainer rank 0: checkpoint \(request 1\): done at step 10\d", p.stderr), p.stderr
    assert re.search(r"trainer rank 0: lr \(request 2\): done at step 10\d", p.stderr), p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    lr = {int(k): v for k, v in result["lr"].items()}
    assert lr[99] == 0.1 and lr[300] == 0.05, lr  # halved once, after the hang, and kept
    changed = min(s for s, v in lr.items() if v == 0.05)
    assert 100 <= changed <= 110, changed
    assert list(tmp_path.rglob("*.ckpt")), "no checkpoint written"
    assert re.search(r"trainwatch_action_replies_total|lr 0\.1 -> 0\.05", p.stderr + (tmp_path / "logs" / "train.log").read_text())


def test_the_package_stops_cleanly_when_run_asks(tmp_path):
    p = package_run(tmp_path, "--on-alert", "Hung=stop", script="control_trainer.py",
                    args=["--console", "--steps", "2000", "--block-at", "100", "--block-seconds", "2.5"])
    assert p.returncode == 0, p.stderr
    assert re.search(r"trainer rank 0: stop \(request 1\): done at step 10\d", p.stderr), p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["should_stop"] and result["steps_run"] < 120, result
    assert list(tmp_path.rglob("*.ckpt")), "stop checkpoints first"


def test_a_hang_under_run_dumps_every_rank_and_analyze_names_the_rank_elsewhere(tmp_path):
    err = tmp_path / "run.err"
    logs = tmp_path / "logs"
    with open(err, "w") as e:
        p = subprocess.Popen([binary("trainwatch"), "run", "--no-history", "--web.listen-address", "127.0.0.1:0",
                              "--web.linger", "0", "--stall-after", "1", "--", sys.executable,
                              str(HERE / "hang_ranks.py"), "--console", "--log-dir", logs, "--hang-rank", "2",
                              "--hang-at", "20"],
                             stdout=subprocess.DEVNULL, stderr=e, cwd=tmp_path, env=package_env())
    try:
        dumped = lambda: all((logs / f"rank{r}.jsonl").exists() and '"stacks":"' in (logs / f"rank{r}.jsonl").read_text()
                             for r in range(4))
        wait_until(dumped, timeout=60, what="a stack dump in every rank's log")
    finally:
        p.terminate()
        p.wait(timeout=60)
    said = err.read_text()
    done = [l for l in said.splitlines() if "action stall=dump-stacks on a stall" in l]
    assert len(done) == 1 and all(f"rank {r} (pid" in done[0] for r in range(4)), said
    report = json.loads(run(["trainwatch", "analyze", "--no-history", "--json",
                             *[logs / f"rank{r}.jsonl" for r in range(4)]]).stdout)
    hang = [f for f in report["findings"] if f["rule"] == "rank_outside_collective"]
    assert len(hang) == 1 and hang[0]["rank"] == 2, report["findings"]
    assert hang[0]["title"] == "Rank 2 is not in all_reduce (hang_ranks.py), where ranks 0, 1, 3 wait for it"
    assert "rank 2: main thread in load_batch (hang_ranks.py:" in hang[0]["evidence"]
    # the text logs hold the same dumps
    text = run(["trainwatch", "analyze", "--no-history", "--json", *[logs / f"rank{r}.log" for r in range(4)]])
    assert [f["rank"] for f in json.loads(text.stdout)["findings"] if f["rule"] == "rank_outside_collective"] == [2]
