/*
 * native.h: what the four files of trainwatch._native share: the module
 * state (the exception types), the error mapping from TW_E* codes to Python
 * exceptions, and the type specs each file defines.
 *
 * The module is small and typed (heap types, module state, no Python objects
 * in C globals); the names users know live in the pure-Python package.
 */
#ifndef TW_PY_NATIVE_H
#define TW_PY_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct tw_py_state {
    PyObject *cardinality_error; /* trainwatch.CardinalityError(ValueError) */
    PyObject *push_error;        /* trainwatch.PushError(OSError) */
    PyTypeObject *registry_type;
    PyTypeObject *counter_type, *gauge_type, *histogram_type;
    PyTypeObject *server_type;
    PyTypeObject *router_type, *fast_logger_type;
    PyObject *record_attrs; /* frozenset: LogRecord's own attribute names (the rest are extra fields) */
    PyObject *strings[12];  /* interned attribute names log.c reads (TW_PY_S_*) */
} tw_py_state;

enum {
    TW_PY_S_NAME,
    TW_PY_S_MSG,
    TW_PY_S_ARGS,
    TW_PY_S_LEVELNO,
    TW_PY_S_PATHNAME,
    TW_PY_S_FUNCNAME,
    TW_PY_S_LINENO,
    TW_PY_S_EXC_TEXT,
    TW_PY_S_STACK_INFO,
    TW_PY_S_TW_SUMMARY,
    TW_PY_S_EXC_INFO,
    TW_PY_S_COUNT
};

extern PyModuleDef tw_py_module;

/* The state of the module a type (or a subclass of it) belongs to. */
/* state.c: the module definition the types' module is found by (module.c's, at import). */
void tw_py_state_init(PyModuleDef *def);
tw_py_state *tw_py_state_of_type(PyTypeObject *t);
tw_py_state *tw_py_state_of_module(PyObject *m);

/* Raises the Python exception for a TW_E* status, the message naming what
 * it was about ("what: reason"). Returns NULL. */
PyObject *tw_py_raise(tw_py_state *st, int status, const char *what);

/* metrics.c */
int tw_py_metrics_init(PyObject *m, tw_py_state *st);
int tw_py_metrics_traverse(tw_py_state *st, visitproc visit, void *arg);
/* log.c */
int tw_py_log_init(PyObject *m, tw_py_state *st);
int tw_py_log_traverse(tw_py_state *st, visitproc visit, void *arg);
/* The router's text and JSON loggers (borrowed from libtrainwatch, valid
 * until exit); -1 with TypeError when o is not a Router. */
struct tw_logger;
int tw_py_router_loggers(tw_py_state *st, PyObject *o, struct tw_logger **text, struct tw_logger **json);
/* control.c */
int tw_py_control_init(PyObject *m, tw_py_state *st);

#endif
