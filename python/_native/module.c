/*
 * module.c: trainwatch._native, the CPython extension behind the trainwatch
 * package: module creation, its state and the TW_E* -> exception mapping.
 * metrics.c holds the metric, registry, server and push types; log.c the
 * logging handler core and the direct logger; control.c the control channel
 * of `trainwatch run` (request polling, replies, stack dumps).
 */
#include "native.h"

#include "trainwatch/error.h"

tw_py_state *tw_py_state_of_module(PyObject *m)
{
    return (tw_py_state *)PyModule_GetState(m);
}

tw_py_state *tw_py_state_of_type(PyTypeObject *t)
{
    PyObject *m = PyType_GetModuleByDef(t, &tw_py_module);
    if (!m) {
        PyErr_Clear();
        return NULL;
    }
    return tw_py_state_of_module(m);
}

PyObject *tw_py_raise(tw_py_state *st, int status, const char *what)
{
    PyObject *type = PyExc_ValueError;
    switch (status) {
    case TW_ENOMEM:
        return PyErr_NoMemory();
    case TW_ELIMIT:
        type = st ? st->cardinality_error : PyExc_ValueError;
        break;
    case TW_ENET:
    case TW_EHTTP:
        type = st ? st->push_error : PyExc_OSError;
        break;
    case TW_EIO:
    case TW_ENOENT:
    case TW_EACCES:
    case TW_EISDIR:
    case TW_EBUSY:
    case TW_ETLS:
        type = PyExc_OSError;
        break;
    case TW_ECONFIG:
    case TW_EINVAL:
    case TW_ENAME:
    case TW_EEXIST:
    case TW_ELABELS:
    default:
        break;
    }
    if (what && *what)
        PyErr_Format(type, "%s: %s", what, tw_strerror(status));
    else
        PyErr_SetString(type, tw_strerror(status));
    return NULL;
}

static int module_exec(PyObject *m)
{
    tw_py_state *st = tw_py_state_of_module(m);
    st->cardinality_error = PyErr_NewExceptionWithDoc(
        "trainwatch.CardinalityError",
        "A new label combination past the metric's series limit (counted in trainwatch_dropped_series_total).",
        PyExc_ValueError, NULL);
    st->push_error =
        PyErr_NewExceptionWithDoc("trainwatch.PushError", "A push to a Pushgateway failed.", PyExc_OSError, NULL);
    if (!st->cardinality_error || !st->push_error)
        return -1;
    if (PyModule_AddObjectRef(m, "CardinalityError", st->cardinality_error) < 0 ||
        PyModule_AddObjectRef(m, "PushError", st->push_error) < 0)
        return -1;
    if (tw_py_metrics_init(m, st) < 0 || tw_py_log_init(m, st) < 0 || tw_py_control_init(m, st) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    tw_py_state *st = tw_py_state_of_module(m);
    Py_VISIT(st->cardinality_error);
    Py_VISIT(st->push_error);
    if (tw_py_metrics_traverse(st, visit, arg) || tw_py_log_traverse(st, visit, arg))
        return -1;
    return 0;
}

static int module_clear(PyObject *m)
{
    tw_py_state *st = tw_py_state_of_module(m);
    Py_CLEAR(st->cardinality_error);
    Py_CLEAR(st->push_error);
    Py_CLEAR(st->registry_type);
    Py_CLEAR(st->counter_type);
    Py_CLEAR(st->gauge_type);
    Py_CLEAR(st->histogram_type);
    Py_CLEAR(st->server_type);
    Py_CLEAR(st->router_type);
    Py_CLEAR(st->fast_logger_type);
    Py_CLEAR(st->record_attrs);
    for (size_t i = 0; i < TW_PY_S_COUNT; i++)
        Py_CLEAR(st->strings[i]);
    return 0;
}

static void module_free(void *m)
{
    module_clear((PyObject *)m);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyModuleDef tw_py_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trainwatch._native",
    .m_doc = "libtrainwatch for Python: metrics, the /metrics server, Pushgateway pushes and logging sinks.",
    .m_size = sizeof(tw_py_state),
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__native(void);
PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&tw_py_module);
}
