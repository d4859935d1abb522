/*
 * module.c: trainwatch._native, the CPython extension behind the trainwatch
 * package: module creation, which hands the module to each part. metrics.c
 * holds the metric, registry, server and push types; router.c (with
 * log_fields.c) the logging handler core and the direct logger; control.c
 * the control channel of `trainwatch run` (request polling, replies, stack
 * dumps). What they all use, the module's state and the TW_E* -> exception
 * mapping, is state.c's.
 */
#include "native.h"

#include "trainwatch/error.h"

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
    tw_py_state_init(&tw_py_module); /* before any type asks for its module */
    return PyModuleDef_Init(&tw_py_module);
}
