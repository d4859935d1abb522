"""trainwatch: logging, Prometheus metrics and training hooks for a training
script, backed by libtrainwatch (docs/python.md).

    import trainwatch
    log = trainwatch.setup_logger("trainer", log_file="train.log")
    trainwatch.log_environment(log)
    steps = trainwatch.Counter("train_steps", "Optimizer steps.")
    trainwatch.start_http_server(9464)
"""
from . import _native
from .control import Control
from .control import current as get_control
from .hooks import PaddleCallbackCore, StepRecorder, StepTimer, TrainingMetrics
from .logs import Handler, Logger, ValueSummary, get_logger, log_environment, setup_logger, summary
from .metrics import (CONTENT_TYPE_LATEST, CONTENT_TYPE_OPENMETRICS, DEFAULT_BUCKETS, INF, REGISTRY,
                      CardinalityError, CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, PushError,
                      delete_from_gateway, generate_latest, push_to_gateway, pushadd_to_gateway, start_http_server,
                      write_to_textfile)

__version__ = "0.1.0"


def __getattr__(name):
    # Built on first use: importing paddle is slow, and only this needs it.
    if name == "PaddleCallback":
        from .hooks import make_paddle_callback_class
        cls = make_paddle_callback_class()
        globals()["PaddleCallback"] = cls
        return cls
    raise AttributeError(f"module 'trainwatch' has no attribute {name!r}")


__all__ = [
    "CONTENT_TYPE_LATEST", "CONTENT_TYPE_OPENMETRICS", "DEFAULT_BUCKETS", "INF", "REGISTRY", "CardinalityError",
    "CollectorRegistry", "Control", "Counter", "Enum", "Gauge", "Handler", "Histogram", "Info", "Logger", "PaddleCallback",
    "PaddleCallbackCore", "PushError", "StepRecorder", "StepTimer", "TrainingMetrics", "ValueSummary",
    "delete_from_gateway", "generate_latest", "get_control", "get_logger", "log_environment", "push_to_gateway",
    "pushadd_to_gateway", "setup_logger", "start_http_server", "summary", "write_to_textfile",
]
