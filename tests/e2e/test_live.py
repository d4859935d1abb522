"""Live watching's last word agrees with what it said live: a run that
logged its end is not left stalled, and a stall seen live is in the final
report even when the log's own timestamps do not show it."""
import subprocess
import time

from conftest import binary
from servers import free_port, http, wait_until

STEPS = "".join(f"epoch: [1/1], global_step: {i}, lr: 0.1, loss: 1.0, avg_batch_cost: 0.1 s\n" for i in range(1, 6))


def metric(port, name):
    body = http(f"http://127.0.0.1:{port}/metrics")[2].decode()
    for line in body.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def watch(log, port, seconds):
    return subprocess.Popen([binary("trainwatch"), "watch", "--from-start", "--stall-after", "1", "--no-default-rules",
                             "--duration", str(seconds), "--web.listen-address", f"127.0.0.1:{port}", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_finished_run_is_not_left_stalled(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(STEPS + "Training finished\n")
    port = free_port()
    proc = watch(log, port, 4)
    wait_until(lambda: metric(port, "trainwatch_train_step") == 5, timeout=30, what="the last step")
    time.sleep(2.5)  # past the stall time
    assert metric(port, "trainwatch_stalled") == 0
    out, err = proc.communicate(timeout=60)
    assert "no training progress" not in err
    assert "live_stall" not in out


def test_a_stall_seen_live_is_in_the_final_report(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(STEPS)
    port = free_port()
    proc = watch(log, port, 4)
    wait_until(lambda: metric(port, "trainwatch_stalled") == 1, timeout=30, what="the stall")
    out, err = proc.communicate(timeout=60)
    assert "no training progress" in err
    assert "[live_stall]" in out and "Healthy" not in out, out
