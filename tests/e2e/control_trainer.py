"""A training loop for the control channel's tests (test_control.py) and a
demo of it: stand-ins for a paddle optimizer (get_lr/set_lr), a torch one
(param_groups) and a paddle.Model (save, stop_training, a fit loop that
ends as hapi's does), so neither framework is needed.

    TRAINWATCH_CONTROL=/tmp/ctl/requests python3 control_trainer.py --log-dir logs --steps 200

At the end it prints one JSON line: the steps run, the lr of each step, the
checkpoints written and the control channel's counters.
"""
import argparse
import json
import os
import sys
import time

import trainwatch

STATE = {"step": 0}


class PaddleLikeOptimizer:
    """paddle.optimizer.Optimizer's lr API with a float learning rate."""

    def __init__(self, lr):
        self._learning_rate = lr

    def get_lr(self):
        return self._learning_rate

    def set_lr(self, value):
        self._learning_rate = float(value)


class Scheduler:
    """paddle.optimizer.lr.LRScheduler's shape: base_lr, last_lr, step()."""

    def __init__(self, lr):
        self.base_lr = lr
        self.last_lr = lr
        self.last_epoch = 0

    def step(self):
        self.last_epoch += 1
        self.last_lr = self.base_lr


class ScheduledOptimizer(PaddleLikeOptimizer):
    def __init__(self, lr):
        super().__init__(Scheduler(lr))

    def get_lr(self):
        return self._learning_rate.last_lr

    def set_lr(self, value):
        raise RuntimeError("optimizer's learning rate can't be LRScheduler when invoke this API")


class TorchLikeOptimizer:
    def __init__(self, lr):
        self.param_groups = [{"lr": lr, "initial_lr": lr}, {"lr": lr / 10, "initial_lr": lr / 10}]


class FakeModel:
    """paddle.Model's part the callback uses: _optimizer, save(path),
    stop_training, and fit's loop (hapi's _run_one_epoch: num_iters counts
    down after each batch end; stop_training ends fit after the epoch)."""

    def __init__(self, optimizer, args):
        self._optimizer = optimizer
        self.stop_training = False
        self.args = args

    def save(self, path):
        return save_checkpoint(path, self.args)

    def fit(self, steps, callbacks, epochs=1000):
        for cb in callbacks:
            cb.set_model(self)
            cb.on_train_begin({})
        done = 0
        for epoch in range(epochs):
            for cb in callbacks:
                cb.on_epoch_begin(epoch)
            for step in range(self.args.steps_per_epoch):
                if done >= steps:
                    break
                for cb in callbacks:
                    cb.on_train_batch_begin(step)
                one_step(self.args)
                done += 1
                logs = {"loss": [2.0 - done * 0.001], "batch_size": 8, "step": step}
                for cb in callbacks:
                    cb.on_train_batch_end(step, logs)
                if getattr(self, "num_iters", None) is not None:
                    self.num_iters -= 1
                    if self.num_iters <= 0:
                        self.stop_training = True
                        del self.num_iters
                        break
            if self.stop_training or done >= steps:
                break
        for cb in callbacks:
            cb.on_train_end({})
        return done


def save_checkpoint(path, args):
    if args.fail_save:
        raise OSError(28, "No space left on device", path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".ckpt", "w") as f:
        f.write(str(STATE["step"]))
    return path + ".ckpt"


def all_reduce(args):
    """Stands in for a collective that never returns."""
    with open(args.block_marker, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(args.block_seconds)


def one_step(args):
    STATE["step"] += 1
    if args.block_at and STATE["step"] == args.block_at:
        all_reduce(args)
    time.sleep(args.step_seconds)


def current_lr(opt):
    if hasattr(opt, "param_groups"):
        return opt.param_groups[0]["lr"]
    return opt.get_lr()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log-dir", default="logs")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--steps-per-epoch", type=int, default=1000)
    p.add_argument("--step-seconds", type=float, default=0.002)
    p.add_argument("--mode", choices=["recorder", "timer", "callback"], default="recorder")
    p.add_argument("--optimizer", choices=["paddle", "scheduler", "torch"], default="paddle")
    p.add_argument("--fail-save", action="store_true")
    p.add_argument("--no-logger", action="store_true")
    p.add_argument("--wait-file", help="start the loop once this file exists")
    p.add_argument("--block-at", type=int, default=0, help="at this step, block in all_reduce")
    p.add_argument("--block-marker", default="blocked")
    p.add_argument("--block-seconds", type=float, default=60)
    p.add_argument("--console", action="store_true", help="the records on the console too (for trainwatch run)")
    args = p.parse_args()

    if not args.no_logger:
        log = trainwatch.setup_logger("trainer", log_file=os.path.join(args.log_dir, "train.log"),
                                      json_file=os.path.join(args.log_dir, "train.jsonl"),
                                      console_level="INFO" if args.console else None)
    else:
        log = None
    opt = {"paddle": PaddleLikeOptimizer, "scheduler": ScheduledOptimizer, "torch": TorchLikeOptimizer}[
        args.optimizer](0.1)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.005)

    lrs = {}
    save = lambda path: save_checkpoint(path, args)  # noqa: E731
    if args.mode == "callback":
        model = FakeModel(opt, args)
        cb = trainwatch.PaddleCallbackCore(log, log_freq=10, metrics=False)
        recorder = cb.recorder

        class LrTrace:
            def __getattr__(self, name):
                return lambda *a, **k: None

            def on_train_batch_end(self, step, logs=None):
                lrs[STATE["step"]] = current_lr(opt)

        steps_run = model.fit(args.steps, [cb, LrTrace()])
    elif args.mode == "timer":
        timer = trainwatch.StepTimer(log, log_freq=10, metrics=False, save=save, optimizer=opt)
        recorder = timer.recorder
        steps_run = 0
        for _ in timer.wrap(range(args.steps)):
            one_step(args)
            lrs[STATE["step"]] = current_lr(opt)
            timer.update(loss=1.0, lr=current_lr(opt))
            steps_run += 1
            if timer.should_stop:
                break
        # the step that asked to stop ends after the wrap's record: it ran
    else:
        recorder = trainwatch.StepRecorder(log, log_freq=10, metrics=False, save=save, optimizer=opt)
        steps_run = 0
        for _ in range(args.steps):
            one_step(args)
            lrs[STATE["step"]] = current_lr(opt)
            recorder.record(0.001, 0.0, loss=1.0, lr=current_lr(opt))
            steps_run += 1
            if recorder.should_stop:
                break
    ctl = trainwatch.get_control()
    out = {"steps_run": steps_run, "lr": lrs, "should_stop": recorder.should_stop,
           "errors": ctl.errors if ctl else None, "counts": ctl.counts if ctl else None,
           "hook_errors": recorder.hook_errors}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
