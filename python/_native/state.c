/*
 * state.c: what every part of trainwatch._native uses: the module's state
 * (from the module, or from one of its types, subclasses too) and the
 * mapping of TW_E* statuses to Python exceptions. module.c registers its
 * definition here at import, so this file depends on none of the parts.
 */
#include "native.h"

#include "trainwatch/error.h"

static PyModuleDef *module_def; /* set by PyInit__native before any type exists */

void tw_py_state_init(PyModuleDef *def)
{
    module_def = def;
}

tw_py_state *tw_py_state_of_module(PyObject *m)
{
    return (tw_py_state *)PyModule_GetState(m);
}

tw_py_state *tw_py_state_of_type(PyTypeObject *t)
{
    PyObject *m = module_def ? PyType_GetModuleByDef(t, module_def) : NULL;
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
