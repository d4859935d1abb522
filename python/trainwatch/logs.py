"""Logging on libtrainwatch: a standard logging.Logger whose handler is
trainwatch's C sinks (rotation, JSON lines, rank-0 console, per-rank file
names, redaction), plus a direct logger that skips LogRecord altogether.

Nothing here raises into a training loop: a record that cannot be written
is dropped, counted in trainwatch_python_log_errors_total and said once on
stderr (logging's own handleError would print a traceback per record).
"""
import logging
import os
import platform
import sys
import warnings

from . import _native
from . import control as _control


# emit() looks for extra fields only in records with more members than this
_native.set_plain_record(logging.LogRecord("trainwatch", logging.INFO, __file__, 1, "", (), None, func="f",
                                           sinfo=None))


def _is_level(value):
    """A logging level given where a file name is expected (the old first argument)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and isinstance(logging.getLevelName(value.upper()), int)


def _level(value):
    if value is None:
        return 0
    return _native.level_parse(value)


class Handler(logging.Handler):
    """A logging.Handler writing through libtrainwatch. Give it sinks in the
    constructor or with add_file/add_console; usable on any logger:

        logging.getLogger("trainer").addHandler(trainwatch.Handler("train.log", maxBytes=10 << 20, backupCount=5))

    The positional arguments are logging.FileHandler's and
    RotatingFileHandler's (filename, mode "a" or "w", maxBytes, backupCount,
    encoding: UTF-8 only, delay: the file is opened at once); the rest are
    keyword-only.

    Formatting is libtrainwatch's (``pattern`` in Python logging's %-names,
    the default ``%(asctime)s | %(levelname)s | %(name)s | %(funcName)s:%(lineno)d
    | %(message)s``); ``extra={...}`` becomes typed fields (`` key=value`` in
    text, members in JSON); exc_info/stack_info tracebacks follow the message
    in text files and are one field (``exception``, ``stack``) in JSON.
    setFormatter is accepted and not used."""

    def __init__(self, filename=None, mode="a", maxBytes=0, backupCount=0, encoding=None, delay=False,
                 errors=None, *, level=logging.NOTSET, file=None, json_file=None, console=False,
                 console_level=None, max_bytes=0, backup_count=0, pattern=None, rank_aware=True,
                 flush_level="DEBUG"):
        if _is_level(filename):  # the 0.x form Handler(level, file=...)
            warnings.warn("trainwatch.Handler(level, ...) is deprecated: the first argument is the file name, as "
                          "for logging.FileHandler; pass level=... instead", DeprecationWarning, stacklevel=2)
            level, filename = filename, None
        if filename is not None and file is not None:
            raise TypeError("trainwatch.Handler: give the file as filename or as file=, not both")
        if mode not in ("a", "w"):
            raise ValueError(f"trainwatch.Handler: mode {mode!r}: only 'a' (append) and 'w' (truncate) are supported")
        if encoding is not None and encoding.lower().replace("-", "").replace("_", "") != "utf8":
            raise ValueError(f"trainwatch.Handler: encoding {encoding!r}: files are written in UTF-8")
        super().__init__(_level(level))
        self._router = _native.Router()
        self._pattern = pattern
        file = filename if filename is not None else file
        max_bytes = max_bytes or maxBytes
        backup_count = backup_count or backupCount
        if file:
            self.add_file(file, max_bytes=max_bytes, backup_count=backup_count, pattern=pattern,
                          flush_level=flush_level, truncate=mode == "w")
        if json_file:
            self.add_file(json_file, json=True, max_bytes=max_bytes, backup_count=backup_count,
                          flush_level=flush_level, truncate=mode == "w")
        if console:
            self.add_console(level=console_level, pattern=pattern, rank_aware=rank_aware)
        self._fast_path()
        _control.log_to(self._router, "trainwatch")  # stack dumps (TRAINWATCH_CONTROL) go to these sinks

    def add_file(self, path, level=None, *, json=False, max_bytes=0, backup_count=0, pattern=None,
                 flush_level="DEBUG", truncate=False):
        """A (rotating) file: "{rank}" in path becomes the rank; rotation as
        RotatingFileHandler(maxBytes, backupCount); missing directories are
        created (as mkdir -p). Records at or above flush_level are written at
        once (DEBUG, the default: every record, as logging does); lower ones
        may wait in a 64 KiB buffer written when full, at a higher record, at
        flush(), at exit and on a fatal signal. Raises OSError naming the
        expanded path if the file cannot be opened."""
        path = os.fspath(path)
        expanded = path.replace("{rank}", str(_native.rank()[0]))
        try:
            if truncate:
                os.makedirs(os.path.dirname(expanded) or ".", exist_ok=True)
                open(expanded, "w").close()
            self._router.add_file(path, level=_level(level), pattern=pattern or self._pattern, json=json,
                                  max_bytes=int(max_bytes), backups=int(backup_count),
                                  flush_level=_level(flush_level))
        except OSError as e:
            # the library's status has lost the errno: ask the system again,
            # for Python's own exception (NotADirectoryError, PermissionError...)
            # on the expanded path
            try:
                with open(expanded, "a"):
                    pass
            except OSError as real:
                raise real from None
            raise OSError(f"trainwatch: cannot open the log file {expanded}: {e}") from None
        return self

    def add_console(self, level=None, *, pattern=None, json=False, rank_aware=True, color=-1):
        """stderr; with rank_aware, ranks other than 0 write WARNING and up only."""
        self._router.add_console(level=_level(level), pattern=pattern or self._pattern, json=json, color=color,
                                 other_ranks_level=logging.WARNING if rank_aware else logging.DEBUG)
        return self

    # Without filters, handle() is the C emit itself (no Python frame, no
    # handler lock: libtrainwatch's sinks are thread-safe); with filters, the
    # method below runs them first.
    def _fast_path(self):
        if self.filters:
            self.__dict__.pop("handle", None)
        else:
            self.handle = self._router.emit

    def addFilter(self, filter):
        super().addFilter(filter)
        self._fast_path()

    def removeFilter(self, filter):
        super().removeFilter(filter)
        self._fast_path()

    def handle(self, record):
        if self.filters and not self.filter(record):
            return False
        self._router.emit(record)  # tracebacks as logging formats them; never raises
        return True

    def emit(self, record):
        self._router.emit(record)

    def flush(self):
        self._router.flush()

    def fast_logger(self, name):
        """A direct logger writing to this handler's sinks under `name`:
        log.info("Step", step=3, loss=2.1), no LogRecord and no Python frame
        in between (filters of the logging module do not apply)."""
        return self._router.logger(name)


class Logger(logging.Logger):
    """The class of setup_logger's logger: a logging.Logger whose debug ...
    critical skip the LogRecord when its one trainwatch.Handler is the only
    thing that would see the record (no filters, no other handler, no
    propagation, no exc_info/stack_info/stacklevel): the message, args and
    extra go to the C sinks as logging would have written them. Anything
    else takes logging's own path."""

    _tw_handler = None

    def _tw_router(self, level, kwargs):
        """The handler's router when the direct path applies, else None."""
        h = self._tw_handler
        if (h is None or self.filters or self.propagate or h.filters or level < h.level
                or len(self.handlers) != 1 or self.handlers[0] is not h or (kwargs and kwargs.keys() - {"extra"})):
            return None
        return h._router

    # Each level calls the router itself (the caller is then one frame up);
    # logging's path gets stacklevel + 1 for this frame.
    def debug(self, msg, *args, **kwargs):
        if self.isEnabledFor(logging.DEBUG):
            router = self._tw_router(logging.DEBUG, kwargs)
            if router is not None:
                router.log(self.name, logging.DEBUG, msg, args, kwargs.get("extra"))
            else:
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._log(logging.DEBUG, msg, args, **kwargs)

    def info(self, msg, *args, **kwargs):
        if self.isEnabledFor(logging.INFO):
            router = self._tw_router(logging.INFO, kwargs)
            if router is not None:
                router.log(self.name, logging.INFO, msg, args, kwargs.get("extra"))
            else:
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._log(logging.INFO, msg, args, **kwargs)

    def warning(self, msg, *args, **kwargs):
        if self.isEnabledFor(logging.WARNING):
            router = self._tw_router(logging.WARNING, kwargs)
            if router is not None:
                router.log(self.name, logging.WARNING, msg, args, kwargs.get("extra"))
            else:
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._log(logging.WARNING, msg, args, **kwargs)

    def error(self, msg, *args, **kwargs):
        if self.isEnabledFor(logging.ERROR):
            router = self._tw_router(logging.ERROR, kwargs)
            if router is not None:
                router.log(self.name, logging.ERROR, msg, args, kwargs.get("extra"))
            else:
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._log(logging.ERROR, msg, args, **kwargs)

    def critical(self, msg, *args, **kwargs):
        if self.isEnabledFor(logging.CRITICAL):
            router = self._tw_router(logging.CRITICAL, kwargs)
            if router is not None:
                router.log(self.name, logging.CRITICAL, msg, args, kwargs.get("extra"))
            else:
                kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
                self._log(logging.CRITICAL, msg, args, **kwargs)

    fatal = critical


def _trainwatch_logger(name):
    """logging.getLogger(name) as a trainwatch.Logger: made so when new,
    its class changed when it is a plain logging.Logger (same layout)."""
    manager = logging.Logger.manager
    existing = manager.loggerDict.get(name)
    if isinstance(existing, logging.Logger):
        if type(existing) is logging.Logger:
            existing.__class__ = Logger
        return existing
    with logging._lock:  # logging's module lock (an RLock), held while the class is swapped
        previous = manager.loggerClass
        manager.loggerClass = Logger
        try:
            return logging.getLogger(name)
        finally:
            manager.loggerClass = previous


def _rank_path(path, rank_aware, world_size):
    path = os.fspath(path)
    if not rank_aware or world_size <= 1 or "{rank}" in path:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}_rank{{rank}}{ext}"


def setup_logger(name="trainer", log_file="train.log", max_bytes=10 * 1024 * 1024, backup_count=5, level="INFO",
                 console_level="WARNING", json_file=None, rank_aware=True, redact=True, pattern=None,
                 flush_level="DEBUG"):
    """A logging.Logger (a trainwatch.Logger: the same, with a direct path
    for debug ... critical) with one trainwatch.Handler: a rotating text file, a
    JSON-lines file (json_file), the console at console_level (None: no
    console; ranks other than 0 WARNING and up when rank_aware). With
    rank_aware and more than one rank, file names get "_rank{rank}" unless
    they have "{rank}". Calling it again returns the same logger as it is.
    The logger does not propagate to the root (no duplicate lines)."""
    logger = _trainwatch_logger(name)
    for h in logger.handlers:
        if isinstance(h, Handler) and getattr(h, "_tw_setup", False):
            return logger
    _native.redact(redact)
    world_size = _native.rank()[2]
    handler = Handler()
    handler._tw_setup = True
    _control.log_to(handler._router, name)
    if log_file:
        handler.add_file(_rank_path(log_file, rank_aware, world_size), max_bytes=max_bytes,
                         backup_count=backup_count, pattern=pattern, flush_level=flush_level)
    if json_file:
        handler.add_file(_rank_path(json_file, rank_aware, world_size), json=True, max_bytes=max_bytes,
                         backup_count=backup_count, flush_level=flush_level)
    if console_level is not None:
        handler.add_console(level=console_level, pattern=pattern, rank_aware=rank_aware)
    logger.setLevel(_level(level))
    logger.addHandler(handler)
    logger.propagate = False
    if isinstance(logger, Logger):
        logger._tw_handler = handler
    return logger


def _handlers_of(logger):
    while logger is not None:
        for h in logger.handlers:
            if isinstance(h, Handler):
                yield h
        logger = logger.parent if logger.propagate else None


def get_logger(name="trainer"):
    """The direct logger for `name`, writing to the sinks of the
    trainwatch.Handler on that logger (or an ancestor): the fast path.
    Raises ValueError when there is none (call setup_logger first)."""
    for h in _handlers_of(logging.getLogger(name)):
        return h.fast_logger(name)
    raise ValueError(f"no trainwatch.Handler on logger {name!r} or its parents (call trainwatch.setup_logger first)")


# ---- the environment record ------------------------------------------------------

_added = set()


def _add(name, value):
    if value is None or name in _added:
        return
    _added.add(name)
    try:
        _native.environment_add(name, str(value))
    except ValueError:
        pass  # more than libtrainwatch keeps


def _framework_versions():
    _add("python", platform.python_version())
    _add("python_implementation", platform.python_implementation())
    for module in ("numpy",):
        try:
            _add(module, __import__(module).__version__)
        except Exception:
            pass
    try:
        import paddle
        _add("paddle", paddle.__version__)
        _add("paddle_cuda", paddle.version.cuda())
        _add("paddle_cudnn", paddle.version.cudnn())
        _add("paddle_compiled_with_cuda", paddle.device.is_compiled_with_cuda())
        _add("paddle_gpu_count", paddle.device.cuda.device_count())
    except Exception:
        pass
    try:
        import torch
        _add("torch", torch.__version__)
        _add("torch_cuda", torch.version.cuda)
        _add("torch_cudnn", torch.backends.cudnn.version())
        _add("torch_gpu_count", torch.cuda.device_count())
    except Exception:
        pass


def log_environment(logger="trainer"):
    """Logs one INFO record "environment": libtrainwatch's facts (host, pid,
    argv, git commit/branch/dirty, OS, CPUs, memory, rank, CUDA_VISIBLE_DEVICES,
    NVIDIA driver and GPUs) plus Python, numpy, and paddle / torch when they
    import (version, CUDA, cuDNN, device count)."""
    if isinstance(logger, str):
        logger = logging.getLogger(logger)
    _framework_versions()
    handlers = list(_handlers_of(logger))
    for h in handlers:
        h._router.environment(logger.name)
    if not handlers:
        logger.info("environment", extra={"python": platform.python_version(), "argv": " ".join(sys.argv)})


# ---- summaries -------------------------------------------------------------------------


class ValueSummary:
    """A value's type and shape/length instead of its content; as a log field
    it is written <type shape=[...] size=N> (a JSON object in JSON lines)."""

    __slots__ = ("type_name", "shape", "size")

    def __init__(self, type_name, shape, size):
        self.type_name, self.shape, self.size = type_name, tuple(int(d) for d in shape), int(size)

    @property
    def _tw_summary(self):
        return (self.type_name, self.shape, self.size)

    def __str__(self):
        shape = ",".join(str(d) for d in self.shape)
        return f"<{self.type_name} shape=[{shape}] size={self.size}>"

    __repr__ = __str__


def _dtype_name(dtype):
    text = str(dtype)
    return text.rsplit(".", 1)[-1]


def summary(value):
    """trainwatch.summary(batch): what to log instead of the batch itself."""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        try:
            dims = tuple(int(d) for d in shape)
        except TypeError:
            dims = ()
        size = 1
        for d in dims:
            size *= d
        kind = "ndarray" if type(value).__module__ == "numpy" else "tensor"
        return ValueSummary(f"{kind} {_dtype_name(value.dtype)}", dims, size)
    if isinstance(value, (str, bytes, bytearray)):
        return ValueSummary(type(value).__name__, (), len(value))
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        return ValueSummary(type(value).__name__, (len(value),), len(value))
    try:
        n = len(value)
    except TypeError:
        return ValueSummary(type(value).__name__, (), -1)
    return ValueSummary(type(value).__name__, (n,), n)
