"""The in-process half of the control channel `trainwatch run` opens to a
training process (protocol v1, docs/python.md "Control channel"): an alert
acts on the run.

With TRAINWATCH_CONTROL=PATH set, importing trainwatch opens PATH (the
supervisor appends one JSON request per line), registers faulthandler on
TRAINWATCH_STACK_SIGNAL (default SIGUSR2) writing into a pipe a native
thread turns into one log record per dump, and says hello in PATH.ack.
At each step boundary the hooks (StepRecorder, StepTimer, PaddleCallback)
call Control.poll(step): nothing new costs one fstat in C; due requests
(at_step reached, written after the import, id not seen) are acted on:

    checkpoint  save(path) or model.save(path), path CHECKPOINT_DIR/step<N>
    stop        a checkpoint, then should_stop (and a paddle.Model's fit ends)
    lr          the learning rate times factor (paddle optimizer, LRScheduler,
                torch-style param_groups)

Each is one log record and one reply line in PATH.ack (done / failed /
ignored, with a detail). Nothing here raises into the training loop.

Without TRAINWATCH_CONTROL, current() is None and the hooks skip all of
this with one attribute check.
"""
import atexit
import faulthandler
import json
import logging
import math
import multiprocessing
import os
import signal
import sys
import time

from . import _native

IMPORT_TIME = time.time()
ACTIONS = ("checkpoint", "stop", "lr")

_control = None  # the process's Control, or None
_stack_signal = None  # the signal faulthandler dumps on, once registered


def current():
    """The process's Control (TRAINWATCH_CONTROL is set), else None."""
    return _control


def _rank():
    try:
        return _native.rank()[0]
    except Exception:
        return 0


def _one_line(error):
    text = f"{type(error).__name__}: {error}"
    return text.splitlines()[0] if text else type(error).__name__


class Control:
    """The request file of this process: poll(step) at each step boundary.

    should_stop becomes True after a stop request: a plain loop checks it
    (StepRecorder.should_stop and StepTimer.should_stop read it too)."""

    def __init__(self, path, checkpoint_dir=None, logger=None):
        self.path = path
        self.checkpoint_dir = checkpoint_dir or os.environ.get("TRAINWATCH_CHECKPOINT_DIR") or "checkpoints"
        self.logger = logger
        self.should_stop = False
        self.pending = []  # requests due at a later step, by id
        self.seen = set()  # ids acted on (or refused)
        self.counts = {}  # result -> requests
        self.errors = {}  # kind -> failures
        self.history = []  # the replies written, for tests and the curious
        self._said = set()
        self._hello_done = False

    # ---- the step boundary ---------------------------------------------------------------

    def poll(self, step, save=None, optimizer=None, model=None, recorder=None):
        """Acts on the requests due at `step` (the global step just finished).
        save: a callable save(path); optimizer: the one whose lr to scale
        (else model._optimizer); model: a paddle.Model (save(), and its fit
        ends on stop); recorder: the StepRecorder whose logger and metrics
        are used. Returns the replies written (a tuple). Never raises."""
        try:
            lines = _native.control_poll()
        except Exception as e:
            self._error("read", e, recorder)
            lines = None
        if lines is None and not self.pending:
            return ()
        try:
            return self._apply(step, lines or (), save, optimizer, model, recorder)
        except Exception as e:  # past every guard below: still not the loop's problem
            self._error("apply", e, recorder)
            return ()

    def _apply(self, step, lines, save, optimizer, model, recorder):
        if not self._hello_done:
            self.hello()
        replies = []
        for line in lines:
            request = self._parse(line, step, recorder, replies)
            if request is not None:
                self.pending.append(request)
        if not self.pending:
            return tuple(replies)
        due = [r for r in self.pending if r.get("at_step") is None or step >= r["at_step"]]
        if due:
            self.pending = [r for r in self.pending if r not in due]
            for request in sorted(due, key=lambda r: r["id"]):
                replies.append(self._act(request, step, save, optimizer, model, recorder))
        return tuple(replies)

    def _parse(self, line, step, recorder, replies):
        """The request of one line, or None (then refused with a reply)."""
        if not line.strip():
            return None
        try:
            request = json.loads(line)
        except ValueError as e:
            replies.append(self._reply(None, None, "ignored", step, f"malformed line: {e}", recorder, line=line))
            return None
        if not isinstance(request, dict):
            replies.append(self._reply(None, None, "ignored", step, "malformed line: not a JSON object", recorder,
                                       line=line))
            return None
        rid, action = request.get("id"), request.get("action")
        if not isinstance(rid, int) or isinstance(rid, bool):
            replies.append(self._reply(None, action, "ignored", step, "malformed request: no integer id", recorder,
                                       request=request))
            return None
        if rid in self.seen:
            replies.append(self._reply(rid, action, "ignored", step, "id already acted on", recorder,
                                       request=request))
            return None
        self.seen.add(rid)
        when = request.get("time")
        if isinstance(when, (int, float)) and not isinstance(when, bool) and when < IMPORT_TIME:
            replies.append(self._reply(rid, action, "ignored", step, "written before this process started",
                                       recorder, request=request))
            return None
        if action not in ACTIONS:
            replies.append(self._reply(rid, action, "ignored", step, f"unknown action {action!r}", recorder,
                                       request=request))
            return None
        at = request.get("at_step")
        if at is not None and (not isinstance(at, (int, float)) or isinstance(at, bool)):
            replies.append(self._reply(rid, action, "ignored", step, "malformed request: at_step is not a number",
                                       recorder, request=request))
            return None
        if action == "lr":
            factor = request.get("factor")
            if (not isinstance(factor, (int, float)) or isinstance(factor, bool) or not math.isfinite(factor)
                    or factor <= 0):
                replies.append(self._reply(rid, action, "ignored", step, "lr needs a factor > 0", recorder,
                                           request=request))
                return None
        return request

    # ---- actions ----------------------------------------------------------------------

    def _act(self, request, step, save, optimizer, model, recorder):
        action = request["action"]
        fields = {}
        if action == "checkpoint":
            result, detail = self._checkpoint(step, save, model, recorder)
        elif action == "stop":
            result, detail = self._checkpoint(step, save, model, recorder)
            self._stop(model)
            if result == "done":
                detail = f"stopped at step {step} after the checkpoint ({detail})"
            elif result == "failed":
                detail = f"stopped at step {step}; the checkpoint failed: {detail}"
            else:
                detail = f"stopped at step {step} without a checkpoint ({detail})"
            result = "done"
        else:
            result, detail, fields = self._lr(request["factor"], optimizer, model, recorder)
        return self._reply(request["id"], action, result, step, detail, recorder, request=request, fields=fields)

    def _checkpoint(self, step, save, model, recorder):
        path = os.path.join(self.checkpoint_dir, f"step{step}")
        fn = save if save is not None else getattr(model, "save", None)
        if not callable(fn):
            return "ignored", "no save function and the model has no save()"
        try:
            made = fn(path)
        except Exception as e:
            self._error("checkpoint", e, recorder, said=True)
            return "failed", _one_line(e)
        return "done", f"saved {made if isinstance(made, (str, os.PathLike)) else path}"

    def _stop(self, model):
        self.should_stop = True
        if model is not None:
            try:
                # hapi's fit reads stop_training at the end of an epoch; mid-epoch it
                # ends _run_one_epoch when num_iters counts down to 0 after a batch
                model.stop_training = True
                model.num_iters = 1
            except Exception:
                pass

    def _lr(self, factor, optimizer, model, recorder):
        opt = optimizer if optimizer is not None else getattr(model, "_optimizer", None)
        if opt is None:
            return "ignored", "no optimizer (pass optimizer=, or a model with an optimizer)", {}
        try:
            old, new = scale_lr(opt, factor)
        except Exception as e:
            self._error("lr", e, recorder, said=True)
            return "failed", _one_line(e), {}
        return "done", f"lr {old:.6g} -> {new:.6g}", {"lr_old": old, "lr_new": new}

    # ---- replies, records, errors ---------------------------------------------------------

    def hello(self):
        self._hello_done = True
        line = {"hello": 1, "pid": os.getpid(), "rank": _rank(), "stack_signal": _stack_signal,
                "time": round(time.time(), 3)}
        if not _native.control_reply(json.dumps(line, separators=(",", ":"))):
            self._count_error("reply")

    def _reply(self, rid, action, result, step, detail, recorder, request=None, line=None, fields=None):
        self.counts[result] = self.counts.get(result, 0) + 1
        reply = {"id": rid, "pid": os.getpid(), "rank": _rank(), "action": action, "result": result, "step": step,
                 "detail": detail}
        try:
            text = json.dumps(reply, separators=(",", ":"), default=str)
            if not _native.control_reply(text):
                self._count_error("reply", recorder)
        except Exception as e:
            self._error("reply", e, recorder)
        self.history.append(reply)
        self._log(reply, request, line, fields or {}, recorder)
        return reply

    def _logger(self, recorder):
        if recorder is not None:
            return recorder.logger
        return self.logger or logging.getLogger("trainer")

    def _log(self, reply, request, line, fields, recorder):
        """One record per request: WARNING when it changed the run or failed."""
        extra = {"control_id": reply["id"], "action": reply["action"], "result": reply["result"],
                 "global_step": reply["step"], "detail": reply["detail"]}
        if request is not None and request.get("alert") is not None:
            extra["alert"] = str(request["alert"])
        if line is not None:
            extra["line"] = line[:200]
        extra.update(fields)
        level = logging.INFO if reply["result"] == "ignored" else logging.WARNING
        alert = f" (alert {extra['alert']})" if "alert" in extra else ""
        try:
            self._logger(recorder).log(level, "control: %s%s at step %s: %s: %s", reply["action"] or "request",
                                       alert, reply["step"], reply["result"], reply["detail"], extra=extra)
        except Exception as e:
            self._count_error("log", recorder)
            _stderr_once(f"trainwatch: a control record could not be logged: {_one_line(e)}", self._said)

    def _count_error(self, kind, recorder=None):
        self.errors[kind] = self.errors.get(kind, 0) + 1
        metrics = getattr(recorder, "metrics", None)
        if metrics is not None:
            try:
                metrics.hook_error("control_" + kind)
            except Exception:
                pass

    def _error(self, kind, error, recorder=None, said=False):
        """Counted (trainwatch_hook_errors_total{hook="control_KIND"} with a
        recorder); said once per kind, unless its record says it (said)."""
        self._count_error(kind, recorder)
        if said or kind in self._said:
            return
        self._said.add(kind)
        message = (f"trainwatch: the control channel's {kind} failed: {_one_line(error)}; further failures are "
                   f"counted (trainwatch_hook_errors_total{{hook=\"control_{kind}\"}}), not said")
        try:
            self._logger(recorder).warning("%s", message, extra={"hook": "control_" + kind})
        except Exception:
            _stderr_once(message, set())

    def _after_fork(self):
        # a forked child is not the rank that said hello: it acts on nothing
        self.pending = []
        self._hello_done = True


def _stderr_once(message, said):
    if message in said:
        return
    said.add(message)
    try:
        sys.stderr.write(message + "\n")
    except Exception:
        pass


# ---- learning rates -------------------------------------------------------------------------


def _is_scheduler(x):
    return hasattr(x, "base_lr") and hasattr(x, "last_lr") and callable(getattr(x, "step", None))


def _scale_scheduler(sched, factor):
    """A paddle LRScheduler: base_lr (what get_lr() computes from) and
    last_lr (what the optimizer reads now); a wrapped scheduler or rate
    (LinearWarmup's learning_rate) and piecewise values too."""
    sched.base_lr = sched.base_lr * factor
    sched.last_lr = sched.last_lr * factor
    inner = getattr(sched, "learning_rate", None)
    if _is_scheduler(inner):
        _scale_scheduler(inner, factor)
    elif isinstance(inner, (int, float)) and not isinstance(inner, bool):
        sched.learning_rate = inner * factor
    values = getattr(sched, "values", None)
    if isinstance(values, list) and all(isinstance(v, (int, float)) for v in values):
        sched.values = [v * factor for v in values]


def scale_lr(optimizer, factor):
    """Multiplies the optimizer's learning rate by factor; returns (old, new).
    torch-style param_groups: every group's lr (and initial_lr, which a
    scheduler made later starts from); a paddle optimizer with an
    LRScheduler: the scheduler; else get_lr()/set_lr()."""
    groups = getattr(optimizer, "param_groups", None)
    if isinstance(groups, (list, tuple)) and groups and all(isinstance(g, dict) and "lr" in g for g in groups):
        old = float(groups[0]["lr"])
        for g in groups:
            g["lr"] = g["lr"] * factor
            if "initial_lr" in g:
                g["initial_lr"] = g["initial_lr"] * factor
        return old, float(groups[0]["lr"])
    sched = getattr(optimizer, "_learning_rate", None)
    get_lr = getattr(optimizer, "get_lr", None)
    if _is_scheduler(sched):
        old = float(get_lr()) if callable(get_lr) else float(sched.last_lr)
        _scale_scheduler(sched, factor)
        return old, float(get_lr()) if callable(get_lr) else float(sched.last_lr)
    set_lr = getattr(optimizer, "set_lr", None)
    if callable(get_lr) and callable(set_lr):
        old = float(get_lr())
        set_lr(old * factor)
        return old, float(get_lr())
    raise TypeError(f"{type(optimizer).__name__} has neither param_groups nor get_lr()/set_lr()")


# ---- at import ------------------------------------------------------------------------------


def _signal_number():
    text = os.environ.get("TRAINWATCH_STACK_SIGNAL")
    if not text:
        return signal.SIGUSR2
    try:
        return int(text)
    except ValueError:
        return int(getattr(signal, text.upper() if text.upper().startswith("SIG") else "SIG" + text.upper()))


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _register_stacks():
    """faulthandler on the signal, into the native reader's pipe. chain only
    when something else handles the signal: chaining to the default action
    of SIGUSR2 (terminate) would kill the rank at its first dump."""
    global _stack_signal
    number = _signal_number()
    fd = _native.control_stacks_start(int(number), _signal_name(number), _rank())
    previous = signal.getsignal(number)
    chain = previous not in (signal.SIG_DFL, None)
    faulthandler.register(number, file=fd, all_threads=True, chain=chain)
    _stack_signal = int(number)
    atexit.register(_native.control_drain)


def log_to(router, name):
    """Stack dumps go to this trainwatch router's sinks (setup_logger and
    Handler call it); a no-op without a registered dump signal."""
    if _stack_signal is None:
        return
    try:
        _native.control_log_to(router, name)
    except Exception:
        pass


def _after_fork_in_child():
    if _control is not None:
        _control._after_fork()


def _start():
    global _control
    path = os.environ.get("TRAINWATCH_CONTROL")
    if not path and not os.environ.get("TRAINWATCH_STACK_SIGNAL"):
        return
    try:
        _register_stacks()
    except Exception as e:
        _stderr_once(f"trainwatch: no stack dumps on signal: {_one_line(e)}", set())
    if not path:
        return
    control = Control(path)
    try:
        _native.control_open(path)
    except Exception as e:
        control._error("open", e)
    _control = control
    os.register_at_fork(after_in_child=_after_fork_in_child)
    # a multiprocessing child (a data-loader worker, a spawned rank) says
    # hello when it first polls, not at import: a worker never polls
    if multiprocessing.parent_process() is None:
        control.hello()


_start()
