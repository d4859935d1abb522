#!/usr/bin/env python3
"""train_numpy.py: a small real training run in numpy (softmax regression
on a synthetic 4-class problem), instrumented with the trainwatch package:
setup_logger, log_environment, prometheus_client-style metrics, the /metrics
server, and trainwatch.PaddleCallback driven in the order paddle.Model.fit
(hapi) calls it. `trainwatch analyze` reads the log it writes.

    PYTHONPATH=build/python python3 examples/python/train_numpy.py --log-dir demo-run/python
    build/trainwatch analyze demo-run/python/train.log

Faults to try: --slow-reader MS (a slow data loader), --nan-at STEP (the
loss becomes NaN), --spike-at STEP (one huge batch: a memory spike tied to
its input shape), --fail-at STEP (an exception in the step).
"""
import argparse
import os
import time
import tracemalloc

import numpy as np

import trainwatch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--log-freq", type=int, default=5)
    p.add_argument("--log-dir", default="demo-run/python")
    p.add_argument("--json", action="store_true", help="also write train.jsonl")
    p.add_argument("--port", type=int, default=0, help="serve /metrics on 127.0.0.1:PORT (0: no server)")
    p.add_argument("--slow-reader", type=float, default=0.0, help="ms of 'decoding' per batch")
    p.add_argument("--nan-at", type=int, default=0)
    p.add_argument("--spike-at", type=int, default=0)
    p.add_argument("--fail-at", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


class Data:
    """Four Gaussian blobs in 16 dimensions; batches made on demand."""

    def __init__(self, rng, dims=16, classes=4):
        self.rng, self.dims, self.classes = rng, dims, classes
        self.centers = rng.normal(0, 2.0, (classes, dims))

    def batch(self, n, slow_ms=0.0, rows=1):
        if slow_ms:
            time.sleep(slow_ms / 1000.0)  # the decoding a slow loader does
        y = self.rng.integers(0, self.classes, n)
        x = self.centers[y] + self.rng.normal(0, 1.0, (n, self.dims))
        if rows > 1:  # one oversized sample set: a memory spike in the step
            x = np.repeat(x, rows, axis=0)
            y = np.repeat(y, rows)
        return x.astype(np.float32), y


class Model:
    """Softmax regression: the model and its SGD optimizer (hapi's shape:
    model._optimizer.get_lr())."""

    class SGD:
        def __init__(self, lr):
            self.lr = lr

        def get_lr(self):
            return self.lr

    def __init__(self, dims, classes, lr):
        self.w = np.zeros((dims, classes), np.float32)
        self.b = np.zeros(classes, np.float32)
        self._optimizer = Model.SGD(lr)

    def step(self, x, y, poison=False):
        logits = x @ self.w + self.b
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
        if poison:
            loss = float("nan")
        acc = float((p.argmax(axis=1) == y).mean())
        grad = p
        grad[np.arange(len(y)), y] -= 1.0
        grad /= len(y)
        self.w -= self._optimizer.lr * (x.T @ grad)
        self.b -= self._optimizer.lr * grad.sum(axis=0)
        return loss, acc


def main():
    args = parse_args()
    os.makedirs(args.log_dir, exist_ok=True)
    log = trainwatch.setup_logger("trainer", log_file=os.path.join(args.log_dir, "train.log"),
                                  json_file=os.path.join(args.log_dir, "train.jsonl") if args.json else None,
                                  console_level="WARNING")
    trainwatch.log_environment(log)
    if args.port:
        server = trainwatch.start_http_server(args.port)
        log.info("serving /metrics", extra={"port": server.port})
    samples = trainwatch.Counter("train_samples", "Samples trained on.")
    epoch_seconds = trainwatch.Histogram("train_epoch_seconds", "Wall time per epoch.", buckets=None)

    rng = np.random.default_rng(args.seed)
    data = Data(rng)
    model = Model(data.dims, data.classes, args.lr)
    if args.spike_at:
        tracemalloc.start()

    def memory():
        return tracemalloc.get_traced_memory()  # (current, peak) bytes of host memory

    # No GPU here: with --spike-at, the host memory numpy allocates (tracemalloc's
    # peak) stands in for paddle.device.cuda.max_memory_allocated.
    callback = trainwatch.PaddleCallback(log, log_freq=args.log_freq, memory_fn=memory if args.spike_at else False,
                                         memory_spike_bytes=4 << 20)
    callback.set_model(model)
    callback.set_params({"batch_size": args.batch_size, "epochs": args.epochs, "steps": args.steps_per_epoch,
                         "verbose": 2, "metrics": ["loss", "acc"]})
    with callback.guard():
        callback.on_train_begin({})
        global_step = 0
        for epoch in range(args.epochs):
            callback.on_epoch_begin(epoch, {})
            started = time.perf_counter()
            logs = {}
            for step in range(args.steps_per_epoch):
                global_step += 1
                rows = 1000 if global_step == args.spike_at else 1
                x, y = data.batch(args.batch_size, args.slow_reader, rows)
                callback.set_inputs({"image": x, "label": y})
                callback.on_train_batch_begin(step, {})
                if global_step == args.fail_at:
                    raise RuntimeError(f"injected failure at step {global_step}")
                loss, acc = model.step(x, y, poison=global_step >= args.nan_at > 0)
                samples.inc(len(y))
                logs = {"loss": [np.float32(loss)], "acc": acc, "batch_size": len(y)}
                callback.on_train_batch_end(step, logs)
            epoch_seconds.observe(time.perf_counter() - started)
            callback.on_epoch_end(epoch, logs)
            callback.on_eval_begin({"steps": 4, "metrics": ["loss", "acc"]})
            losses, accs = zip(*(model.step(*data.batch(256)) for _ in range(4)))
            callback.on_eval_end({"loss": [float(np.mean(losses))], "acc": float(np.mean(accs))})
        callback.on_train_end({})
    log.info("training finished", extra={"steps": global_step})


if __name__ == "__main__":
    main()
