/*
 * log_fields.c: what a Python log record becomes before it is written: its
 * extra= values as libtrainwatch fields (numbers, strings, summaries of
 * arrays and tensors by shape), the caller's file, function and line (a
 * cache per router keyed by code object and instruction), and the errors
 * of the logging half: a record that cannot be converted is dropped,
 * counted in trainwatch_python_log_errors_total and said once on stderr.
 * router.c holds the Router and FastLogger that use them (log_fields.h).
 */
#include "log_fields.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "trainwatch/error.h"

static atomic_uint_fast64_t log_errors;
static atomic_bool log_error_said;
tw_counter *tw_py_log_errors_counter; /* in the default registry, which lives for the process */

uint64_t tw_py_log_error_count(void)
{
    return (uint64_t)atomic_load(&log_errors);
}

/* ---- errors ------------------------------------------------------------------ */

/* Swallows the pending exception: counted, said once. */
void tw_py_log_failed(const char *what)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    atomic_fetch_add(&log_errors, 1);
    tw_counter_inc(tw_py_log_errors_counter);
    if (!atomic_exchange(&log_error_said, true)) {
        const char *reason = "unknown error";
        PyObject *s = value ? PyObject_Str(value) : NULL;
        if (s)
            reason = PyUnicode_AsUTF8(s);
        if (!reason) {
            PyErr_Clear();
            reason = "unprintable error";
        }
        fprintf(stderr,
                "trainwatch: a log record was dropped: %s: %s: %s (further failures are counted in "
                "trainwatch_python_log_errors_total, not said)\n",
                what, type ? ((PyTypeObject *)type)->tp_name : "error", reason);
        Py_XDECREF(s);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

/* ---- fields -------------------------------------------------------------------- */




void tw_py_fields_release(field_set *fs)
{
    for (size_t i = 0; i < fs->kept; i++)
        Py_DECREF(fs->keep[i]);
    fs->kept = 0;
}

const char *tw_py_keep_utf8(field_set *fs, PyObject *owned)
{
    if (!owned)
        return NULL;
    fs->keep[fs->kept++] = owned;
    return PyUnicode_AsUTF8(owned);
}

/* A value that says how to summarize itself (trainwatch.summary): the
 * attribute _tw_summary is (type name, shape tuple, size). */
static int field_summary(tw_py_state *st, field_set *fs, const char *key, PyObject *v, int *done)
{
    *done = 0;
    if (PyUnicode_Check(v) || PyLong_Check(v) || PyFloat_Check(v))
        return 0;
    PyObject *t = PyObject_GetAttr(v, st->strings[TW_PY_S_TW_SUMMARY]);
    if (!t) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    const char *type_name;
    PyObject *shape;
    long long size;
    if (!PyArg_ParseTuple(t, "sO!L;_tw_summary must be (str, tuple, int)", &type_name, &PyTuple_Type, &shape, &size)) {
        Py_DECREF(t);
        return -1;
    }
    size_t i = fs->n, ndim = (size_t)PyTuple_GET_SIZE(shape);
    if (ndim > SHAPE_MAX)
        ndim = SHAPE_MAX;
    for (size_t d = 0; d < ndim; d++) {
        fs->shapes[i][d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, (Py_ssize_t)d));
        if (fs->shapes[i][d] == -1 && PyErr_Occurred()) {
            Py_DECREF(t);
            return -1;
        }
    }
    fs->keep[fs->kept++] = t; /* keeps type_name alive */
    fs->f[fs->n++] = tw_log_summary(key, type_name, fs->shapes[i], ndim, size);
    *done = 1;
    return 0;
}

/* The field is written member by member: a tw_log_field built by value
 * (tw_field_double(...)) and copied in cost a store-forwarding stall per
 * field, a tenth of a direct log call. */
static void set_int(tw_log_field *f, const char *key, int64_t v)
{
    f->key = key;
    f->type = TW_FIELD_INT;
    f->v.i = v;
}

static void set_double(tw_log_field *f, const char *key, double v)
{
    f->key = key;
    f->type = TW_FIELD_DOUBLE;
    f->v.d = v;
}

static void set_str(tw_log_field *f, const char *key, const char *v)
{
    f->key = key;
    f->type = TW_FIELD_STRING;
    f->v.s = v;
}

/* Values of no type above: a summary, a numpy number, else str(v). */
static int field_other(tw_py_state *st, field_set *fs, tw_log_field *f, const char *key, PyObject *v)
{
    int done;
    if (field_summary(st, fs, key, v, &done) < 0)
        return -1;
    if (done)
        return 1;
    if (PyIndex_Check(v)) { /* numpy integers */
        PyObject *i = PyNumber_Index(v);
        if (!i)
            return -1;
        long long x = PyLong_AsLongLong(i);
        Py_DECREF(i);
        if (x == -1 && PyErr_Occurred())
            return -1;
        set_int(f, key, x);
    } else if (Py_TYPE(v)->tp_as_number && Py_TYPE(v)->tp_as_number->nb_float && !PySequence_Check(v)) {
        double d = PyFloat_AsDouble(v); /* numpy floats */
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        set_double(f, key, d);
    } else {
        const char *s = tw_py_keep_utf8(fs, PyObject_Str(v));
        if (!s)
            return -1;
        set_str(f, key, s);
    }
    return 0;
}

/* An int as an int field, or a double past 64 bits; -1 with a Python error. */
static int set_long(tw_log_field *f, const char *key, PyObject *v)
{
    int overflow;
    long long i = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        set_double(f, key, PyLong_AsDouble(v));
    else
        set_int(f, key, i);
    return i == -1 && PyErr_Occurred() ? -1 : 0;
}

int tw_py_field_add(tw_py_state *st, field_set *fs, PyObject *keyobj, PyObject *v)
{
    if (fs->n >= FIELDS_MAX)
        return 0; /* more fields than a record carries: the rest are left out */
    const char *key = PyUnicode_AsUTF8(keyobj);
    if (!key)
        return -1;
    tw_log_field *f = &fs->f[fs->n];
    if (PyFloat_CheckExact(v)) {
        set_double(f, key, PyFloat_AS_DOUBLE(v));
    } else if (PyLong_CheckExact(v)) {
        if (set_long(f, key, v) < 0)
            return -1;
    } else if (v == Py_None) {
        set_str(f, key, NULL);
    } else if (PyBool_Check(v)) {
        f->key = key;
        f->type = TW_FIELD_BOOL;
        f->v.b = v == Py_True;
    } else if (PyLong_Check(v)) { /* an int subclass (an IntEnum): bool was taken above */
        if (set_long(f, key, v) < 0)
            return -1;
    } else if (PyFloat_Check(v)) {
        set_double(f, key, PyFloat_AS_DOUBLE(v));
    } else if (PyUnicode_Check(v)) {
        const char *s = PyUnicode_AsUTF8(v);
        if (!s)
            return -1;
        set_str(f, key, s);
    } else {
        int rc = field_other(st, fs, f, key, v);
        if (rc != 0)
            return rc < 0 ? -1 : 0; /* 1: a summary, added by field_summary */
    }
    fs->n++;
    return 0;
}

/* Call sites by (code, instruction): PyFrame_GetLineNumber walks the
 * code's line table on every call, the largest cost of a direct log call
 * before this cache; the file and function names in UTF-8 are kept with
 * the line. Holds its code objects (released with the router), which keep
 * those names alive. */


static int site_of(line_cache *slot, PyFrameObject *frame, PyCodeObject *code)
{
    const char *file = PyUnicode_AsUTF8(code->co_filename), *func = PyUnicode_AsUTF8(code->co_name);
    if (!file || !func)
        return -1;
    slot->line = PyFrame_GetLineNumber(frame);
    slot->file = file;
    slot->func = func;
    return 0;
}

/* The caller's file, function and line: the frame calling the C method
 * (up = 0) or the one `up` frames above it. *keep_code: a reference to
 * release once the names are no longer used. */
void tw_py_call_site(line_cache *cache, int up, const char **file, const char **func, int *line, PyObject **keep_code)
{
    *file = *func = NULL;
    *line = 0;
    *keep_code = NULL;
    PyFrameObject *frame = PyEval_GetFrame(), *held = NULL; /* borrowed; held: a reference of ours */
    for (; frame && up > 0; up--) {
        PyFrameObject *back = PyFrame_GetBack(frame);
        if (!back)
            break;
        Py_XDECREF(held);
        frame = held = back;
    }
    if (!frame)
        return;
    PyCodeObject *code = PyFrame_GetCode(frame);
    line_cache one = {NULL, 0, 0, NULL, NULL}, *slot = &one;
    if (cache) {
        int lasti = PyFrame_GetLasti(frame);
        slot = &cache[(((uintptr_t)code >> 4) ^ (uintptr_t)lasti) & (LINE_SLOTS - 1)];
        if (slot->code != (PyObject *)code || slot->lasti != lasti) {
            if (site_of(slot, frame, code) < 0) {
                Py_CLEAR(slot->code);
                slot = NULL;
            } else {
                Py_XSETREF(slot->code, Py_NewRef((PyObject *)code));
                slot->lasti = lasti;
            }
        }
    } else if (site_of(slot, frame, code) < 0) {
        slot = NULL;
    }
    if (slot) {
        *file = slot->file;
        *func = slot->func;
        *line = slot->line;
    }
    *keep_code = (PyObject *)code;
    Py_XDECREF(held);
}
