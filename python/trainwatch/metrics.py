"""Prometheus metrics shaped like prometheus_client, on libtrainwatch.

Counter, Gauge and Histogram subclass C types of trainwatch._native, so an
update (``g.set(x)``, ``c.inc()``, ``h.observe(t)``) is one C method call
and one atomic operation: no Python frame, no lock. Registration, names and
label checks are libtrainwatch's (the same errors as the C library, raised as
ValueError / CardinalityError). docs/python.md lists what differs from
prometheus_client.
"""
import functools
import os
import threading
import time

from . import _native

CardinalityError = _native.CardinalityError
PushError = _native.PushError

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# prometheus_client's defaults, so a script that moves over keeps its series.
DEFAULT_BUCKETS = (.005, .01, .025, .05, .075, .1, .25, .5, .75, 1.0, 2.5, 5.0, 7.5, 10.0, float("inf"))
INF = float("inf")


class CollectorRegistry:
    """A registry of metrics (libtrainwatch's tw_registry). REGISTRY is the
    process-wide one, which also has the process_* metrics."""

    def __init__(self, auto_describe=False, target_info=None, *, _default=False):
        self._native = _native.Registry(default=_default)
        self._metrics = {}

    def register(self, collector):
        if isinstance(collector, _Metric) and collector._registry is self:
            return
        raise TypeError("trainwatch registries hold trainwatch metrics only, registered when they are made "
                        "(custom collectors are not supported)")

    def unregister(self, metric):
        name = getattr(metric, "_name", None)
        if self._metrics.get(name) is not metric:
            raise KeyError(f"{name!r} is not registered here")
        del self._metrics[name]
        metric._tw_unregister()

    def get_sample_value(self, name, labels=None):
        """The value of one sample (e.g. 'steps_total', {'rank': '0'}), or None."""
        return self._native.get_sample_value(name, labels)

    def expose(self, openmetrics=False):
        return self._native.expose(openmetrics=openmetrics)


REGISTRY = CollectorRegistry(_default=True)
REGISTRY._native.process_collector()


def generate_latest(registry=REGISTRY):
    """The registry in the Prometheus text format 0.0.4, as bytes."""
    return registry._native.expose()


def write_to_textfile(path, registry):
    """The registry in the text format into path, atomically (a temporary
    file renamed over it): node_exporter's textfile collector reads it."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}"
    with open(tmp, "wb") as f:
        f.write(generate_latest(registry))
    os.replace(tmp, path)


class _Timer:
    """metric.time(): a context manager and a decorator."""

    def __init__(self, record):
        self._record = record
        self._start = None

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self._record(max(time.perf_counter() - self._start, 0.0))

    def __call__(self, f):
        @functools.wraps(f)
        def timed(*args, **kwargs):
            with _Timer(self._record):
                return f(*args, **kwargs)
        return timed


class _ExceptionCounter:
    def __init__(self, counter, exception):
        self._counter, self._exception = counter, exception

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if isinstance(value, self._exception):
            self._counter.inc()

    def __call__(self, f):
        @functools.wraps(f)
        def counted(*args, **kwargs):
            with _ExceptionCounter(self._counter, self._exception):
                return f(*args, **kwargs)
        return counted


class _InProgress:
    def __init__(self, gauge):
        self._gauge = gauge

    def __enter__(self):
        self._gauge.inc()

    def __exit__(self, *exc):
        self._gauge.dec()

    def __call__(self, f):
        @functools.wraps(f)
        def tracked(*args, **kwargs):
            with _InProgress(self._gauge):
                return f(*args, **kwargs)
        return tracked


def _full_name(name, namespace, subsystem, unit):
    full = "_".join(p for p in (namespace, subsystem, name) if p)
    if unit and not full.endswith("_" + unit):
        full += "_" + unit
    return full


class _Metric:
    """What Counter, Gauge and Histogram share on top of their C types."""

    _type = ""

    def _setup(self, name, documentation, labelnames, namespace, subsystem, unit, registry, buckets=None,
               series_limit=0):
        if not isinstance(name, str) or not isinstance(documentation, str):
            raise TypeError("name and documentation must be str")
        full = _full_name(name, namespace, subsystem, unit)
        if self._type == "counter" and full.endswith("_total"):
            full = full[:-len("_total")]
        if isinstance(labelnames, str):
            labelnames = (labelnames,)
        labelnames = tuple(labelnames)
        if registry is None:  # prometheus_client: not registered anywhere
            registry = CollectorRegistry()
        if not isinstance(registry, CollectorRegistry):
            raise TypeError(f"registry must be a trainwatch CollectorRegistry, not {type(registry).__name__}")
        self._tw_register(registry._native, full, documentation, labelnames, buckets, series_limit)
        self._name = full
        self._documentation = documentation
        self._registry = registry
        registry._metrics[full] = self

    def __repr__(self):
        name = getattr(self, "_name", None)
        if name is None:
            return f"{type(self).__name__}(labelvalues={self._labelvalues!r})"
        return f"{type(self).__name__}({name!r})"


class Counter(_native.CounterBase, _Metric):
    """A counter: inc(amount=1) with amount >= 0; exposed as NAME_total."""

    _type = "counter"

    def __init__(self, name, documentation, labelnames=(), namespace="", subsystem="", unit="",
                 registry=REGISTRY, *, series_limit=0):
        self._setup(name, documentation, labelnames, namespace, subsystem, unit, registry, series_limit=series_limit)

    def count_exceptions(self, exception=Exception):
        return _ExceptionCounter(self, exception)


class Gauge(_native.GaugeBase, _Metric):
    """A gauge: set, inc, dec, set_to_current_time, time(), track_inprogress()."""

    _type = "gauge"

    def __init__(self, name, documentation, labelnames=(), namespace="", subsystem="", unit="",
                 registry=REGISTRY, multiprocess_mode="all", *, series_limit=0):
        self._setup(name, documentation, labelnames, namespace, subsystem, unit, registry, series_limit=series_limit)

    def time(self):
        return _Timer(self.set)

    def track_inprogress(self):
        return _InProgress(self)


class Histogram(_native.HistogramBase, _Metric):
    """A histogram: observe(value), time(). buckets=None gives libtrainwatch's
    step-time buckets (5 ms .. 10 min), as `trainwatch run` exports."""

    _type = "histogram"

    def __init__(self, name, documentation, labelnames=(), namespace="", subsystem="", unit="",
                 registry=REGISTRY, buckets=DEFAULT_BUCKETS, *, series_limit=0):
        if "le" in (labelnames if not isinstance(labelnames, str) else (labelnames,)):
            raise ValueError("Invalid label name: le (reserved for histogram buckets)")
        self._setup(name, documentation, labelnames, namespace, subsystem, unit, registry,
                    buckets=None if buckets is None else tuple(float(b) for b in buckets),
                    series_limit=series_limit)

    def time(self):
        return _Timer(self.observe)


class Info:
    """An info metric NAME_info{key=value...} 1 (label-less only)."""

    def __init__(self, name, documentation, labelnames=(), namespace="", subsystem="", unit="",
                 registry=REGISTRY):
        if labelnames:
            raise ValueError("trainwatch.Info takes no labelnames (put every pair in info())")
        self._name = _full_name(name, namespace, subsystem, unit)
        self._documentation = documentation
        self._registry = registry
        self._gauge = None

    def info(self, val):
        if not isinstance(val, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in val.items()):
            raise ValueError("info() takes a dict of str to str")
        if self._gauge is not None:
            self._gauge._registry.unregister(self._gauge)
        keys = tuple(sorted(val))
        self._gauge = Gauge(self._name + "_info", self._documentation, keys, registry=self._registry)
        target = self._gauge.labels(*(val[k] for k in keys)) if keys else self._gauge
        target.set(1)


class Enum:
    """A state set NAME{NAME=state} 1 for the current state, 0 for the others
    (label-less only)."""

    def __init__(self, name, documentation, labelnames=(), namespace="", subsystem="", unit="",
                 registry=REGISTRY, states=None):
        if labelnames:
            raise ValueError("trainwatch.Enum takes no labelnames")
        if not states:
            raise ValueError(f"No states provided for Enum metric: {name}")
        full = _full_name(name, namespace, subsystem, unit)
        self._states = list(states)
        self._gauge = Gauge(full, documentation, (full,), registry=registry)
        self._children = [self._gauge.labels(s) for s in self._states]
        self.state(self._states[0])

    def state(self, state):
        index = self._states.index(state)
        for i, child in enumerate(self._children):
            child.set(1 if i == index else 0)


def start_http_server(port, addr="127.0.0.1", registry=REGISTRY, web_config_file=None):
    """Serves /metrics on addr:port from libtrainwatch's server (its own
    thread; TLS and basic auth from an exporter-toolkit web config file).
    Returns the server (.port, .stop()); it runs until stopped or exit."""
    host = f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
    server = _native.start_http_server(registry._native, f"{host}:{int(port)}", web_config_file)
    _servers.append(server)
    return server


_servers = []


def _gateway_url(gateway):
    return gateway if "://" in gateway else "http://" + gateway


def _grouping(grouping_key):
    return tuple((str(k), str(v)) for k, v in (grouping_key or {}).items())


def push_to_gateway(gateway, job, registry, grouping_key=None, timeout=30, handler=None):
    """PUT: replaces the whole group with the registry. Raises PushError."""
    _push(gateway, job, registry, grouping_key, timeout, handler, 0)


def pushadd_to_gateway(gateway, job, registry, grouping_key=None, timeout=30, handler=None):
    """POST: replaces the metrics of the same names in the group."""
    _push(gateway, job, registry, grouping_key, timeout, handler, 1)


def delete_from_gateway(gateway, job, grouping_key=None, timeout=30, handler=None):
    """DELETE: removes the group."""
    _push(gateway, job, CollectorRegistry(), grouping_key, timeout, handler, 2)


def _push(gateway, job, registry, grouping_key, timeout, handler, method):
    if handler is not None:
        raise TypeError("trainwatch pushes take no handler (libtrainwatch's HTTP client sends them)")
    _native.push(registry._native, _gateway_url(gateway), job, method, _grouping(grouping_key),
                 float(timeout or 0))
