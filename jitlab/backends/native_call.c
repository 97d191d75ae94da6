/* The caller of native kernel entries (backends/native.py), as a CPython extension module.

   call(entry, arrays, scalars, kinds, parts) runs `void entry(void **arrays, int64 *ints)` on the
   arrays' data, with ints = every array's shape, then the scalars, then (part, parts) for a split
   kernel, each part on its own thread. Each array is checked against `kinds`, one (type number,
   ndim) byte pair per array, and must be C-contiguous: the kernel indexes it as one. The GIL is
   released for the call.

   cffi's call costs about 2 us for two arrays (a cdata per pointer, one for the pointer array);
   this one reads the pointers from the arrays themselves, in well under one. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

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

/* The threads that run a split kernel's parts 1..parts-1 while the calling thread runs part 0.
   They wait on a condition variable between calls: handing parts to them costs a few us, where
   a Python thread pool's submit and result cost some 50-100 us on this project's VMs. One split
   call uses them at a time; a call that finds them busy (another Python thread's) runs its parts
   one after another on its own thread. */
typedef struct {
    entry_fn fn;
    void **pointers;
    const int64_t *ints;       /* the shapes and scalars: each part appends (part, parts) */
    Py_ssize_t nints, parts;
} job_t;

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_posted = PTHREAD_COND_INITIALIZER, job_done = PTHREAD_COND_INITIALIZER;
static Py_ssize_t workers = 0, pending = 0;
static unsigned long generation = 0;
static job_t job;

static void run_part(const job_t *j, Py_ssize_t part) {
    int64_t ints[MAX_INTS];
    memcpy(ints, j->ints, (size_t)j->nints * sizeof(int64_t));
    ints[j->nints] = part;
    ints[j->nints + 1] = j->parts;
    j->fn(j->pointers, ints);
}

static void *worker(void *arg) {
    Py_ssize_t index = (Py_ssize_t)(intptr_t)arg;      /* runs part `index` of each job that has one */
    /* created (under pool_lock) for the job posted next, whose generation is at least 1 */
    unsigned long seen = 0;
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (generation == seen)
            pthread_cond_wait(&job_posted, &pool_lock);
        seen = generation;
        if (index < job.parts) {
            job_t mine = job;
            pthread_mutex_unlock(&pool_lock);
            run_part(&mine, index);
            pthread_mutex_lock(&pool_lock);
            if (--pending == 0)
                pthread_cond_signal(&job_done);
        }
    }
    return NULL;
}

/* A forked child has none of its parent's threads: it starts its own when it first splits. */
static void after_fork_in_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    pool_busy = fresh;
    pool_lock = fresh;
    job_posted = fresh_cond;
    job_done = fresh_cond;
    workers = pending = 0;
}

static void run_split(const job_t *j) {
    if (pthread_mutex_trylock(&pool_busy) != 0) {
        for (Py_ssize_t part = 0; part < j->parts; part++)
            run_part(j, part);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    while (workers < j->parts - 1) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, (void *)(intptr_t)(workers + 1)) != 0)
            break;
        pthread_detach(thread);
        workers++;
    }
    Py_ssize_t helped = workers < j->parts - 1 ? workers : j->parts - 1;
    job = *j;
    pending = helped;
    generation++;
    pthread_cond_broadcast(&job_posted);
    pthread_mutex_unlock(&pool_lock);
    run_part(j, 0);
    for (Py_ssize_t part = helped + 1; part < j->parts; part++)      /* parts no thread could be started for */
        run_part(j, part);
    pthread_mutex_lock(&pool_lock);
    while (pending > 0)
        pthread_cond_wait(&job_done, &pool_lock);
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&pool_busy);
}

/* call(entry, arrays, scalars, kinds, parts): parts 0 for an entry that is not split, 1 to run a
   split entry whole, more to run its parts at once. */
static PyObject *call(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5)
        return fail("native call: 5 arguments expected, got %zd", nargs);
    void *address = PyLong_AsVoidPtr(args[0]);
    PyObject *arrays = args[1], *scalars = args[2], *kinds = args[3];
    Py_ssize_t parts = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(arrays) || !PyTuple_CheckExact(scalars) || !PyBytes_CheckExact(kinds) || parts < 0)
        return fail("native call: arrays must be a list, scalars a tuple, kinds bytes and parts >= 0");
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
    job_t j = {(entry_fn)address, pointers, ints, at, parts};
    Py_BEGIN_ALLOW_THREADS
    if (parts == 0)
        j.fn(pointers, ints);
    else if (parts == 1)
        run_part(&j, 0);
    else
        run_split(&j);
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
    pthread_atfork(NULL, NULL, after_fork_in_child);
    return PyModule_Create(&module);
}
