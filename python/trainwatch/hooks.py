"""Training hooks: StepTimer for custom loops, the core of PaddleCallback,
the NaN guard and the memory-spike warning. They update the trainwatch_*
series `trainwatch run` exports (labels run and rank: one Grafana dashboard
serves both) and log step records `trainwatch analyze` reads back (message
"Step N", fields epoch, global_step, loss, lr, batch_cost, reader_cost, ips,
max_mem_allocated in MB)."""
import logging
import math
import os
import sys
import time
from collections import deque

from . import _native
from . import control as _control_module
from .logs import summary
from .metrics import REGISTRY, Counter, Gauge, Histogram

_LABELS = ("run", "rank")
_FAMILIES = {}  # id(registry) -> the families there


def _default_run():
    name = os.path.basename(sys.argv[0] or "python") or "python"
    return name[:-3] if name.endswith(".py") else name


def _families(registry):
    fam = _FAMILIES.get(id(registry))
    if fam is None:
        g = lambda n, h, labels=_LABELS: Gauge(n, h, labels, registry=registry)  # noqa: E731
        h = lambda n, d: Histogram(n, d, _LABELS, registry=registry, buckets=None)  # noqa: E731
        fam = {
            "loss": g("trainwatch_train_loss", "Training loss, as the log last printed it."),
            "step": g("trainwatch_train_step", "Training progress: the global step of the last step record."),
            "epoch": g("trainwatch_train_epoch", "Epoch of the last step record."),
            "lr": g("trainwatch_learning_rate", "Learning rate of the last step record."),
            "ips": g("trainwatch_samples_per_second", "Throughput the log reports (ips)."),
            "last": g("trainwatch_last_progress_timestamp_seconds",
                      "When the last new training step was seen (unix time)."),
            "step_time": h("trainwatch_step_duration_seconds",
                           "Step time the log reports (batch_cost, time, ms/step)."),
            "data_wait": h("trainwatch_data_wait_seconds",
                           "Data-loader wait per step the log reports (reader_cost, data_time)."),
            "nan": Counter("trainwatch_nan_loss_total", "Step records whose loss was NaN or Inf.", _LABELS,
                           registry=registry),
            "nan_streak": g("trainwatch_nan_loss_streak",
                            "Consecutive step records whose loss was NaN or Inf (0 after a finite loss)."),
            "eval": g("trainwatch_eval_metric", "Last value of each evaluation metric.", _LABELS + ("name",)),
            "memory": g("trainwatch_max_memory_allocated_bytes",
                        "Peak accelerator (or traced host) memory allocated, as the training loop reports it."),
            "hook_errors": Counter("trainwatch_hook_errors_total",
                                   "Failures of one part of a training hook (its part of that step is dropped, "
                                   "the rest is logged).", _LABELS + ("hook",), registry=registry),
        }
        _FAMILIES[id(registry)] = fam
    return fam


class TrainingMetrics:
    """The trainwatch_* series of one run and rank (handles looked up once)."""

    def __init__(self, run=None, registry=REGISTRY):
        self.run = run or _default_run()
        self.rank = str(_native.rank()[0])
        fam = _families(registry)
        self._eval = fam["eval"]
        self._hook_errors = fam["hook_errors"]
        for key, family in fam.items():
            if key not in ("eval", "hook_errors"):
                setattr(self, key, family.labels(self.run, self.rank))

    def eval_metric(self, name, value):
        self._eval.labels(self.run, self.rank, name).set(value)

    def hook_error(self, hook):
        self._hook_errors.labels(self.run, self.rank, hook).inc()


def _logger(logger):
    if logger is None or isinstance(logger, str):
        return logging.getLogger(logger or "trainer")
    return logger


def _finite(x):
    try:
        return math.isfinite(x)
    except TypeError:
        return True


class StepRecorder:
    """What StepTimer and PaddleCallback share: per step, the metrics; every
    log_freq steps (and at once for a non-finite loss) a "Step N" record;
    the first non-finite loss at ERROR with the losses before it; a jump of
    the peak memory by more than memory_spike_bytes at WARNING with the
    inputs' shapes.

    Each part of a step (samples, metrics, loss, memory, fields, log, eval,
    and the callback's own hooks) runs guarded: one that raises (a memory_fn
    returning None, a loss that is not a number) is dropped from that step
    and counted in trainwatch_hook_errors_total{hook=PART}
    (hook_errors[PART] without metrics), said once per part through the
    logger itself, and the rest of the step is recorded as usual.

    Under `trainwatch run` (TRAINWATCH_CONTROL set) each step ends with the
    control channel's poll: save (a callable save(path)) makes checkpoints,
    optimizer (or model._optimizer) has its lr scaled, and should_stop
    turns True on a stop request (docs/python.md, "Control channel")."""

    def __init__(self, logger=None, log_freq=10, metrics=True, run=None, registry=REGISTRY, batch_size=None,
                 memory_fn=None, memory_spike_bytes=512 << 20, history=5, save=None, optimizer=None):
        self.logger = _logger(logger)
        self.log_freq = max(int(log_freq), 1)
        self.metrics = TrainingMetrics(run, registry) if metrics else None
        self.batch_size = batch_size
        self.memory_fn = memory_fn
        self.memory_spike_bytes = memory_spike_bytes
        self.step = 0
        self.epoch = 0
        self._losses = deque(maxlen=history)
        self._nan_reported = False
        self._nan_streak = 0
        self._peak = None
        self._window = [0.0, 0.0, 0, 0]  # step time, data time, steps, samples since the last record
        self.hook_errors = {}  # part -> failures so far
        self._failed_parts = set()  # parts already said
        self.save = save
        self.optimizer = optimizer
        self.model = None  # a paddle.Model, set by the callback
        self._control = _control_module.current()  # None without TRAINWATCH_CONTROL

    @property
    def should_stop(self):
        """True once a stop request was acted on: a plain loop ends here."""
        return self._control is not None and self._control.should_stop

    def part(self, name, fn, *args):
        """fn(*args), or None when it raised: then counted and said once."""
        try:
            return fn(*args)
        except Exception as e:  # the training loop goes on
            self.hook_failed(name, e)
            return None

    def hook_failed(self, name, error):
        self.hook_errors[name] = self.hook_errors.get(name, 0) + 1
        try:
            if self.metrics:
                self.metrics.hook_error(name)
        except Exception:
            pass
        if name in self._failed_parts:
            return
        self._failed_parts.add(name)
        message = (f"trainwatch: the {name!r} part of the training hook failed at step {self.step}: "
                   f"{type(error).__name__}: {error}; it is left out of each step it fails in (counted in "
                   f"trainwatch_hook_errors_total{{hook=\"{name}\"}}), the rest keeps being logged")
        try:
            self.logger.warning("%s", message, extra={"hook": name, "global_step": self.step})
        except Exception:
            _stderr_once(message)

    def record(self, step_time, data_time, loss=None, lr=None, samples=None, inputs=None, **fields):
        """One finished step: its total time (data wait included), the data
        wait, and what the loop knows of it. Never raises."""
        try:
            self._record(step_time, data_time, loss, lr, samples, inputs, fields)
        except Exception as e:  # past every part's guard: still not the loop's problem
            self.hook_failed("record", e)

    def _record(self, step_time, data_time, loss, lr, samples, inputs, fields):
        self.step += 1
        samples = self.part("samples", _samples, samples, self.batch_size, inputs)
        step_time = self.part("step_time", _number, step_time) or 0.0
        data_time = self.part("data_time", _number, data_time) or 0.0
        w = self._window
        w[0] += step_time
        w[1] += data_time
        w[2] += 1
        w[3] += samples or 0
        lr = self.part("lr", _number, lr)
        if self.metrics:
            self.part("metrics", self._update_metrics, step_time, data_time, lr, samples)
        finite = True
        if loss is not None:
            loss = self.part("loss", _number, loss)
            if loss is not None:
                finite = math.isfinite(loss)
                self.part("nan_guard", self._nan_guard, loss, finite)
        memory = self.part("memory", self._memory, inputs) if self.memory_fn else None
        if (not finite and self._nan_streak == 1) or self.step % self.log_freq == 0:
            fields = self.part("fields", _fields, fields) or {}
            self.part("log", self._log_step, loss, lr, memory, fields)
        if self._control is not None:  # the whole cost without TRAINWATCH_CONTROL
            self._control.poll(self.step, self.save, self.optimizer, self.model, self)

    def _update_metrics(self, step_time, data_time, lr, samples):
        m = self.metrics
        m.step.set(self.step)
        m.epoch.set(self.epoch)
        m.step_time.observe(step_time)
        m.data_wait.observe(data_time)
        m.last.set_to_current_time()
        if lr is not None:
            m.lr.set(lr)
        if samples and step_time > 0:
            m.ips.set(samples / step_time)

    def _nan_guard(self, loss, finite):
        m = self.metrics
        if m:
            m.loss.set(loss)
        if finite:
            self._nan_streak = 0
            self._losses.append(loss)
        else:
            self._nan_streak += 1
            if m:
                m.nan.inc()
            if not self._nan_reported:
                self._nan_reported = True
                before = ", ".join(f"{x:.6g}" for x in self._losses)
                self.logger.error("non-finite loss at step %d: %s; the %d losses before it: %s", self.step, loss,
                                  len(self._losses), before or "none",
                                  extra={"epoch": self.epoch, "global_step": self.step})
        if m:
            m.nan_streak.set(self._nan_streak)

    def _memory(self, inputs):
        allocated, peak = self.memory_fn()
        peak = float(peak)
        if self.metrics:
            self.metrics.memory.set(peak)
        if self._peak is not None and peak - self._peak > self.memory_spike_bytes:
            fields = {"epoch": self.epoch, "global_step": self.step, "max_memory_allocated": int(peak), "increase_bytes": int(peak - self._peak)}
            for i, x in enumerate(_as_list(inputs)):
                fields[f"input{i}"] = summary(x)
            self.logger.warning("memory spike at step %d: peak allocated rose by %.1f MiB to %.1f MiB",
                                self.step, (peak - self._peak) / 2**20, peak / 2**20, extra=fields)
        self._peak = peak if self._peak is None else max(self._peak, peak)
        return peak

    def _log_step(self, loss, lr, memory, fields):
        w = self._window
        n = max(w[2], 1)
        extra = {"epoch": self.epoch, "global_step": self.step}
        if loss is not None:
            extra["loss"] = loss
        if lr is not None:
            extra["lr"] = lr
        extra["batch_cost"] = round(w[0] / n, 6)
        extra["reader_cost"] = round(w[1] / n, 6)
        if w[3] and w[0] > 0:
            extra["ips"] = round(w[3] / w[0], 3)
        if memory is not None:
            extra["max_mem_allocated"] = round(memory / 2**20, 1)
        extra.update(fields)
        self._window = [0.0, 0.0, 0, 0]
        self.logger.info("Step %d", self.step, extra=extra)

    def eval_end(self, metrics):
        extra = self.part("eval", _fields, metrics) or {}
        if self.metrics:
            for k, v in extra.items():
                if isinstance(v, (int, float)):
                    self.part("metrics", self.metrics.eval_metric, k, v)
        self.part("log", lambda: self.logger.info("Eval epoch %d", self.epoch, extra=extra))


# A LogRecord's own attribute names, which logging refuses in extra.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _samples(samples, batch_size, inputs):
    if samples is not None:
        return int(samples)
    return batch_size or _batch_len(inputs)


def _number(v):
    return None if v is None else float(_plain(v))


def _fields(fields):
    """The step's other fields, each converted alone: one that fails is
    left out, the others kept."""
    out = {}
    for k, v in fields.items():
        try:
            out[_field_name(k)] = _plain(v)
        except Exception:
            pass
    return out


def _field_name(key):
    key = str(key)
    return "field_" + key if key in _RESERVED else key


def _plain(v):
    """numpy scalars and one-element lists (hapi's loss) as Python numbers."""
    if isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if hasattr(v, "item") and getattr(v, "size", 1) == 1:
        try:
            return v.item()
        except Exception:
            return v
    return v


def _as_list(inputs):
    if inputs is None:
        return []
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    if isinstance(inputs, dict):
        return list(inputs.values())
    return [inputs]


def _batch_len(inputs):
    for x in _as_list(inputs):
        shape = getattr(x, "shape", None)
        if shape:
            return int(shape[0])
    return None


_said = set()


def _stderr_once(message):
    """Where the logger itself fails: stderr, once per message."""
    if message not in _said:
        _said.add(message)
        try:
            sys.stderr.write(message + "\n")
        except Exception:
            pass


class StepTimer:
    """Data wait vs compute per step, for custom loops (numpy, Paddle, PyTorch):

        timer = trainwatch.StepTimer(logger, log_freq=10, batch_size=64)
        for batch in timer.wrap(loader):      # the wait for each batch is data time
            loss = train_step(batch)
            timer.update(loss=loss, lr=lr)    # what this step knows

    or, without wrapping the loader, ``with timer.step(): ...`` around each
    step (data time is then the gap since the previous step ended).

    save= and optimizer= serve the control channel (StepRecorder); a loop
    under `trainwatch run` ends when should_stop turns True."""

    def __init__(self, logger=None, log_freq=10, metrics=True, run=None, registry=REGISTRY, batch_size=None,
                 memory_fn=None, memory_spike_bytes=512 << 20, save=None, optimizer=None):
        self.recorder = StepRecorder(logger, log_freq, metrics, run, registry, batch_size,
                                     memory_fn if memory_fn is not None else _framework_memory(),
                                     memory_spike_bytes, save=save, optimizer=optimizer)
        self._pending = {}
        self._last_end = None
        self._start = None
        self._data = 0.0
        self._inputs = None

    @property
    def should_stop(self):
        return self.recorder.should_stop

    @property
    def epoch(self):
        return self.recorder.epoch

    @epoch.setter
    def epoch(self, value):
        self.recorder.epoch = value

    def update(self, **values):
        """loss=, lr=, samples=, any other fields, for the step under way."""
        self._pending.update(values)

    def wrap(self, iterable):
        it = iter(iterable)
        before = time.perf_counter()
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            self._start = time.perf_counter()
            self._data = self._start - before
            self._inputs = batch
            yield batch
            before = self._finish()
            if self.recorder.should_stop:  # a stop request: the loop ends after this step's record
                return

    __call__ = wrap

    def step(self):
        return _StepContext(self)

    def _begin(self):
        now = time.perf_counter()
        self._data = now - self._last_end if self._last_end is not None else 0.0
        self._start = now

    def _finish(self):
        end = time.perf_counter()
        pending, self._pending = self._pending, {}
        inputs = pending.pop("inputs", self._inputs)
        self._inputs = None
        self.recorder.record(self._data + (end - self._start), self._data, inputs=inputs, **pending)
        self._last_end = end
        return end


class _StepContext:
    def __init__(self, timer):
        self._timer = timer

    def __enter__(self):
        self._timer._begin()
        return self._timer

    def __exit__(self, *exc):
        self._timer._finish()


class PaddleCallbackCore:
    """The hapi callback's body (paddle.callbacks.Callback's methods), usable
    without paddle: a loop that calls these in hapi's order gets the same
    records and metrics. trainwatch.PaddleCallback adds the paddle base class
    when paddle imports.

    Under `trainwatch run` each train batch end polls the control channel:
    checkpoints with save (a callable save(path)) or model.save(path), lr
    scaled on optimizer or model._optimizer, and a stop request ends fit
    after the batch (model.stop_training, num_iters)."""

    def __init__(self, logger=None, log_freq=10, metrics=True, run=None, registry=REGISTRY, memory_fn=None,
                 memory_spike_bytes=512 << 20, save=None, optimizer=None):
        self.params = {}
        self.model = None
        self.recorder = StepRecorder(logger, log_freq, metrics, run, registry, None,
                                     memory_fn if memory_fn is not None else _framework_memory(),
                                     memory_spike_bytes, save=save, optimizer=optimizer)
        self._batch_start = None
        self._last_end = None
        self._inputs = None

    # hapi's Callback API
    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self.model = model
        self.recorder.model = model

    def set_inputs(self, inputs):
        """The next batch's inputs, for the memory-spike warning (hapi does
        not hand them to callbacks)."""
        self._inputs = inputs

    def on_train_begin(self, logs=None):
        self.recorder.part("on_train_begin", lambda: self.recorder.logger.info(
            "train begin", extra={k: v for k, v in dict(self.params or {}).items() if isinstance(v, (int, float, str))}))

    def on_train_end(self, logs=None):
        self.recorder.part("on_train_end", lambda: self.recorder.logger.info(
            "train end", extra={"steps": self.recorder.step}))

    def on_epoch_begin(self, epoch, logs=None):
        self.recorder.part("on_epoch_begin", self._epoch_begin, epoch)

    def _epoch_begin(self, epoch):
        self.recorder.epoch = int(epoch) + 1

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, step, logs=None):
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, step, logs=None):
        self.recorder.part("on_train_batch_end", self._train_batch_end, logs)

    def _train_batch_end(self, logs):
        end = time.perf_counter()
        logs = dict(logs or {})
        start = self._batch_start if self._batch_start is not None else end
        reader = logs.get("reader_cost")
        if reader is None:
            reader = start - self._last_end if self._last_end is not None else 0.0
        self._last_end = end
        fields = {k: v for k, v in logs.items()
                  if k not in ("loss", "batch_size", "reader_cost", "batch_cost", "step", "steps")}
        batch_cost = logs.get("batch_cost")
        step_time = batch_cost if batch_cost is not None else self.recorder.part(
            "step_time", lambda: float(reader) + (end - start))
        inputs, self._inputs = self._inputs, None
        self.recorder.record(step_time, reader, loss=logs.get("loss"), lr=self._lr(), samples=logs.get("batch_size"),
                             inputs=inputs, **fields)

    def on_eval_begin(self, logs=None):
        pass

    def on_eval_end(self, logs=None):
        self.recorder.part("on_eval_end", lambda: self.recorder.eval_end(
            {k: v for k, v in dict(logs or {}).items() if k not in ("batch_size", "steps")}))

    def on_eval_batch_begin(self, step, logs=None):
        pass

    def on_eval_batch_end(self, step, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_predict_batch_begin(self, step, logs=None):
        pass

    def on_predict_batch_end(self, step, logs=None):
        pass

    def _lr(self):
        opt = self.recorder.optimizer or getattr(self.model, "_optimizer", None)
        get_lr = getattr(opt, "get_lr", None)
        try:
            return float(get_lr()) if get_lr else None
        except Exception:
            return None

    def fit(self, model, *args, **kwargs):
        """model.fit(..., callbacks=[self, ...]) with the exception that ends
        it logged at ERROR with its traceback and the step (hapi has no
        exception hook), then raised again."""
        callbacks = list(kwargs.pop("callbacks", None) or [])
        if self not in callbacks:
            callbacks.append(self)
        with self.guard():
            return model.fit(*args, callbacks=callbacks, **kwargs)

    def guard(self):
        """with callback.guard(): a block whose exception is logged with its
        traceback and the step, then raised again."""
        return _Guard(self.recorder)


class _Guard:
    def __init__(self, recorder):
        self._recorder = recorder

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if typ is not None and not issubclass(typ, (KeyboardInterrupt, GeneratorExit)):
            self._recorder.logger.error("training failed at step %d: %s: %s", self._recorder.step, typ.__name__,
                                        value, exc_info=(typ, value, tb),
                                        extra={"step": self._recorder.step})
        return False


def _framework_memory():
    """(allocated, max allocated) bytes of the GPU from paddle.device.cuda or
    torch.cuda, whichever the script imported and has a GPU; else None."""
    paddle = sys.modules.get("paddle")
    try:
        if paddle is not None and paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0:
            cuda = paddle.device.cuda
            return lambda: (cuda.memory_allocated(), cuda.max_memory_allocated())
    except Exception:
        pass
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return lambda: (torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
    except Exception:
        pass
    return None


def make_paddle_callback_class():
    """PaddleCallback: a paddle.callbacks.Callback when paddle imports,
    else the duck-typed core."""
    try:
        import importlib.util
        if importlib.util.find_spec("paddle") is None:
            raise ImportError
        import paddle.callbacks
        base = paddle.callbacks.Callback
    except Exception:
        return type("PaddleCallback", (PaddleCallbackCore,), {"__module__": "trainwatch"})

    class PaddleCallback(PaddleCallbackCore, base):
        def __init__(self, *args, **kwargs):
            base.__init__(self)
            PaddleCallbackCore.__init__(self, *args, **kwargs)

    PaddleCallback.__module__ = "trainwatch"
    return PaddleCallback
