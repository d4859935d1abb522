"""python_smoke.py: one pass over every entry point of the trainwatch Python
package, short enough to run under valgrind (CTest valgrind_python, -O2
build: PYTHONMALLOC=malloc so valgrind sees CPython's allocations as the
extension's). Exits non-zero if a result is wrong."""
import logging
import os
import tempfile

import trainwatch as tw

os.chdir(tempfile.mkdtemp(prefix="tw-python-smoke-"))
log = tw.setup_logger("smoke", log_file="s.log", json_file="s.jsonl", max_bytes=3000, backup_count=2,
                      console_level=None, level="DEBUG")
tw.log_environment(log)
reg = tw.CollectorRegistry()
c = tw.Counter("smoke_steps", "Steps.", ["rank"], registry=reg, series_limit=4)
for i in range(6):
    try:
        c.labels(str(i)).inc(i)
    except tw.CardinalityError:
        pass
g = tw.Gauge("smoke_loss", "Loss.", registry=reg)
g.set(0.5)
h = tw.Histogram("smoke_seconds", "Time.", ["kind"], registry=reg, buckets=[0.1, 1])
h.labels("a").observe(0.2)
tw.Info("smoke_build", "Build.", registry=reg).info({"v": "1"})
tw.Enum("smoke_phase", "Phase.", states=["a", "b"], registry=reg).state("b")
kept = c.labels("1")
reg.unregister(c)
kept.inc()  # updates nothing, safely
fast = tw.get_logger("smoke")
for i in range(100):
    log.info("Step %d", i, extra={"loss": 0.5, "batch": tw.summary([1, 2, 3])})
    fast.debug("direct", step=i, text="x" * 50, ok=True, none=None)
log.info("%(a)s", {"a": "mapping"})
try:
    {}["missing"]
except KeyError:
    log.exception("failed", extra={"step": 3})
    fast.exception("failed directly")
other = logging.getLogger("smoke.plain")
other.addHandler(tw.Handler(file="plain.log"))
other.warning("plain %s", "logger", stack_info=True)
log.info("%d", "bad")  # counted, never raised
timer = tw.StepTimer(log, log_freq=3, batch_size=2, registry=reg)
for batch in timer.wrap([[1, 2]] * 7):
    timer.update(loss=float(len(batch)), lr=0.1)
cb = tw.PaddleCallbackCore(log, log_freq=2, registry=tw.CollectorRegistry())
cb.on_train_begin({})
cb.on_epoch_begin(0, {})
for step in range(4):
    cb.on_train_batch_begin(step, {})
    cb.on_train_batch_end(step, {"loss": [float("nan") if step == 3 else 1.0], "batch_size": 2})
cb.on_eval_end({"acc": 0.5})
cb.on_train_end({})
server = tw.start_http_server(0, registry=reg)
assert server.port > 0
server.stop()
text = tw.generate_latest(reg).decode()
assert 'smoke_loss 0.5' in text and "smoke_steps" not in text and 'smoke_phase{smoke_phase="b"} 1' in text, text
assert tw.REGISTRY.get_sample_value("trainwatch_python_log_errors_total") == 1.0
logging.shutdown()
every = {name: "".join(open(f).read() for f in sorted(os.listdir(".")) if f.startswith(name))
         for name in ("s.log", "s.jsonl")}
assert "Traceback" in every["s.log"] and '"exception":"Traceback' in every["s.jsonl"]
assert sorted(f for f in os.listdir(".") if f.startswith("s.log")) == ["s.log", "s.log.1", "s.log.2"]
print("ok")
