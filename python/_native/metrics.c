/*
 * metrics.c: the metric types of trainwatch._native over libtrainwatch's
 * registry: Registry, the CounterBase/GaugeBase/HistogramBase types the
 * Python classes Counter/Gauge/Histogram subclass, the /metrics server and
 * Pushgateway pushes.
 *
 * The trade-off: updates are C methods of the object the user holds (a
 * label-less metric or a .labels() child), so Gauge.set is one method call
 * and one atomic store, with no Python frame and no lock. .labels() keeps
 * its children in a dict on the parent (one str key for one label, else a
 * tuple), so a repeated lookup is a dict hit, not a registry lock.
 *
 * Ownership: a parent metric holds its Registry object (which owns the C
 * registry and so the family); a child holds its parent. Unregistering
 * clears every held cell first, so a kept child then updates nothing.
 */
#include "native.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trainwatch/error.h"
#include "trainwatch/http.h"
#include "trainwatch/metrics.h"
#include "trainwatch/push.h"

/* ---- Registry ---------------------------------------------------------------- */

typedef struct registry_object {
    PyObject ob_base; /* PyObject_HEAD */
    tw_registry *r;
    int own;
} registry_object;

static PyObject *registry_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"default", NULL};
    int use_default = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:Registry", names, &use_default))
        return NULL;
    registry_object *self = (registry_object *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    if (use_default) {
        self->r = tw_registry_default();
    } else {
        int rc = tw_registry_new(&self->r);
        if (rc != TW_OK) {
            Py_DECREF(self);
            return tw_py_raise(tw_py_state_of_type(type), rc, "registry");
        }
        self->own = 1;
    }
    return (PyObject *)self;
}

static void registry_dealloc(registry_object *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->own && self->r)
        tw_registry_free(self->r);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *registry_expose(registry_object *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"openmetrics", NULL};
    int om = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:expose", names, &om))
        return NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = tw_registry_expose(self->r, om ? TW_EXPOSE_OPENMETRICS : TW_EXPOSE_TEXT, &text, &len);
    PyEval_RestoreThread(ts);
    if (rc != TW_OK)
        return tw_py_raise(tw_py_state_of_type(Py_TYPE(self)), rc, "exposition");
    PyObject *out = PyBytes_FromStringAndSize(text, (Py_ssize_t)len);
    free(text);
    return out;
}

static PyObject *registry_process_collector(registry_object *self, PyObject *unused)
{
    (void)unused;
    int rc = tw_process_collector_register(self->r);
    if (rc != TW_OK && rc != TW_EEXIST)
        return tw_py_raise(tw_py_state_of_type(Py_TYPE(self)), rc, "process collector");
    Py_RETURN_NONE;
}

/* get_sample_value: the C walk compares UTF-8 copies, with no Python call
 * while the registry is locked. */
typedef struct sample_query {
    const char *name;
    Py_ssize_t n;
    const char *names[16], *values[16];
    int found;
    double value;
} sample_query;

static void sample_match(const tw_sample_view *s, void *arg)
{
    sample_query *q = arg;
    if (q->found || strcmp(s->name, q->name) != 0 || (Py_ssize_t)s->label_count != q->n)
        return;
    for (Py_ssize_t i = 0; i < q->n; i++) {
        size_t j = 0;
        while (j < s->label_count && strcmp(s->label_names[j], q->names[i]) != 0)
            j++;
        if (j == s->label_count || strcmp(s->label_values[j], q->values[i]) != 0)
            return;
    }
    q->found = 1;
    q->value = s->value;
}

static PyObject *registry_get_sample_value(registry_object *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"name", "labels", NULL};
    sample_query q = {0};
    PyObject *labels = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O:get_sample_value", names, &q.name, &labels))
        return NULL;
    if (labels != Py_None) {
        if (!PyDict_Check(labels))
            return PyErr_Format(PyExc_TypeError, "labels must be a dict, not %.100s", Py_TYPE(labels)->tp_name);
        if (PyDict_Size(labels) > 16)
            Py_RETURN_NONE;
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(labels, &pos, &k, &v)) {
            if (!PyUnicode_Check(k) || !PyUnicode_Check(v))
                return PyErr_Format(PyExc_TypeError, "label names and values must be str");
            q.names[q.n] = PyUnicode_AsUTF8(k);
            q.values[q.n] = PyUnicode_AsUTF8(v);
            if (!q.names[q.n] || !q.values[q.n])
                return NULL;
            q.n++;
        }
    }
    tw_registry_visit(self->r, NULL, sample_match, &q);
    if (!q.found)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(q.value);
}

static PyMethodDef registry_methods[] = {
    {"expose", (PyCFunction)(void (*)(void))registry_expose, METH_VARARGS | METH_KEYWORDS,
     "expose(openmetrics=False) -> bytes: the registry in the text format 0.0.4 (or OpenMetrics)."},
    {"process_collector", (PyCFunction)registry_process_collector, METH_NOARGS,
     "Registers the process_* metrics (cpu, memory, fds, start time)."},
    {"get_sample_value", (PyCFunction)(void (*)(void))registry_get_sample_value, METH_VARARGS | METH_KEYWORDS,
     "get_sample_value(name, labels=None) -> float or None."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot registry_slots[] = {
    {Py_tp_new, registry_new},
    {Py_tp_dealloc, registry_dealloc},
    {Py_tp_methods, registry_methods},
    {Py_tp_doc, "Registry(default=False): a libtrainwatch registry (the process-wide one with default=True)."},
    {0, NULL},
};

static PyType_Spec registry_spec = {"trainwatch._native.Registry", sizeof(registry_object), 0, Py_TPFLAGS_DEFAULT,
                                    registry_slots};

/* ---- metrics ------------------------------------------------------------------- */

typedef struct metric_object {
    PyObject ob_base;             /* PyObject_HEAD */
    tw_cell *cell;                /* NULL: a labelled parent, or unregistered */
    tw_family *family;            /* the parent's; NULL once unregistered */
    struct metric_object *parent; /* children: strong */
    PyObject *registry;           /* parent: strong */
    PyObject *children;           /* parent with labels: dict */
    PyObject *labelnames;         /* tuple of str */
    PyObject *labelvalues;        /* children: tuple of str */
    Py_ssize_t label_count;
    int type; /* tw_metric_type */
} metric_object;

static int metric_type_of(PyTypeObject *t)
{
    tw_py_state *st = tw_py_state_of_type(t);
    if (st && PyType_IsSubtype(t, st->counter_type))
        return TW_METRIC_COUNTER;
    if (st && PyType_IsSubtype(t, st->histogram_type))
        return TW_METRIC_HISTOGRAM;
    return TW_METRIC_GAUGE;
}

static PyObject *metric_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    metric_object *self = (metric_object *)type->tp_alloc(type, 0);
    if (self)
        self->type = metric_type_of(type);
    return (PyObject *)self;
}

static int metric_traverse(metric_object *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->parent);
    Py_VISIT(self->registry);
    Py_VISIT(self->children);
    return 0;
}

static int metric_clear(metric_object *self)
{
    Py_CLEAR(self->parent);
    Py_CLEAR(self->registry);
    Py_CLEAR(self->children);
    Py_CLEAR(self->labelnames);
    Py_CLEAR(self->labelvalues);
    return 0;
}

static void metric_dealloc(metric_object *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    metric_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* utf8 copies of a tuple of str, borrowed from the tuple's items. */
static int utf8_items(PyObject *tuple, const char **out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        out[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(tuple, i), &len);
        if (!out[i])
            return -1;
        if (strlen(out[i]) != (size_t)len) {
            PyErr_SetString(PyExc_ValueError, "label names and values must not contain NUL");
            return -1;
        }
    }
    return 0;
}

static PyObject *metric_register(metric_object *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"registry", "name", "documentation", "labelnames", "buckets", "series_limit", NULL};
    tw_py_state *st = tw_py_state_of_type(Py_TYPE(self));
    PyObject *reg, *labelnames, *buckets = Py_None;
    const char *name, *help;
    Py_ssize_t name_len;
    Py_ssize_t series_limit = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s#sO!|On:_tw_register", names, st->registry_type, &reg, &name,
                                     &name_len, &help, &PyTuple_Type, &labelnames, &buckets, &series_limit))
        return NULL;
    if (self->family || self->parent)
        return PyErr_Format(PyExc_RuntimeError, "%s is already registered", name);
    if ((size_t)name_len != strlen(name))
        return PyErr_Format(PyExc_ValueError, "Invalid metric name: %R", PyTuple_GET_ITEM(args, 1));
    Py_ssize_t n = PyTuple_GET_SIZE(labelnames);
    if (n > TW_LABELS_MAX)
        return PyErr_Format(st->cardinality_error, "%s: %zd label names, at most %d", name, n, TW_LABELS_MAX);
    const char *label_names[TW_LABELS_MAX];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(labelnames, i)))
            return PyErr_Format(PyExc_TypeError, "label names must be str, not %.100s",
                                Py_TYPE(PyTuple_GET_ITEM(labelnames, i))->tp_name);
    }
    if (utf8_items(labelnames, label_names, n) < 0)
        return NULL;
    double bounds[256];
    Py_ssize_t bound_count = 0;
    if (buckets != Py_None) {
        PyObject *seq = PySequence_Fast(buckets, "buckets must be a sequence of numbers");
        if (!seq)
            return NULL;
        Py_ssize_t bn = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; i < bn; i++) {
            double b = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
            if (b == -1.0 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            if (isinf(b) && b > 0 && i == bn - 1)
                break; /* +Inf is implied */
            if (bound_count == (Py_ssize_t)(sizeof bounds / sizeof bounds[0])) {
                Py_DECREF(seq);
                return PyErr_Format(st->cardinality_error, "%s: more than 256 buckets", name);
            }
            bounds[bound_count++] = b;
        }
        Py_DECREF(seq);
        if (bound_count == 0)
            return PyErr_Format(PyExc_ValueError, "%s: a histogram needs at least one finite bucket", name);
    }
    tw_family_options o = {.name = name,
                           .help = help,
                           .type = self->type,
                           .label_count = (size_t)n,
                           .label_names = label_names,
                           .buckets = buckets != Py_None ? bounds : NULL,
                           .bucket_count = (size_t)bound_count,
                           .series_limit = series_limit > 0 ? (size_t)series_limit : 0};
    tw_family *f;
    int rc = tw_family_register(((registry_object *)reg)->r, &o, &f);
    if (rc != TW_OK) {
        if (rc == TW_ENAME)
            return PyErr_Format(PyExc_ValueError, "Invalid metric or label name: %s %R", name, labelnames);
        if (rc == TW_EEXIST)
            return PyErr_Format(PyExc_ValueError, "Duplicated timeseries in CollectorRegistry: %s", name);
        if (rc == TW_EINVAL)
            return PyErr_Format(PyExc_ValueError, "%s: buckets must be finite and increasing", name);
        return tw_py_raise(st, rc, name);
    }
    if (n == 0) {
        rc = tw_family_series(f, NULL, &self->cell);
        if (rc != TW_OK) {
            tw_family_unregister(f);
            return tw_py_raise(st, rc, name);
        }
    } else if (!(self->children = PyDict_New())) {
        tw_family_unregister(f);
        return NULL;
    }
    self->family = f;
    self->label_count = n;
    Py_INCREF(reg);
    self->registry = reg;
    Py_INCREF(labelnames);
    self->labelnames = labelnames;
    Py_RETURN_NONE;
}

static void metric_forget_cells(metric_object *self)
{
    if (self->children) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(self->children, &pos, &k, &v)) {
            ((metric_object *)v)->cell = NULL;
            ((metric_object *)v)->family = NULL;
        }
    }
    self->cell = NULL;
    self->family = NULL;
}

static PyObject *metric_unregister(metric_object *self, PyObject *unused)
{
    (void)unused;
    if (self->parent)
        return PyErr_Format(PyExc_ValueError, "unregister the parent metric, not a labelled child");
    tw_family *f = self->family;
    metric_forget_cells(self);
    if (f)
        tw_family_unregister(f);
    Py_RETURN_NONE;
}

/* The key of a child in the parent's dict: the str itself for one label,
 * else a tuple of str. Returns a new reference. */
static PyObject *label_key(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs && nkw) {
        PyErr_SetString(PyExc_ValueError, "Can't pass both *args and **kwargs");
        return NULL;
    }
    Py_ssize_t given = nargs + nkw;
    if (given != self->label_count) {
        PyErr_Format(PyExc_ValueError, "Incorrect label count (expected %zd, got %zd)", self->label_count, given);
        return NULL;
    }
    PyObject *values = PyTuple_New(given);
    if (!values)
        return NULL;
    for (Py_ssize_t i = 0; i < given; i++) {
        PyObject *v = NULL;
        if (nkw) {
            PyObject *want = PyTuple_GET_ITEM(self->labelnames, i);
            for (Py_ssize_t j = 0; j < nkw && !v; j++) {
                int eq = PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, j), want) == 0;
                if (eq)
                    v = args[j];
            }
            if (!v) {
                Py_DECREF(values);
                PyErr_SetString(PyExc_ValueError, "Incorrect label names");
                return NULL;
            }
        } else {
            v = args[i];
        }
        PyObject *s = PyUnicode_CheckExact(v) ? Py_NewRef(v) : PyObject_Str(v);
        if (!s) {
            Py_DECREF(values);
            return NULL;
        }
        PyTuple_SET_ITEM(values, i, s);
    }
    if (given == 1) {
        PyObject *one = Py_NewRef(PyTuple_GET_ITEM(values, 0));
        Py_DECREF(values);
        return one;
    }
    return values;
}

static PyObject *metric_new_child(metric_object *self, PyObject *key)
{
    tw_py_state *st = tw_py_state_of_type(Py_TYPE(self));
    PyObject *values = PyTuple_Check(key) ? Py_NewRef(key) : PyTuple_Pack(1, key);
    if (!values)
        return NULL;
    const char *cvalues[TW_LABELS_MAX];
    if (utf8_items(values, cvalues, self->label_count) < 0) {
        Py_DECREF(values);
        return NULL;
    }
    tw_cell *cell;
    int rc = tw_family_series(self->family, cvalues, &cell);
    if (rc != TW_OK) {
        Py_DECREF(values);
        if (rc == TW_ELIMIT)
            return PyErr_Format(st->cardinality_error,
                                "series limit reached: no new label combination %R (counted in "
                                "trainwatch_dropped_series_total)",
                                key);
        return tw_py_raise(st, rc, "labels");
    }
    PyTypeObject *type = Py_TYPE(self);
    metric_object *child = (metric_object *)type->tp_alloc(type, 0);
    if (!child) {
        Py_DECREF(values);
        return NULL;
    }
    child->cell = cell;
    child->family = self->family;
    child->type = self->type;
    child->parent = (metric_object *)Py_NewRef(self);
    child->labelnames = Py_NewRef(self->labelnames);
    child->labelvalues = values;
    if (PyDict_SetItem(self->children, key, (PyObject *)child) < 0) {
        Py_DECREF(child);
        return NULL;
    }
    return (PyObject *)child;
}

static PyObject *metric_labels(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!self->children) {
        if (self->parent)
            return PyErr_Format(PyExc_ValueError, "labels() is called on the parent metric, not on a child");
        if (!self->labelnames)
            return PyErr_Format(PyExc_ValueError, "metric is not registered (was __init__ called?)");
        return PyErr_Format(PyExc_ValueError, "No label names were set when constructing %R", (PyObject *)self);
    }
    if (!self->family)
        return PyErr_Format(PyExc_ValueError, "the metric was unregistered");
    /* The common case without allocating: one str label already seen. */
    if (nargs == 1 && !kwnames && self->label_count == 1 && PyUnicode_CheckExact(args[0])) {
        PyObject *hit = PyDict_GetItemWithError(self->children, args[0]);
        if (hit)
            return Py_NewRef(hit);
        if (PyErr_Occurred())
            return NULL;
    }
    PyObject *key = label_key(self, args, nargs, kwnames);
    if (!key)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(self->children, key);
    if (hit) {
        Py_DECREF(key);
        return Py_NewRef(hit);
    }
    PyObject *child = PyErr_Occurred() ? NULL : metric_new_child(self, key);
    Py_DECREF(key);
    return child;
}

/* ---- updates ---------------------------------------------------------------------- */

static int as_double(PyObject *o, double *out)
{
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyLong_CheckExact(o)) {
        *out = PyLong_AsDouble(o);
        return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    PyObject *f = PyNumber_Float(o);
    if (!f)
        return -1;
    *out = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
    return 0;
}

/* One optional argument, positional or by its keyword (others in `ignored`
 * are accepted and unused, as prometheus_client's exemplar). */
static int one_arg(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *kw,
                   const char *ignored, int required, double fallback, double *out)
{
    PyObject *value = nargs ? args[0] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 1 + (ignored ? 1 : 0))
        return PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument (%zd given)", fn, nargs), -1;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
        if (!k)
            return -1;
        if (strcmp(k, kw) == 0 && !value)
            value = args[nargs + i];
        else if (!ignored || strcmp(k, ignored) != 0)
            return PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, k), -1;
    }
    if (!value) {
        if (required)
            return PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, kw), -1;
        *out = fallback;
        return 0;
    }
    return as_double(value, out);
}

static int observable(metric_object *self)
{
    if (self->cell || !self->children)
        return 0; /* a series, or unregistered (updates then do nothing) */
    PyErr_Format(PyExc_ValueError, "%s metric is missing label values (call .labels(...) first)",
                 self->type == TW_METRIC_COUNTER ? "counter"
                 : self->type == TW_METRIC_GAUGE ? "gauge"
                                                 : "histogram");
    return -1;
}

static PyObject *counter_inc(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    double v;
    if (nargs == 0 && !kwnames)
        v = 1.0;
    else if (one_arg("inc", args, nargs, kwnames, "amount", "exemplar", 0, 1.0, &v) < 0)
        return NULL;
    if (observable(self) < 0)
        return NULL;
    if (!(v >= 0))
        return PyErr_Format(PyExc_ValueError, "Counters can only be incremented by non-negative amounts.");
    if (v == 1.0)
        tw_counter_inc(self->cell);
    else
        tw_counter_add(self->cell, v);
    Py_RETURN_NONE;
}

static PyObject *gauge_inc(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    double v = 1.0;
    if ((nargs || kwnames) && one_arg("inc", args, nargs, kwnames, "amount", NULL, 0, 1.0, &v) < 0)
        return NULL;
    if (observable(self) < 0)
        return NULL;
    tw_gauge_add(self->cell, v);
    Py_RETURN_NONE;
}

static PyObject *gauge_dec(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    double v = 1.0;
    if ((nargs || kwnames) && one_arg("dec", args, nargs, kwnames, "amount", NULL, 0, 1.0, &v) < 0)
        return NULL;
    if (observable(self) < 0)
        return NULL;
    tw_gauge_add(self->cell, -v);
    Py_RETURN_NONE;
}

static PyObject *gauge_set(metric_object *self, PyObject *value)
{
    double v;
    if (PyFloat_CheckExact(value))
        v = PyFloat_AS_DOUBLE(value);
    else if (as_double(value, &v) < 0)
        return NULL;
    if (!self->cell && observable(self) < 0)
        return NULL;
    tw_gauge_set(self->cell, v);
    Py_RETURN_NONE;
}

static PyObject *gauge_set_to_current_time(metric_object *self, PyObject *unused)
{
    (void)unused;
    if (observable(self) < 0)
        return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tw_gauge_set(self->cell, (double)ts.tv_sec + ts.tv_nsec / 1e9);
    Py_RETURN_NONE;
}

static PyObject *histogram_observe(metric_object *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    double v;
    if (nargs == 1 && !kwnames && PyFloat_CheckExact(args[0]))
        v = PyFloat_AS_DOUBLE(args[0]);
    else if (one_arg("observe", args, nargs, kwnames, "amount", "exemplar", 1, 0.0, &v) < 0)
        return NULL;
    if (!self->cell && observable(self) < 0)
        return NULL;
    tw_histogram_observe(self->cell, v);
    Py_RETURN_NONE;
}

static PyObject *metric_value(metric_object *self, PyObject *unused)
{
    (void)unused;
    if (!self->cell)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(tw_cell_value(self->cell));
}

static PyObject *metric_get_labelvalues(metric_object *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->labelvalues ? self->labelvalues : Py_None);
}

static PyObject *metric_get_labelnames(metric_object *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->labelnames ? self->labelnames : Py_None);
}

static PyGetSetDef metric_getset[] = {
    {"_labelvalues", (getter)metric_get_labelvalues, NULL, "the label values of a child (None for a parent)", NULL},
    {"_labelnames", (getter)metric_get_labelnames, NULL, "the label names", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define COMMON_METHODS                                                                                                 \
    {"_tw_register", (PyCFunction)(void (*)(void))metric_register, METH_VARARGS | METH_KEYWORDS,                       \
     "Registers the family (called by __init__)."},                                                                    \
        {"_tw_unregister", (PyCFunction)metric_unregister, METH_NOARGS,                                                \
         "Removes the family from its registry; held children then update nothing."},                                  \
        {"_tw_value", (PyCFunction)metric_value, METH_NOARGS, "The current value (counters and gauges)."},             \
        {"labels", (PyCFunction)(void (*)(void))metric_labels, METH_FASTCALL | METH_KEYWORDS,                          \
         "labels(*values) or labels(**values): the child series for these label values."},

static PyMethodDef counter_methods[] = {
    COMMON_METHODS{"inc", (PyCFunction)(void (*)(void))counter_inc, METH_FASTCALL | METH_KEYWORDS,
                   "inc(amount=1): adds a non-negative amount."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef gauge_methods[] = {
    COMMON_METHODS{"inc", (PyCFunction)(void (*)(void))gauge_inc, METH_FASTCALL | METH_KEYWORDS, "inc(amount=1)"},
    {"dec", (PyCFunction)(void (*)(void))gauge_dec, METH_FASTCALL | METH_KEYWORDS, "dec(amount=1)"},
    {"set", (PyCFunction)gauge_set, METH_O, "set(value)"},
    {"set_to_current_time", (PyCFunction)gauge_set_to_current_time, METH_NOARGS, "sets the gauge to the unix time"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef histogram_methods[] = {
    COMMON_METHODS{"observe", (PyCFunction)(void (*)(void))histogram_observe, METH_FASTCALL | METH_KEYWORDS,
                   "observe(amount)"},
    {NULL, NULL, 0, NULL},
};

#define METRIC_SLOTS(methods, doc)                                                                                     \
    {Py_tp_new, metric_new}, {Py_tp_dealloc, metric_dealloc}, {Py_tp_traverse, metric_traverse},                       \
        {Py_tp_clear, metric_clear}, {Py_tp_methods, methods}, {Py_tp_getset, metric_getset}, {Py_tp_doc, doc},        \
    {                                                                                                                  \
        0, NULL                                                                                                        \
    }

static PyType_Slot counter_slots[] = {METRIC_SLOTS(counter_methods, "The C half of trainwatch.Counter.")};
static PyType_Slot gauge_slots[] = {METRIC_SLOTS(gauge_methods, "The C half of trainwatch.Gauge.")};
static PyType_Slot histogram_slots[] = {METRIC_SLOTS(histogram_methods, "The C half of trainwatch.Histogram.")};

#define METRIC_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC)
static PyType_Spec counter_spec = {"trainwatch._native.CounterBase", sizeof(metric_object), 0, METRIC_FLAGS,
                                   counter_slots};
static PyType_Spec gauge_spec = {"trainwatch._native.GaugeBase", sizeof(metric_object), 0, METRIC_FLAGS, gauge_slots};
static PyType_Spec histogram_spec = {"trainwatch._native.HistogramBase", sizeof(metric_object), 0, METRIC_FLAGS,
                                     histogram_slots};

/* ---- the /metrics server -------------------------------------------------------------- */

typedef struct server_object {
    PyObject ob_base; /* PyObject_HEAD */
    tw_http_server *server;
    PyObject *registry;
    pid_t pid; /* the process whose thread serves */
} server_object;

/* A forked child (a DataLoader worker) has a copy of the server but not its
 * thread: there it is let go, never stopped. */
static void server_stop_now(server_object *self)
{
    if (self->server && self->pid != getpid())
        self->server = NULL;
    if (self->server) {
        tw_http_server *s = self->server;
        self->server = NULL;
        PyThreadState *ts = PyEval_SaveThread();
        tw_http_stop(s);
        PyEval_RestoreThread(ts);
    }
}

static void server_dealloc(server_object *self)
{
    PyTypeObject *type = Py_TYPE(self);
    server_stop_now(self);
    Py_XDECREF(self->registry);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *server_stop(server_object *self, PyObject *unused)
{
    (void)unused;
    server_stop_now(self);
    Py_RETURN_NONE;
}

static PyObject *server_get_port(server_object *self, void *closure)
{
    (void)closure;
    if (!self->server)
        Py_RETURN_NONE;
    return PyLong_FromLong(tw_http_port(self->server));
}

static PyMethodDef server_methods[] = {
    {"stop", (PyCFunction)server_stop, METH_NOARGS, "Stops serving."},
    {"shutdown", (PyCFunction)server_stop, METH_NOARGS, "Stops serving (as http.server's)."},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef server_getset[] = {
    {"port", (getter)server_get_port, NULL, "the port bound (None once stopped)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot server_slots[] = {
    {Py_tp_dealloc, server_dealloc},
    {Py_tp_methods, server_methods},
    {Py_tp_getset, server_getset},
    {Py_tp_doc, "A running /metrics server (libtrainwatch's, on its own thread)."},
    {0, NULL},
};
static PyType_Spec server_spec = {"trainwatch._native.MetricsServer", sizeof(server_object), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, server_slots};

static PyObject *start_server(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"registry", "address", "web_config_file", NULL};
    tw_py_state *st = tw_py_state_of_module(m);
    PyObject *reg;
    const char *address, *web_config = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|z:start_http_server", names, st->registry_type, &reg, &address,
                                     &web_config))
        return NULL;
    tw_http_options o = {
        .listen_address = address, .web_config_file = web_config, .registry = ((registry_object *)reg)->r};
    char err[512] = "";
    tw_http_server *s = NULL;
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = tw_http_start(&o, &s, err, sizeof err);
    PyEval_RestoreThread(ts);
    if (rc != TW_OK) {
        PyErr_Format(rc == TW_ECONFIG || rc == TW_EINVAL ? PyExc_ValueError : PyExc_OSError, "%s",
                     err[0] ? err : tw_strerror(rc));
        return NULL;
    }
    server_object *self = PyObject_New(server_object, st->server_type);
    if (!self) {
        tw_http_stop(s);
        return NULL;
    }
    self->server = s;
    self->registry = Py_NewRef(reg);
    self->pid = getpid();
    return (PyObject *)self;
}

/* ---- Pushgateway ---------------------------------------------------------------------- */

static PyObject *push(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"registry", "url", "job", "method", "grouping", "timeout", NULL};
    tw_py_state *st = tw_py_state_of_module(m);
    PyObject *reg, *grouping;
    tw_push_options o = {0};
    int method;
    double timeout = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!ssiO!|d:push", names, st->registry_type, &reg, &o.url, &o.job,
                                     &method, &PyTuple_Type, &grouping, &timeout))
        return NULL;
    if (method < TW_PUSH_REPLACE || method > TW_PUSH_DELETE)
        return PyErr_Format(PyExc_ValueError, "method must be 0 (PUT), 1 (POST) or 2 (DELETE)");
    Py_ssize_t n = PyTuple_GET_SIZE(grouping);
    if (n > TW_PUSH_GROUPING_MAX)
        return PyErr_Format(PyExc_ValueError, "at most %d grouping labels", TW_PUSH_GROUPING_MAX);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(grouping, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(pair, 1)))
            return PyErr_Format(PyExc_TypeError, "grouping must be (name, value) pairs of str");
        const char *pv[2];
        if (utf8_items(pair, pv, 2) < 0)
            return NULL;
        o.grouping_names[i] = pv[0];
        o.grouping_values[i] = pv[1];
    }
    o.grouping_count = (size_t)n;
    o.timeout_seconds = timeout > 0 ? timeout : 0;
    char url[2048];
    if (tw_push_url(&o, url, sizeof url) != TW_OK)
        return PyErr_Format(PyExc_ValueError, "invalid Pushgateway URL, job or grouping: %s job=%s", o.url, o.job);
    char err[1024] = "";
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = tw_push(&o, ((registry_object *)reg)->r, (tw_push_method)method, err, sizeof err);
    PyEval_RestoreThread(ts);
    if (rc != TW_OK) {
        PyErr_Format(st->push_error, "%s", err[0] ? err : tw_strerror(rc));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef metrics_functions[] = {
    {"start_http_server", (PyCFunction)(void (*)(void))start_server, METH_VARARGS | METH_KEYWORDS,
     "start_http_server(registry, address, web_config_file=None) -> MetricsServer"},
    {"push", (PyCFunction)(void (*)(void))push, METH_VARARGS | METH_KEYWORDS,
     "push(registry, url, job, method, grouping, timeout=0): PUT 0, POST 1, DELETE 2; raises PushError"},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out)
{
    PyObject *t = PyType_FromModuleAndSpec(m, spec, base);
    if (!t)
        return -1;
    *out = (PyTypeObject *)t;
    return PyModule_AddType(m, *out);
}

int tw_py_metrics_init(PyObject *m, tw_py_state *st)
{
    if (add_type(m, &registry_spec, NULL, &st->registry_type) < 0 ||
        add_type(m, &counter_spec, NULL, &st->counter_type) < 0 ||
        add_type(m, &gauge_spec, NULL, &st->gauge_type) < 0 ||
        add_type(m, &histogram_spec, NULL, &st->histogram_type) < 0 ||
        add_type(m, &server_spec, NULL, &st->server_type) < 0)
        return -1;
    if (PyModule_AddFunctions(m, metrics_functions) < 0)
        return -1;
    return PyModule_AddIntConstant(m, "LABELS_MAX", TW_LABELS_MAX) < 0 ||
                   PyModule_AddIntConstant(m, "SERIES_LIMIT_DEFAULT", TW_SERIES_LIMIT_DEFAULT) < 0
               ? -1
               : 0;
}

int tw_py_metrics_traverse(tw_py_state *st, visitproc visit, void *arg)
{
    Py_VISIT(st->registry_type);
    Py_VISIT(st->counter_type);
    Py_VISIT(st->gauge_type);
    Py_VISIT(st->histogram_type);
    Py_VISIT(st->server_type);
    return 0;
}
