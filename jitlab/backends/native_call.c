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

/* The threads that help run a split kernel's parts beside the calling thread. They wait on a
   condition variable between calls: handing parts to them costs a few us, where a Python thread
   pool's submit and result cost some 50-100 us on this project's VMs. One split call uses them
   at a time; a call that finds them busy (another Python thread's) runs its parts one after
   another on its own thread.

   Every thread, the caller's first, takes the next part left until none is: a call cut into more
   parts than threads (backends/native.py: 4 per thread for generated loops) loses little to a
   worker that starts late (woken from its wait, on a core the VM had parked), where with one part
   per thread the caller ran its half and then waited for the other whole half. The caller waits only for parts taken, never
   for a worker to wake: the next part is one counter tagged with the job's generation, so a
   worker that wakes after its job is over takes nothing of it, nor of the next. */
typedef struct {
    entry_fn fn;
    void **pointers;
    const int64_t *ints;       /* the shapes and scalars: each part appends (part, parts) */
    Py_ssize_t nints, parts;
} job_t;

#define PART_BITS 20           /* parts per job below 2**20; the generation in the bits above */
#define PART_MASK ((UINT64_C(1) << PART_BITS) - 1)

static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_posted = PTHREAD_COND_INITIALIZER, job_done = PTHREAD_COND_INITIALIZER;
static Py_ssize_t workers = 0, helpers = 0;
static uint64_t generation = 0;
static job_t job;                     /* the job posted last, read under pool_lock */
static uint64_t next_part = 0;        /* generation << PART_BITS | the next part to take */
static Py_ssize_t parts_done = 0;     /* parts of the current job finished */

static void run_part(const job_t *j, Py_ssize_t part) {
    int64_t ints[MAX_INTS];
    memcpy(ints, j->ints, (size_t)j->nints * sizeof(int64_t));
    ints[j->nints] = part;
    ints[j->nints + 1] = j->parts;
    j->fn(j->pointers, ints);
}

/* Runs parts of job `j` of generation `gen` until none is left; the thread that finishes the
   last one wakes the caller. */
static void take_parts(const job_t *j, uint64_t gen) {
    uint64_t tag = (gen << PART_BITS) & ~PART_MASK;
    for (;;) {
        uint64_t seen = __atomic_load_n(&next_part, __ATOMIC_ACQUIRE);
        if ((seen & ~PART_MASK) != tag || (Py_ssize_t)(seen & PART_MASK) >= j->parts)
            return;
        if (!__atomic_compare_exchange_n(&next_part, &seen, seen + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        run_part(j, (Py_ssize_t)(seen & PART_MASK));
        if (__atomic_add_fetch(&parts_done, 1, __ATOMIC_ACQ_REL) == j->parts) {
            pthread_mutex_lock(&pool_lock);
            pthread_cond_signal(&job_done);
            pthread_mutex_unlock(&pool_lock);
        }
    }
}

static void *worker(void *arg) {
    Py_ssize_t index = (Py_ssize_t)(intptr_t)arg;      /* helps with jobs that want `index` helpers or more */
    /* created (under pool_lock) for the job posted next, whose generation is at least 1 */
    uint64_t seen = 0;
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (generation == seen)
            pthread_cond_wait(&job_posted, &pool_lock);
        seen = generation;
        if (index <= helpers) {
            job_t mine = job;
            pthread_mutex_unlock(&pool_lock);
            take_parts(&mine, seen);
            pthread_mutex_lock(&pool_lock);
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
    workers = helpers = 0;
}

/* Runs the job's parts on up to `threads` threads, the caller's among them. */
static void run_split(const job_t *j, Py_ssize_t threads) {
    if (pthread_mutex_trylock(&pool_busy) != 0) {
        for (Py_ssize_t part = 0; part < j->parts; part++)
            run_part(j, part);
        return;
    }
    pthread_mutex_lock(&pool_lock);
    while (workers < threads - 1) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, (void *)(intptr_t)(workers + 1)) != 0)
            break;
        pthread_detach(thread);
        workers++;
    }
    helpers = workers < threads - 1 ? workers : threads - 1;
    job = *j;
    uint64_t gen = ++generation;
    __atomic_store_n(&parts_done, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&next_part, (gen << PART_BITS) & ~PART_MASK, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&job_posted);
    pthread_mutex_unlock(&pool_lock);
    take_parts(j, gen);
    pthread_mutex_lock(&pool_lock);
    while (__atomic_load_n(&parts_done, __ATOMIC_ACQUIRE) < j->parts)
        pthread_cond_wait(&job_done, &pool_lock);
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&pool_busy);
}

/* call(entry, arrays, scalars, kinds, parts, threads): parts 0 for an entry that is not split,
   else its loop in that many parts, run by up to `threads` threads. */
static PyObject *call(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6)
        return fail("native call: 6 arguments expected, got %zd", nargs);
    void *address = PyLong_AsVoidPtr(args[0]);
    PyObject *arrays = args[1], *scalars = args[2], *kinds = args[3];
    Py_ssize_t parts = PyLong_AsSsize_t(args[4]), threads = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(arrays) || !PyTuple_CheckExact(scalars) || !PyBytes_CheckExact(kinds) || parts < 0
            || parts > (Py_ssize_t)PART_MASK)
        return fail("native call: arrays must be a list, scalars a tuple, kinds bytes and 0 <= parts < 2**20");
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
    else if (threads < 2 || parts == 1)
        for (Py_ssize_t part = 0; part < parts; part++)
            run_part(&j, part);
    else
        run_split(&j, threads < parts ? threads : parts);
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
