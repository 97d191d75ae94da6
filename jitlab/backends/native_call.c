/* The caller of native kernel entries (backends/native.py), as a CPython extension module.

   call(entry, arrays, scalars, kinds, part, parts) runs `void entry(void **arrays, int64 *ints)`
   on the arrays' data, with ints = every array's shape, then the scalars, then (part, parts)
   when parts > 0 (a split kernel). Each array is checked against `kinds`, one (type number, ndim)
   byte pair per array, and must be C-contiguous: the kernel indexes it as one. The GIL is released
   for the call, so the parts of a split kernel run at once on their threads.

   cffi's call costs about 2 us for two arrays (a cdata per pointer, one for the pointer array);
   this one reads the pointers from the arrays themselves, in well under one. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>

#define MAX_ARRAYS 256
#define MAX_INTS 1024

typedef void (*entry_fn)(void **, int64_t *);

static PyObject *mismatch_error = NULL;    /* jitlab's JitlabError, given by configure() */

static PyObject *fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyErr_FormatV(mismatch_error != NULL ? mismatch_error : PyExc_TypeError, format, args);
    va_end(args);
    return NULL;
}

static PyObject *call(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6)
        return fail("native call: 6 arguments expected, got %zd", nargs);
    void *address = PyLong_AsVoidPtr(args[0]);
    PyObject *arrays = args[1], *scalars = args[2], *kinds = args[3];
    Py_ssize_t part = PyLong_AsSsize_t(args[4]), parts = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(arrays) || !PyTuple_CheckExact(scalars) || !PyBytes_CheckExact(kinds))
        return fail("native call: arrays must be a list, scalars a tuple and kinds bytes");
    Py_ssize_t n = PyList_GET_SIZE(arrays);
    if (2 * n != PyBytes_GET_SIZE(kinds) || n > MAX_ARRAYS)
        return fail("native kernel: %zd arrays passed, %zd expected (a jitlab bug)", n, PyBytes_GET_SIZE(kinds) / 2);
    const unsigned char *kind = (const unsigned char *)PyBytes_AS_STRING(kinds);
    void *pointers[MAX_ARRAYS];
    int64_t ints[MAX_INTS];
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(arrays, k);
        if (!PyArray_Check(item))
            return fail("native kernel: argument %zd is a %s, not an array (a jitlab bug)", k, Py_TYPE(item)->tp_name);
        PyArrayObject *a = (PyArrayObject *)item;
        int ndim = PyArray_NDIM(a);
        /* int64 is both NPY_LONG and NPY_LONGLONG on some platforms: equivalent numbers pass */
        int type = PyArray_TYPE(a);
        if ((type != kind[2 * k] && !PyArray_EquivTypenums(type, kind[2 * k])) || ndim != kind[2 * k + 1]
                || PyArray_ISBYTESWAPPED(a))
            return fail("native kernel: argument %zd is a type-%d %d-d array%s where it was built for type-%d %d-d "
                        "(a jitlab bug)", k, type, ndim, PyArray_ISBYTESWAPPED(a) ? " (byte-swapped)" : "",
                        kind[2 * k], kind[2 * k + 1]);
        if (!PyArray_IS_C_CONTIGUOUS(a))
            return fail("native kernel: argument %zd is not C-contiguous (a jitlab bug)", k);
        if (at + ndim > MAX_INTS)
            return fail("native kernel: more than %d dimensions in all", MAX_INTS);
        npy_intp *shape = PyArray_DIMS(a);
        for (int d = 0; d < ndim; d++)
            ints[at++] = shape[d];
        pointers[k] = PyArray_DATA(a);
    }
    Py_ssize_t m = PyTuple_GET_SIZE(scalars);
    if (at + m + 2 > MAX_INTS)
        return fail("native kernel: too many scalar arguments (%zd)", m);
    for (Py_ssize_t k = 0; k < m; k++) {
        ints[at++] = PyLong_AsLongLong(PyTuple_GET_ITEM(scalars, k));
        if (PyErr_Occurred())
            return NULL;
    }
    if (parts > 0) {
        ints[at++] = part;
        ints[at++] = parts;
    }
    entry_fn fn = (entry_fn)address;
    Py_BEGIN_ALLOW_THREADS
    fn(pointers, ints);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *configure(PyObject *Py_UNUSED(self), PyObject *error) {
    Py_XDECREF(mismatch_error);
    Py_INCREF(error);
    mismatch_error = error;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "Runs a native kernel entry on numpy arrays."},
    {"configure", configure, METH_O, "Sets the exception class of a mismatched call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "jitlab_native_call", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_jitlab_native_call(void) {
    import_array();
    return PyModule_Create(&module);
}
