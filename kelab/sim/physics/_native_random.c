/* Each listed copy's next uniform draws, many copies in one call (uniform_rows), through
 * numpy.random's public C interface of a bit generator: the ``bitgen_t`` that a
 * BitGenerator's ``capsule`` holds, its ``next_double`` per value, the bit generator's
 * ``lock`` held around a copy's draws. That is what ``Generator.random`` does (numpy's
 * random_standard_uniform_fill), so the values are the same bits; scaled, ``u * span``
 * then ``+ low``, each rounded (-ffp-contract=off), as numpy's ``out *= span; out += low``.
 *
 * kelab/sim/random_rows.py is its door: it checks numpy's version and takes the public
 * per-copy path where this is not built, is off or declines a copy. No Chipmunk here.
 */
#include "_native.h"

/* numpy/random/bitgen.h's ``bitgen_t`` (numpy's documented C-API, the same from 1.17). */
typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t;

/* A copy's row of more values than this is drawn with the GIL released, as
 * Generator.random always does; a shorter one (a reset's few values) keeps it: handing the
 * GIL to a waiting shard thread and taking it back costs the calling thread more than the
 * draws. */
#define DRAW_WITHOUT_GIL 65536

const char uniform_rows_doc[] = PyDoc_STR(
"uniform_rows(generator_type, rngs, ids, out, low, span)\n\n"
"Row ``j`` of ``out`` (float64, ``len(ids)`` rows of equal length) gets the next standard\n"
"uniforms ``u`` of ``rngs[ids[j]]`` (``rngs`` a list, ``ids`` int64 in ``[0, len(rngs))``),\n"
"copy by copy in the order of ``ids``, as ``u * span + low``: ``rngs[i].random(out=row)``\n"
"then ``row *= span; row += low``, bit for bit, without a Python call per copy. Every\n"
"listed generator is looked at first: where one is not exactly of ``generator_type`` or\n"
"its bit generator has no valid \"BitGenerator\" capsule, nothing is drawn and it returns\n"
"False (take the public path); else True.");

/* Interned attribute names, made once. */
static PyObject *s_bit_generator, *s_capsule, *s_lock, *s_acquire, *s_release;

static int
names_ready(void)
{
    if (s_release) return 1;
    s_bit_generator = PyUnicode_InternFromString("bit_generator");
    s_capsule = PyUnicode_InternFromString("capsule");
    s_lock = PyUnicode_InternFromString("lock");
    s_acquire = PyUnicode_InternFromString("acquire");
    s_release = s_acquire ? PyUnicode_InternFromString("release") : NULL;
    return s_release != NULL;
}

/* One listed copy's bit generator, looked at before anything is drawn. */
typedef struct {
    PyObject *owner; /* the BitGenerator (a reference: its capsule points into it) */
    PyObject *lock;  /* its lock (a reference) */
    bitgen_t *bitgen;
} Source;

/* Copy j's source into s[j]: 1 taken, 0 declined (nothing held), -1 an error raised. */
static int
take_source(PyObject *gen, PyTypeObject *type, Source *s)
{
    if (Py_TYPE(gen) != type) return 0; /* a subclass may draw otherwise: its own method */
    PyObject *owner = PyObject_GetAttr(gen, s_bit_generator);
    if (!owner) return -1;
    PyObject *capsule = PyObject_GetAttr(owner, s_capsule);
    if (!capsule) {
        Py_DECREF(owner);
        return -1;
    }
    bitgen_t *bitgen = PyCapsule_IsValid(capsule, "BitGenerator")
                           ? PyCapsule_GetPointer(capsule, "BitGenerator")
                           : NULL;
    Py_DECREF(capsule);
    PyObject *lock = bitgen ? PyObject_GetAttr(owner, s_lock) : NULL;
    if (!lock) {
        Py_DECREF(owner);
        return bitgen ? -1 : 0;
    }
    s->owner = owner;
    s->lock = lock;
    s->bitgen = bitgen;
    return 1;
}

/* One copy's row, its lock held (acquire() waits without the GIL, as Python's does). */
static int
draw_row(const Source *s, double *row, Py_ssize_t width, double low, double span)
{
    PyObject *r = PyObject_CallMethodNoArgs(s->lock, s_acquire);
    if (!r) return 0;
    Py_DECREF(r);
    bitgen_t *b = s->bitgen;
    if (width > DRAW_WITHOUT_GIL) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t t = 0; t < width; t++) row[t] = b->next_double(b->state) * span + low;
        Py_END_ALLOW_THREADS
    } else {
        for (Py_ssize_t t = 0; t < width; t++) row[t] = b->next_double(b->state) * span + low;
    }
    r = PyObject_CallMethodNoArgs(s->lock, s_release);
    if (!r) return 0;
    Py_DECREF(r);
    return 1;
}

PyObject *
uniform_rows(PyObject *self, PyObject *args)
{
    PyObject *type, *rngs;
    Py_buffer ids, out;
    double low, span;
    if (!names_ready()) return NULL;
    if (!PyArg_ParseTuple(args, "O!O!y*w*dd", &PyType_Type, &type, &PyList_Type, &rngs, &ids,
                          &out, &low, &span))
        return NULL;
    const Py_ssize_t k = ids.len / 8, n = PyList_GET_SIZE(rngs), values = out.len / 8;
    const int64_t *id = ids.buf;
    int ok = ids.len % 8 == 0 && out.len % 8 == 0 && (k ? values % k == 0 : values == 0);
    for (Py_ssize_t j = 0; ok && j < k; j++) ok = id[j] >= 0 && id[j] < n;
    if (!ok) {
        Py_buffer *held[] = {&ids, &out};
        return refuse(held, 2,
                      "uniform_rows: ids must be int64 in [0, len(rngs)) and out float64, "
                      "len(ids) rows of equal length");
    }
    const Py_ssize_t width = k ? values / k : 0;
    Source *src = k ? PyMem_Calloc((size_t)k, sizeof(Source)) : NULL;
    Py_ssize_t taken = 0;
    int found = 1;
    if (k && !src) {
        PyErr_NoMemory();
        found = -1;
    }
    /* every copy looked at before any is drawn: a declined one leaves all untouched */
    while (found == 1 && taken < k) {
        PyObject *gen = PyList_GET_ITEM(rngs, id[taken]);
        Py_INCREF(gen); /* held while its attributes are read */
        found = take_source(gen, (PyTypeObject *)type, &src[taken]);
        Py_DECREF(gen);
        taken += found == 1;
    }
    /* a failed acquire() (a signal's exception while it waits) stops before that copy,
       as an interrupted per-copy loop does */
    for (Py_ssize_t j = 0; found == 1 && j < k; j++)
        if (!draw_row(&src[j], (double *)out.buf + j * width, width, low, span)) found = -1;
    for (Py_ssize_t j = 0; j < taken; j++) {
        Py_DECREF(src[j].owner);
        Py_DECREF(src[j].lock);
    }
    PyMem_Free(src);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&out);
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}
