"""A 4-rank job that hangs the way collective jobs do, for the stack-dump
tests (test_control.py here, the supervisor's under `trainwatch run`).

    python3 hang_ranks.py --log-dir logs --hang-rank 2 --hang-at 20

The launcher (which does not import trainwatch: it is not a rank) starts
--ranks processes of this script with RANK/WORLD_SIZE/LOCAL_RANK set; each
imports trainwatch, logs to LOG_DIR/rank{R}.log (and .jsonl) and loops over
steps that meet at a file barrier inside all_reduce. With --hang-rank R
--hang-at N, rank R enters load_batch at step N and never returns, so the
others wait in all_reduce forever. SIGTERM/SIGINT to the launcher goes to
every rank; the launcher then exits with 128 + the signal.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def all_reduce(barrier, step, rank, world_size):
    """Waits until every rank reached step (a stand-in for a collective)."""
    open(os.path.join(barrier, f"step{step}.rank{rank}"), "w").close()
    names = [os.path.join(barrier, f"step{step}.rank{r}") for r in range(world_size)]
    while not all(os.path.exists(n) for n in names):
        time.sleep(0.005)


def load_batch():
    """A data loader that never delivers."""
    while True:
        time.sleep(3600)


def rank_main(args):
    import trainwatch

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log = trainwatch.setup_logger("trainer", log_file=os.path.join(args.log_dir, "rank{rank}.log"),
                                  json_file=os.path.join(args.log_dir, "rank{rank}.jsonl"),
                                  console_level="INFO" if args.console else None)
    recorder = trainwatch.StepRecorder(log, log_freq=10, metrics=False)
    log.info("rank %d of %d started", rank, world_size)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        if rank == args.hang_rank and step == args.hang_at:
            load_batch()
        time.sleep(args.step_seconds)
        all_reduce(args.barrier, step, rank, world_size)
        recorder.record(time.perf_counter() - start, 0.0, loss=1.0 / step)
        if recorder.should_stop:
            break
    return 0


def launcher_main(args):
    os.makedirs(args.barrier, exist_ok=True)
    children = []

    def forward(signum, frame):
        for c in children:
            try:
                c.send_signal(signum)
            except OSError:
                pass
        for c in children:
            try:
                c.wait(timeout=10)
            except subprocess.TimeoutExpired:
                c.kill()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    argv = [sys.executable, os.path.abspath(__file__), "--rank-worker", "--log-dir", args.log_dir, "--barrier",
            args.barrier, "--steps", str(args.steps), "--hang-rank", str(args.hang_rank), "--hang-at",
            str(args.hang_at), "--step-seconds", str(args.step_seconds)] + (["--console"] if args.console else [])
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r))
        children.append(subprocess.Popen(argv, env=env))
    return max(c.wait() for c in children)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-at", type=int, default=0)
    p.add_argument("--step-seconds", type=float, default=0.01)
    p.add_argument("--log-dir", default="logs")
    p.add_argument("--barrier", help="the barrier's directory (default LOG_DIR/barrier)")
    p.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--console", action="store_true", help="rank 0's records on the console too (for trainwatch run)")
    args = p.parse_args()
    args.barrier = args.barrier or os.path.join(args.log_dir, "barrier")
    sys.exit(rank_main(args) if args.rank_worker else launcher_main(args))


if __name__ == "__main__":
    main()
