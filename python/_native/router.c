/*
 * router.c: the logging half of trainwatch._native: Router, the C core of
 * trainwatch.Handler, and FastLogger, the direct log call.
 *
 * A Router owns two hidden libtrainwatch loggers ("trainwatch.python.N.text"
 * and ".json") holding its sinks; a record from any Python logger goes to
 * them with tw_log_write_as under the Python logger's name, so one handler
 * never writes another's records and the files show the right names. The
 * two loggers exist because a traceback is text after the message in a text
 * file but one field ("exception") in JSON.
 *
 * Failures: nothing raised here reaches the training loop. A record that
 * cannot be converted is dropped, counted in
 * trainwatch_python_log_errors_total, and said once on stderr
 * (log_fields.c, which also turns a record's extra= into fields).
 */
#include "log_fields.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "trainwatch/error.h"
#include "trainwatch/log.h"
#include "trainwatch/metrics.h"

static atomic_uint_fast64_t router_count;
static Py_ssize_t plain_record_size; /* members of a LogRecord made without extra (set_plain_record) */

/* ---- Router ---------------------------------------------------------------------- */

typedef struct router_object {
    PyObject ob_base; /* PyObject_HEAD */
    tw_py_state *st;  /* its module's, found once (the type, which the router holds, holds the module) */
    tw_logger *text, *json;
    int has_text, has_json;
    line_cache lines[LINE_SLOTS];
} router_object;

static PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (!PyArg_ParseTuple(args, ":Router") || (kw && PyDict_Size(kw))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Router() takes no arguments");
        return NULL;
    }
    tw_py_state *st = tw_py_state_of_type(type);
    if (!st)
        return PyErr_Format(PyExc_TypeError, "Router: not a trainwatch._native type");
    router_object *self = (router_object *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->st = st;
    char name[96];
    unsigned long long n = (unsigned long long)atomic_fetch_add(&router_count, 1);
    snprintf(name, sizeof name, "trainwatch.python.%llu.text", n);
    self->text = tw_logger_get(name);
    snprintf(name, sizeof name, "trainwatch.python.%llu.json", n);
    self->json = tw_logger_get(name);
    if (!self->text || !self->json) {
        Py_DECREF(self);
        return PyErr_Format(PyExc_RuntimeError, "no more loggers (at most %d)", TW_LOGGERS_MAX);
    }
    tw_logger_set_level(self->text, 1);
    tw_logger_set_level(self->json, 1);
    return (PyObject *)self;
}

static void router_dealloc(router_object *self)
{
    PyTypeObject *type = Py_TYPE(self);
    /* the sinks stay with libtrainwatch until exit (it has no sink removal) */
    for (size_t i = 0; i < LINE_SLOTS; i++)
        Py_CLEAR(self->lines[i].code);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* For control.c: the router's two libtrainwatch loggers (library-owned, so
 * they outlive the Python object), where a stack dump is written. */
int tw_py_router_loggers(tw_py_state *st, PyObject *o, tw_logger **text, tw_logger **json)
{
    if (!PyObject_TypeCheck(o, st->router_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a trainwatch._native.Router");
        return -1;
    }
    *text = ((router_object *)o)->text;
    *json = ((router_object *)o)->json;
    return 0;
}

static PyObject *router_add_console(router_object *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"level", "pattern", "color", "other_ranks_level", "json", NULL};
    tw_log_sink_options o = tw_log_sink_options_default();
    const char *pattern = NULL;
    int json = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|iziip:add_console", names, &o.level, &pattern, &o.color,
                                     &o.other_ranks_level, &json))
        return NULL;
    o.pattern = pattern;
    o.json = json;
    tw_logger *l = json ? self->json : self->text;
    int rc = tw_log_add_console(l, &o, NULL);
    if (rc != TW_OK)
        return PyErr_Format(PyExc_ValueError, "console sink: %s%s%s", tw_strerror(rc), pattern ? ": pattern " : "",
                            pattern ? pattern : "");
    *(json ? &self->has_json : &self->has_text) = 1;
    Py_RETURN_NONE;
}

static PyObject *router_add_file(router_object *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"path", "level", "pattern", "json", "max_bytes", "backups", "flush_level", NULL};
    tw_log_sink_options o = tw_log_sink_options_default();
    const char *path, *pattern = NULL;
    int json = 0;
    unsigned long long max_bytes = 0;
    unsigned int backups = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|izpKIi:add_file", names, &path, &o.level, &pattern, &json, &max_bytes,
                                     &backups, &o.flush_level))
        return NULL;
    o.pattern = pattern;
    o.json = json;
    o.max_bytes = max_bytes;
    o.backups = backups;
    tw_logger *l = json ? self->json : self->text;
    int rc = tw_log_add_file(l, path, &o, NULL);
    if (rc != TW_OK) {
        PyObject *type = rc == TW_EINVAL ? PyExc_ValueError : PyExc_OSError;
        return PyErr_Format(type, "%s: %s", path, tw_strerror(rc));
    }
    *(json ? &self->has_json : &self->has_text) = 1;
    Py_RETURN_NONE;
}

/* Writes one record to the router's sinks under `name`. exc/stack: text
 * after the message in text sinks, fields in JSON ones. */
static void route(router_object *self, const char *name, int level, const char *file, const char *func, int line,
                  const char *message, const char *exc, const char *stack, field_set *fs)
{
    if (self->has_text && tw_log_enabled(self->text, level)) {
        if (exc || stack) {
            size_t ml = strlen(message), el = exc ? strlen(exc) : 0, sl = stack ? strlen(stack) : 0;
            char *joined = PyMem_Malloc(ml + el + sl + 3);
            if (joined) {
                char *p = joined;
                memcpy(p, message, ml);
                p += ml;
                if (exc) {
                    *p++ = '\n';
                    memcpy(p, exc, el);
                    p += el;
                }
                if (stack) {
                    *p++ = '\n';
                    memcpy(p, stack, sl);
                    p += sl;
                }
                *p = '\0';
                tw_log_write_as(self->text, name, level, file, func, line, joined, fs->f, fs->n);
                PyMem_Free(joined);
            }
        } else {
            tw_log_write_as(self->text, name, level, file, func, line, message, fs->f, fs->n);
        }
    }
    if (self->has_json && tw_log_enabled(self->json, level)) {
        size_t n = fs->n;
        if (exc)
            fs->f[n++] = tw_field_str("exception", exc);
        if (stack)
            fs->f[n++] = tw_field_str("stack", stack);
        tw_log_write_as(self->json, name, level, file, func, line, message, fs->f, n);
    }
}

static int router_enabled(const router_object *self, int level)
{
    return (self->has_text && tw_log_enabled(self->text, level)) ||
           (self->has_json && tw_log_enabled(self->json, level));
}

static const char *utf8_or_null(PyObject *o)
{
    if (!o || o == Py_None || !PyUnicode_Check(o))
        return NULL;
    return PyUnicode_AsUTF8(o);
}

/* record.exc_info as logging's Formatter writes it (traceback.format_exception,
 * no final newline), cached in record.exc_text as logging does; NULL when
 * there is none. */
static const char *exception_text(tw_py_state *st, PyObject *d, field_set *fs)
{
    PyObject *info = PyDict_GetItemWithError(d, st->strings[TW_PY_S_EXC_INFO]);
    if (!info || !PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 3 || PyTuple_GET_ITEM(info, 0) == Py_None)
        return NULL;
    PyObject *tb = PyImport_ImportModule("traceback");
    PyObject *lines = tb ? PyObject_CallMethod(tb, "format_exception", "OOO", PyTuple_GET_ITEM(info, 0),
                                               PyTuple_GET_ITEM(info, 1), PyTuple_GET_ITEM(info, 2))
                         : NULL;
    Py_XDECREF(tb);
    PyObject *empty = lines ? PyUnicode_FromString("") : NULL;
    PyObject *joined = empty ? PyUnicode_Join(empty, lines) : NULL;
    Py_XDECREF(lines);
    Py_XDECREF(empty);
    PyObject *text = joined ? PyObject_CallMethod(joined, "rstrip", "s", "\n") : NULL;
    Py_XDECREF(joined);
    if (!text)
        return NULL;
    if (PyDict_SetItem(d, st->strings[TW_PY_S_EXC_TEXT], text) < 0) {
        Py_DECREF(text);
        return NULL;
    }
    fs->keep[fs->kept++] = text;
    return PyUnicode_AsUTF8(text);
}

/* The decimal digits of v at p (room for 21); returns their count. */
static size_t put_int(char *p, long long v)
{
    char t[24], *e = t + sizeof t, *q = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    memcpy(p, q, (size_t)(e - q));
    return (size_t)(e - q);
}

/* One %s/%d/%i of v at out + *len, as str() / int formatting writes it:
 * 0, or -1 when the value is of another type or there is no room. */
static int put_value(char conv, PyObject *v, char *out, size_t *len, size_t cap)
{
    const char *text;
    Py_ssize_t n;
    if (PyLong_CheckExact(v)) { /* not bool: '%d' % True is '1' but '%s' % True 'True' */
        int overflow;
        long long i = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (i == -1 && PyErr_Occurred()) || *len + 21 >= cap)
            return -1;
        *len += put_int(out + *len, i);
        return 0;
    }
    if (conv != 's')
        return -1;
    if (PyUnicode_CheckExact(v)) {
        if (!(text = PyUnicode_AsUTF8AndSize(v, &n)) || *len + (size_t)n >= cap)
            return -1;
        memcpy(out + *len, text, (size_t)n);
        *len += (size_t)n;
        return 0;
    }
    if (PyFloat_CheckExact(v)) { /* float.__repr__ is exactly this */
        char *r = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        size_t rn = r ? strlen(r) : 0;
        int ok = r && *len + rn < cap;
        if (ok) {
            memcpy(out + *len, r, rn);
            *len += rn;
        }
        PyMem_Free(r);
        return ok ? 0 : -1;
    }
    return -1;
}

/* msg % args as UTF-8 in out, for the conversions records mostly carry:
 * %s of a str, int or float, %d and %i of an int, %%; what
 * PyUnicode_Format would make, without the str object. Returns the
 * length, or -1 with nothing raised for anything else (flags, widths,
 * mapping keys, other types, too few or too many arguments, no room),
 * which is then left to PyUnicode_Format. */
static Py_ssize_t format_simple(PyObject *msg, PyObject *args, char *out, size_t cap)
{
    Py_ssize_t mn, next = 0, nargs = PyTuple_GET_SIZE(args);
    const char *m = PyUnicode_AsUTF8AndSize(msg, &mn);
    size_t len = 0;
    if (!m)
        goto fallback;
    for (Py_ssize_t i = 0; i < mn; i++) {
        if (m[i] != '%') {
            if (len + 1 >= cap)
                goto fallback;
            out[len++] = m[i];
            continue;
        }
        char conv = i + 1 < mn ? m[++i] : 0;
        if (conv == '%') {
            if (len + 1 >= cap)
                goto fallback;
            out[len++] = '%';
        } else if ((conv == 's' || conv == 'd' || conv == 'i') && next < nargs) {
            if (put_value(conv, PyTuple_GET_ITEM(args, next++), out, &len, cap) < 0)
                goto fallback;
        } else {
            goto fallback;
        }
    }
    if (next != nargs)
        goto fallback; /* "not all arguments converted": PyUnicode_Format says so */
    out[len] = '\0';
    return (Py_ssize_t)len;
fallback:
    PyErr_Clear();
    return -1;
}

/* LogRecord.getMessage in C, the general path: str(msg), % args when
 * there are any. The text is kept in fs. */
static int record_message(PyObject *msg, PyObject *args, field_set *fs, const char **message)
{
    PyObject *text;
    if (!msg)
        text = PyUnicode_FromString("");
    else if (PyUnicode_CheckExact(msg))
        text = Py_NewRef(msg);
    else
        text = PyObject_Str(msg);
    if (!text)
        return -1;
    int has_args = args && args != Py_None ? PyObject_IsTrue(args) : 0;
    if (has_args < 0) {
        Py_DECREF(text);
        return -1;
    }
    if (has_args) {
        PyObject *formatted = PyUnicode_Format(text, args);
        Py_DECREF(text);
        if (!formatted)
            return -1;
        text = formatted;
    }
    fs->keep[fs->kept++] = text;
    *message = PyUnicode_AsUTF8(text);
    return *message ? 0 : -1;
}

/* emit(record): a logging.LogRecord, read from its __dict__. */
static int emit_record(router_object *self, tw_py_state *st, PyObject *d, field_set *fs)
{
    PyObject *const *s = st->strings;
    PyObject *levelno = PyDict_GetItemWithError(d, s[TW_PY_S_LEVELNO]);
    int level = levelno && PyLong_Check(levelno) ? (int)PyLong_AsLong(levelno) : TW_LEVEL_INFO;
    if (PyErr_Occurred())
        return -1;
    if (!router_enabled(self, level))
        return 0;
    PyObject *msg = PyDict_GetItemWithError(d, s[TW_PY_S_MSG]);
    PyObject *args = PyDict_GetItemWithError(d, s[TW_PY_S_ARGS]);
    if (PyErr_Occurred())
        return -1;
    const char *message = NULL;
    if (msg && PyUnicode_CheckExact(msg) && args && PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) > 0 &&
        format_simple(msg, args, fs->message, sizeof fs->message) >= 0)
        message = fs->message;
    else if (record_message(msg, args, fs, &message) < 0)
        return -1;
    const char *name = utf8_or_null(PyDict_GetItemWithError(d, s[TW_PY_S_NAME]));
    const char *file = utf8_or_null(PyDict_GetItemWithError(d, s[TW_PY_S_PATHNAME]));
    const char *func = utf8_or_null(PyDict_GetItemWithError(d, s[TW_PY_S_FUNCNAME]));
    PyObject *lineno = PyDict_GetItemWithError(d, s[TW_PY_S_LINENO]);
    int line = lineno && PyLong_Check(lineno) ? (int)PyLong_AsLong(lineno) : 0;
    const char *exc = utf8_or_null(PyDict_GetItemWithError(d, s[TW_PY_S_EXC_TEXT]));
    if (!exc && !PyErr_Occurred())
        exc = exception_text(st, d, fs);
    const char *stack = utf8_or_null(PyDict_GetItemWithError(d, s[TW_PY_S_STACK_INFO]));
    if (!message || PyErr_Occurred())
        return -1;
    /* extra={...}: whatever the record has beyond LogRecord's own names (a
     * record with no more members than a plain one has none) */
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (PyDict_GET_SIZE(d) <= plain_record_size)
        pos = PY_SSIZE_T_MAX;
    while (pos != PY_SSIZE_T_MAX && PyDict_Next(d, &pos, &k, &v)) {
        int own = PySet_Contains(st->record_attrs, k);
        if (own < 0)
            return -1;
        if (!own && PyUnicode_Check(k) && tw_py_field_add(st, fs, k, v) < 0)
            return -1;
    }
    route(self, name ? name : "root", level, file, func, line, message, exc, stack, fs);
    return 0;
}

static PyObject *router_emit(router_object *self, PyObject *record)
{
    tw_py_state *st = self->st;
    field_set fs;
    fs.n = fs.kept = 0;
    PyObject *d = PyObject_GenericGetDict(record, NULL);
    if (!d || emit_record(self, st, d, &fs) < 0)
        tw_py_log_failed("logging record");
    Py_XDECREF(d);
    tw_py_fields_release(&fs);
    Py_RETURN_NONE;
}

/* The message of logger.info(msg, *args) as LogRecord.getMessage makes
 * it (one non-empty dict argument is the mapping). A new reference. */
static PyObject *format_message(PyObject *msg, PyObject *args)
{
    PyObject *text = PyUnicode_CheckExact(msg) ? Py_NewRef(msg) : PyObject_Str(msg);
    if (!text || !args || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) == 0)
        return text;
    PyObject *values = args;
    if (PyTuple_GET_SIZE(args) == 1 && PyDict_Check(PyTuple_GET_ITEM(args, 0)) &&
        PyDict_GET_SIZE(PyTuple_GET_ITEM(args, 0)) > 0)
        values = PyTuple_GET_ITEM(args, 0);
    PyObject *formatted = PyUnicode_Format(text, values);
    Py_DECREF(text);
    return formatted;
}

/* log(name, level, msg, args, extra): trainwatch.Logger's direct path, one
 * frame below the user's call (Logger.info). Never raises. */
static PyObject *router_log(router_object *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyUnicode_Check(args[0]) || !PyLong_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "log(name, level, msg, args, extra)");
    int level = (int)PyLong_AsLong(args[1]);
    if (!router_enabled(self, level))
        Py_RETURN_NONE;
    tw_py_state *st = self->st;
    field_set fs;
    fs.n = fs.kept = 0;
    PyObject *code = NULL;
    const char *name = PyUnicode_AsUTF8(args[0]);
    const char *message = NULL;
    if (PyUnicode_CheckExact(args[2]) && PyTuple_CheckExact(args[3]) && PyTuple_GET_SIZE(args[3]) > 0 &&
        format_simple(args[2], args[3], fs.message, sizeof fs.message) >= 0) {
        message = fs.message;
    } else {
        PyObject *text = format_message(args[2], args[3]);
        message = text ? tw_py_keep_utf8(&fs, text) : NULL;
    }
    PyObject *extra = args[4];
    if (message && extra != Py_None) {
        if (!PyDict_Check(extra)) {
            PyErr_Format(PyExc_TypeError, "extra must be a dict, not %.100s", Py_TYPE(extra)->tp_name);
        } else {
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(extra, &pos, &k, &v)) {
                if (PyUnicode_Check(k) && tw_py_field_add(st, &fs, k, v) < 0)
                    break;
            }
        }
    }
    if (name && message && !PyErr_Occurred()) {
        const char *file, *func;
        int line;
        tw_py_call_site(self->lines, 1, &file, &func, &line, &code);
        if (!PyErr_Occurred())
            route(self, name, level, file, func, line, message, NULL, NULL, &fs);
    }
    if (PyErr_Occurred())
        tw_py_log_failed("logging record");
    Py_XDECREF(code);
    tw_py_fields_release(&fs);
    Py_RETURN_NONE;
}

static PyObject *router_flush(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyThreadState *ts = PyEval_SaveThread();
    tw_log_flush();
    PyEval_RestoreThread(ts);
    Py_RETURN_NONE;
}

/* environment(name): the environment record, placed at the caller of the
 * Python function that calls this (trainwatch.log_environment's caller). */
static PyObject *router_environment(router_object *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s:environment", &name))
        return NULL;
    const char *file, *func;
    int line;
    PyObject *code;
    tw_py_call_site(NULL, 1, &file, &func, &line, &code);
    if (PyErr_Occurred()) {
        Py_XDECREF(code);
        return NULL;
    }
    if (self->has_text)
        tw_log_environment_as(self->text, name, file, func, line);
    if (self->has_json)
        tw_log_environment_as(self->json, name, file, func, line);
    Py_XDECREF(code);
    Py_RETURN_NONE;
}

static PyObject *router_enabled_for(router_object *self, PyObject *level)
{
    long l = PyLong_AsLong(level);
    if (l == -1 && PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(router_enabled(self, (int)l));
}

/* ---- FastLogger ----------------------------------------------------------------------- */

typedef struct fast_logger_object {
    PyObject ob_base; /* PyObject_HEAD */
    router_object *router;
    PyObject *name; /* str */
    const char *cname;
} fast_logger_object;

static PyObject *router_logger(router_object *self, PyObject *name)
{
    tw_py_state *st = self->st;
    if (!PyUnicode_Check(name))
        return PyErr_Format(PyExc_TypeError, "logger name must be str, not %.100s", Py_TYPE(name)->tp_name);
    const char *cname = PyUnicode_AsUTF8(name);
    if (!cname)
        return NULL;
    fast_logger_object *f = PyObject_New(fast_logger_object, st->fast_logger_type);
    if (!f)
        return NULL;
    f->router = (router_object *)Py_NewRef(self);
    f->name = Py_NewRef(name);
    f->cname = cname;
    return (PyObject *)f;
}

static void fast_logger_dealloc(fast_logger_object *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_XDECREF(self->router);
    Py_XDECREF(self->name);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static void fast_log(fast_logger_object *self, int level, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     const char *exc)
{
    router_object *r = self->router;
    if (!router_enabled(r, level))
        return;
    tw_py_state *st = r->st;
    field_set fs;
    fs.n = fs.kept = 0;
    PyObject *code = NULL;
    const char *message = "";
    if (nargs > 0) {
        if (PyUnicode_Check(args[0]))
            message = PyUnicode_AsUTF8(args[0]);
        else
            message = tw_py_keep_utf8(&fs, PyObject_Str(args[0]));
    }
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "a direct log call takes one message and keyword fields, got %zd arguments",
                     nargs);
        message = NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; message && i < nkw; i++) {
        if (tw_py_field_add(st, &fs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            message = NULL;
    }
    if (message && !PyErr_Occurred()) {
        const char *file, *func;
        int line;
        tw_py_call_site(r->lines, 0, &file, &func, &line, &code);
        if (!PyErr_Occurred())
            route(r, self->cname, level, file, func, line, message, exc, NULL, &fs);
    }
    if (PyErr_Occurred())
        tw_py_log_failed("direct log call");
    Py_XDECREF(code);
    tw_py_fields_release(&fs);
}

#define FAST_LEVEL(fn, LEVEL)                                                                                          \
    static PyObject *fn(fast_logger_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)          \
    {                                                                                                                  \
        fast_log(self, LEVEL, args, nargs, kwnames, NULL);                                                             \
        Py_RETURN_NONE;                                                                                                \
    }
FAST_LEVEL(fast_debug, TW_LEVEL_DEBUG)
FAST_LEVEL(fast_info, TW_LEVEL_INFO)
FAST_LEVEL(fast_warning, TW_LEVEL_WARNING)
FAST_LEVEL(fast_error, TW_LEVEL_ERROR)
FAST_LEVEL(fast_critical, TW_LEVEL_CRITICAL)

static PyObject *fast_log_at(fast_logger_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1)
        return PyErr_Format(PyExc_TypeError, "log(level, message, **fields)");
    long level = PyLong_AsLong(args[0]);
    if (level == -1 && PyErr_Occurred())
        return NULL;
    fast_log(self, (int)level, args + 1, nargs - 1, kwnames, NULL);
    Py_RETURN_NONE;
}

/* exception(message, **fields): ERROR with the traceback being handled. */
static PyObject *fast_exception(fast_logger_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!router_enabled(self->router, TW_LEVEL_ERROR))
        Py_RETURN_NONE;
    PyObject *tb = PyImport_ImportModule("traceback");
    PyObject *text = tb ? PyObject_CallMethod(tb, "format_exc", NULL) : NULL;
    Py_XDECREF(tb);
    const char *exc = NULL;
    if (text) {
        /* format_exc ends with a newline; the record does not */
        PyObject *stripped = PyObject_CallMethod(text, "rstrip", NULL);
        Py_DECREF(text);
        text = stripped;
    }
    if (text && !(exc = PyUnicode_AsUTF8(text)))
        Py_CLEAR(text);
    if (!text)
        tw_py_log_failed("formatting the traceback");
    fast_log(self, TW_LEVEL_ERROR, args, nargs, kwnames, exc);
    Py_XDECREF(text);
    Py_RETURN_NONE;
}

static PyObject *fast_enabled_for(fast_logger_object *self, PyObject *level)
{
    return router_enabled_for(self->router, level);
}

static PyObject *fast_get_name(fast_logger_object *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->name);
}

#define FAST_METHOD(name, fn, doc)                                                                                     \
    {                                                                                                                  \
        name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc                                      \
    }
static PyMethodDef fast_logger_methods[] = {
    FAST_METHOD("debug", fast_debug, "debug(message, **fields)"),
    FAST_METHOD("info", fast_info, "info(message, **fields)"),
    FAST_METHOD("warning", fast_warning, "warning(message, **fields)"),
    FAST_METHOD("error", fast_error, "error(message, **fields)"),
    FAST_METHOD("critical", fast_critical, "critical(message, **fields)"),
    FAST_METHOD("exception", fast_exception, "exception(message, **fields): ERROR with the current traceback"),
    FAST_METHOD("log", fast_log_at, "log(level, message, **fields)"),
    {"isEnabledFor", (PyCFunction)fast_enabled_for, METH_O, "isEnabledFor(level) -> bool"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef fast_logger_getset[] = {
    {"name", (getter)fast_get_name, NULL, "the logger name records carry", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot fast_logger_slots[] = {
    {Py_tp_dealloc, fast_logger_dealloc},
    {Py_tp_methods, fast_logger_methods},
    {Py_tp_getset, fast_logger_getset},
    {Py_tp_doc, "A direct logger: message and keyword fields straight to libtrainwatch's sinks, no LogRecord."},
    {0, NULL},
};
static PyType_Spec fast_logger_spec = {"trainwatch._native.FastLogger", sizeof(fast_logger_object), 0,
                                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, fast_logger_slots};

static PyMethodDef router_methods[] = {
    {"add_console", (PyCFunction)(void (*)(void))router_add_console, METH_VARARGS | METH_KEYWORDS,
     "add_console(level=0, pattern=None, color=-1, other_ranks_level=30, json=False)"},
    {"add_file", (PyCFunction)(void (*)(void))router_add_file, METH_VARARGS | METH_KEYWORDS,
     "add_file(path, level=0, pattern=None, json=False, max_bytes=0, backups=0, flush_level=10)"},
    {"emit", (PyCFunction)router_emit, METH_O, "emit(record): writes a logging.LogRecord; never raises"},
    {"log", (PyCFunction)(void (*)(void))router_log, METH_FASTCALL,
     "log(name, level, msg, args, extra): a record without a LogRecord (trainwatch.Logger); never raises"},
    {"flush", (PyCFunction)router_flush, METH_NOARGS, "writes everything buffered"},
    {"environment", (PyCFunction)router_environment, METH_VARARGS, "environment(name): the environment record"},
    {"logger", (PyCFunction)router_logger, METH_O, "logger(name) -> FastLogger"},
    {"enabled_for", (PyCFunction)router_enabled_for, METH_O, "enabled_for(level) -> bool"},
    {NULL, NULL, 0, NULL},
};
static PyType_Slot router_slots[] = {
    {Py_tp_new, router_new},
    {Py_tp_dealloc, router_dealloc},
    {Py_tp_methods, router_methods},
    {Py_tp_doc, "Router(): libtrainwatch sinks behind one trainwatch.Handler."},
    {0, NULL},
};
static PyType_Spec router_spec = {"trainwatch._native.Router", sizeof(router_object), 0, Py_TPFLAGS_DEFAULT,
                                  router_slots};

/* ---- module functions ------------------------------------------------------------------------ */

static PyObject *py_environment_add(PyObject *m, PyObject *args)
{
    (void)m;
    const char *name, *version;
    if (!PyArg_ParseTuple(args, "ss:environment_add", &name, &version))
        return NULL;
    int rc = tw_log_environment_add(name, version);
    if (rc != TW_OK)
        return PyErr_Format(PyExc_ValueError, "environment_add(%s): %s", name, tw_strerror(rc));
    Py_RETURN_NONE;
}

static PyObject *py_redact(PyObject *m, PyObject *on)
{
    (void)m;
    int b = PyObject_IsTrue(on);
    if (b < 0)
        return NULL;
    tw_log_redact_enable(b);
    Py_RETURN_NONE;
}

static PyObject *py_redact_add(PyObject *m, PyObject *args)
{
    (void)m;
    const char *pattern;
    if (!PyArg_ParseTuple(args, "s:redact_add", &pattern))
        return NULL;
    char err[256] = "";
    if (tw_log_redact_add(pattern, err, sizeof err) != TW_OK)
        return PyErr_Format(PyExc_ValueError, "redaction pattern %R: %s", PyTuple_GET_ITEM(args, 0), err);
    Py_RETURN_NONE;
}

static PyObject *py_redact_text(PyObject *m, PyObject *args)
{
    (void)m;
    const char *text;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "s#:redact_text", &text, &len))
        return NULL;
    size_t cap = (size_t)len * 2 + 64;
    char *out = PyMem_Malloc(cap);
    if (!out)
        return PyErr_NoMemory();
    size_t n = tw_log_redact_text(text, out, cap);
    PyObject *r = PyUnicode_DecodeUTF8(out, (Py_ssize_t)n, "replace");
    PyMem_Free(out);
    return r;
}

static PyObject *py_rank(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    tw_log_rank_info r = tw_log_rank();
    return Py_BuildValue("(iii)", r.rank, r.local_rank, r.world_size);
}

static PyObject *py_log_errors(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyLong_FromUnsignedLongLong((unsigned long long)tw_py_log_error_count());
}

static PyObject *py_dropped(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyLong_FromUnsignedLongLong((unsigned long long)tw_log_dropped_total());
}

static PyObject *py_level_parse(PyObject *m, PyObject *arg)
{
    (void)m;
    if (PyLong_Check(arg))
        return Py_NewRef(arg);
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!text) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "a level is a name or a number, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    int level;
    if (tw_log_level_parse(text, &level) != TW_OK)
        return PyErr_Format(PyExc_ValueError, "unknown level %R (DEBUG, INFO, WARNING, ERROR, CRITICAL or a number)",
                            arg);
    return PyLong_FromLong(level);
}

static PyObject *py_set_plain_record(PyObject *m, PyObject *record)
{
    (void)m;
    PyObject *d = PyObject_GenericGetDict(record, NULL);
    if (!d)
        return NULL;
    plain_record_size = PyDict_GET_SIZE(d);
    Py_DECREF(d);
    Py_RETURN_NONE;
}

static PyMethodDef log_functions[] = {
    {"set_plain_record", py_set_plain_record, METH_O,
     "set_plain_record(logging.LogRecord(...)): a record without extra, to skip looking for fields in such"},
    {"environment_add", py_environment_add, METH_VARARGS, "environment_add(name, version)"},
    {"redact", py_redact, METH_O, "redact(on): redaction on or off for every record"},
    {"redact_add", py_redact_add, METH_VARARGS, "redact_add(pcre2_pattern)"},
    {"redact_text", py_redact_text, METH_VARARGS, "redact_text(text) -> str, as records are redacted"},
    {"rank", py_rank, METH_NOARGS, "rank() -> (rank, local_rank, world_size)"},
    {"log_errors", py_log_errors, METH_NOARGS, "records dropped because they could not be converted"},
    {"dropped_total", py_dropped, METH_NOARGS, "records libtrainwatch dropped (full disk, unwritable file)"},
    {"level_parse", py_level_parse, METH_O, "level_parse('warning') -> 30"},
    {"flush", router_flush, METH_NOARGS, "writes everything buffered"},
    {NULL, NULL, 0, NULL},
};

static const char *const record_attr_names[] = {
    "name",     "msg",        "args",        "levelname", "levelno",  "pathname", "filename", "module",
    "exc_info", "exc_text",   "stack_info",  "lineno",    "funcName", "created",  "msecs",    "relativeCreated",
    "thread",   "threadName", "processName", "process",   "message",  "asctime",  "taskName",
};

int tw_py_log_init(PyObject *m, tw_py_state *st)
{
    static const char *const strings[TW_PY_S_COUNT] = {"name",       "msg",         "args",    "levelno",
                                                       "pathname",   "funcName",    "lineno",  "exc_text",
                                                       "stack_info", "_tw_summary", "exc_info"};
    for (size_t i = 0; i < TW_PY_S_COUNT; i++) {
        if (!(st->strings[i] = PyUnicode_InternFromString(strings[i])))
            return -1;
    }
    if (!(st->record_attrs = PyFrozenSet_New(NULL)))
        return -1;
    for (size_t i = 0; i < sizeof record_attr_names / sizeof record_attr_names[0]; i++) {
        PyObject *s = PyUnicode_InternFromString(record_attr_names[i]);
        if (!s || PySet_Add(st->record_attrs, s) < 0) {
            Py_XDECREF(s);
            return -1;
        }
        Py_DECREF(s);
    }
    PyObject *t = PyType_FromModuleAndSpec(m, &router_spec, NULL);
    if (!t)
        return -1;
    st->router_type = (PyTypeObject *)t;
    if (PyModule_AddType(m, st->router_type) < 0)
        return -1;
    if (!(t = PyType_FromModuleAndSpec(m, &fast_logger_spec, NULL)))
        return -1;
    st->fast_logger_type = (PyTypeObject *)t;
    if (PyModule_AddType(m, st->fast_logger_type) < 0)
        return -1;
    if (PyModule_AddFunctions(m, log_functions) < 0)
        return -1;
    if (!tw_py_log_errors_counter) {
        tw_registry *r = tw_registry_default();
        tw_counter_new(r, "trainwatch_python_log_errors_total",
                       "Log records the Python binding dropped because they could not be converted.",
                       &tw_py_log_errors_counter);
        tw_log_register_metrics(r); /* trainwatch_log_dropped_total; already there is fine */
    }
    return 0;
}

int tw_py_log_traverse(tw_py_state *st, visitproc visit, void *arg)
{
    Py_VISIT(st->router_type);
    Py_VISIT(st->fast_logger_type);
    Py_VISIT(st->record_attrs);
    return 0;
}
