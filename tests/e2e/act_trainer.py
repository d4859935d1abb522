"""A plain training script for the action tests (test_actions.py), without
the trainwatch package: it prints Paddle ProgressBar step lines, pauses
where told (so trainwatch sees stalls), records the signals each of its
processes receives, and optionally speaks the control channel by hand the
way docs/actions.md shows a script without the package can.

    act_trainer.py --steps 30 --pause 10:2.5 --pause 20:2.5 --signals FILE
                   [--ranks N] [--control] [--faulthandler]

With --ranks N it starts N rank processes (RANK, WORLD_SIZE in their
environment), each with one data-loader worker that inherits it: signals
meant for the ranks must not reach the workers.
"""
import argparse
import faulthandler
import json
import os
import signal
import subprocess
import sys
import time

WATCHED = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT, signal.SIGHUP]


def record_signals(path, role, dumps_on=None):
    rank = os.environ.get("RANK", "-")

    def on_signal(sig, _frame):
        with open(path, "a") as f:
            f.write(f"{role} {rank} {os.getpid()} {signal.Signals(sig).name}\n")
    for sig in WATCHED:
        if sig == dumps_on:
            continue  # faulthandler's
        signal.signal(sig, on_signal)


class Control:
    """The control channel read by hand (docs/actions.md#without-the-package)."""

    def __init__(self):
        self.path = os.environ.get("TRAINWATCH_CONTROL")
        self.offset, self.started, self.lr = 0, time.time(), 0.1
        if self.path:
            self.reply({"hello": 1, "stack_signal": int(os.environ.get("TRAINWATCH_STACK_SIGNAL", "12"))})

    def reply(self, fields):
        line = json.dumps(dict(fields, pid=os.getpid(), rank=int(os.environ.get("RANK", "0")))) + "\n"
        fd = os.open(self.path + ".ack", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, line.encode())
        os.close(fd)

    def poll(self, step):
        if not self.path or os.path.getsize(self.path) == self.offset:
            return False
        stop = False
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            req = json.loads(line)
            if req["time"] < self.started:
                continue
            if req["action"] == "lr":
                old, self.lr = self.lr, self.lr * req["factor"]
                detail = f"lr {old:g} -> {self.lr:g}"
            else:
                detail = "saved" if req["action"] == "checkpoint" else "stopping"
                stop = req["action"] == "stop"
            print(f"control: {req['action']} at step {step}: {detail}", flush=True)
            self.reply({"id": req["id"], "action": req["action"], "result": "done", "step": step, "detail": detail})
        return stop


def wait_in_collective(seconds):
    time.sleep(seconds)


def train(args):
    control = Control() if args.control else None
    pauses = dict((int(s), float(t)) for s, t in (p.split(":") for p in args.pause))
    for step in range(1, args.steps + 1):
        time.sleep(args.interval)
        if os.environ.get("RANK", "0") == "0":  # rank 0 logs, as Paddle's ProgBarLogger
            print(f"step {step:3d}/{args.steps} - loss: {2.0 / step:.4f} - {args.interval * 1000:.0f}ms/step",
                  flush=True)
        if step in pauses:
            wait_in_collective(pauses[step])
        if control and control.poll(step):
            break


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--pause", action="append", default=[], help="STEP:SECONDS")
    ap.add_argument("--signals", required=True)
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("--role", default="main")
    ap.add_argument("--control", action="store_true")
    ap.add_argument("--faulthandler", action="store_true", help="dump stacks on TRAINWATCH_STACK_SIGNAL")
    args = ap.parse_args()
    dumps_on = None
    if args.faulthandler and os.environ.get("TRAINWATCH_STACK_SIGNAL"):
        dumps_on = int(os.environ["TRAINWATCH_STACK_SIGNAL"])
        faulthandler.register(dumps_on, all_threads=True)
    record_signals(args.signals, args.role, dumps_on)
    if args.role == "worker":
        time.sleep(3600)
        return
    if args.ranks:
        own = [a for a in sys.argv[1:] if a not in ("--ranks", str(args.ranks))]
        ranks = [subprocess.Popen([sys.executable, __file__, *own, "--role", "rank"],
                                  env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks)))
                 for r in range(args.ranks)]
        sys.exit(max(p.wait() for p in ranks))
    worker = None
    if args.role == "rank":
        worker = subprocess.Popen([sys.executable, __file__, "--signals", args.signals, "--role", "worker"])
    try:
        train(args)
    finally:
        if worker:
            worker.kill()
            worker.wait()


if __name__ == "__main__":
    main()
