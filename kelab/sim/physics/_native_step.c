/* A shard's physics step in one C call, and several in one (kelab/sim/physics/_native.c
 * says what the helper is): the Stepper type, and the Gang where the shard threads of a
 * several-step run meet after each step (kelab/sim/physics/_packed.py, step_many).
 */
#include "_native.h"
#include <pythread.h>

/* ------------------------------------------------------------------ a shard's step */

typedef struct {
    PyObject_HEAD
    Py_buffer bufs[6];  /* held: the arrays below stay alive and in place */
    int held;
    void *space;
    const uint64_t *bodies; /* the shard's moving bodies: forces and reads, in this order */
    Py_ssize_t nbodies;
    const double *forces;   /* 3 per body, or with by_rows 3 per row of out */
    int direct;
    const int64_t *frows;   /* by_rows: body i's forces at row frows[i] (rows); NULL: i */
    PyObject *friction;     /* the regime rule's Friction, NULL: none */
    const int64_t *copies;  /* the shard's copies (the regime rule's) */
    Py_ssize_t ncopies;
    double *out;            /* the World's state rows (6 float64 a row) */
    const int64_t *rows;    /* per body: its row of out */
    const double *origins;  /* per body: its copy's origin x */
    double bound;
    /* joints(): where run() writes its copies' joint state (rows ``copies`` of pos, vel) */
    Py_buffer jbufs[6];
    int jheld;
    Py_ssize_t nb, nj, njoints;
} Stepper;

PyDoc_STRVAR(stepper_doc,
"Stepper(space, bodies, forces, direct, friction, copies, out, rows, origins, bound,\n"
"        by_rows=False)\n\n"
"One shard's physics step in one call, the GIL released once (kelab/sim/physics/_shard.py):\n"
"the held forces written (write_forces: ``bodies`` uint64 ``cpBody *``, ``forces`` 3\n"
"float64 each, ``direct``; with ``by_rows``, 3 float64 per row of ``out``, each body's\n"
"at its row: the World's own held forces), ``cpSpaceStep`` of ``space`` (an address), the\n"
"regime rule\n"
"of ``friction`` (a Friction, or None) for ``copies`` (int64), then, when asked, the\n"
"bodies read into rows ``rows`` of ``out`` (read_rows, ``origins`` per body). Held (not\n"
"copied): the arrays must keep their memory.");

static void
stepper_dealloc(Stepper *st)
{
    for (int i = 0; i < st->held; i++) PyBuffer_Release(&st->bufs[i]);
    for (int i = 0; i < st->jheld; i++) PyBuffer_Release(&st->jbufs[i]);
    Py_XDECREF(st->friction);
    Py_TYPE(st)->tp_free((PyObject *)st);
}

static PyObject *
stepper_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (!require_configured("Stepper")) return NULL;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Stepper takes positional arguments only");
        return NULL;
    }
    Stepper *st = (Stepper *)type->tp_alloc(type, 0);
    if (!st) return NULL;
    Py_buffer *b = st->bufs;
    unsigned long long space;
    int direct;
    PyObject *friction;
    int by_rows = 0;
    if (!PyArg_ParseTuple(args, "Ky*y*pOy*w*y*y*d|p", &space, &b[0], &b[1], &direct, &friction,
                          &b[2], &b[3], &b[4], &b[5], &st->bound, &by_rows)) {
        Py_DECREF(st); /* PyArg_ParseTuple released the buffers it had taken */
        return NULL;
    }
    st->held = 6;
    st->space = (void *)(uintptr_t)space;
    st->bodies = b[0].buf;
    st->nbodies = b[0].len / 8;
    st->forces = b[1].buf;
    st->direct = direct;
    st->copies = b[2].buf;
    st->ncopies = b[2].len / 8;
    st->out = b[3].buf;
    st->rows = b[4].buf;
    st->origins = b[5].buf;
    Py_ssize_t m = st->nbodies, nrows = b[3].len / 48;
    int ok = space != 0 && b[0].len % 8 == 0
             && (by_rows ? b[1].len * 2 == b[3].len : b[1].len >= m * 24) && b[2].len % 8 == 0
             && b[3].len % 48 == 0 && b[4].len == m * 8 && b[5].len == m * 8;
    for (Py_ssize_t i = 0; ok && i < m; i++) ok = st->rows[i] >= 0 && st->rows[i] < nrows;
    if (ok && friction != Py_None) {
        ok = PyObject_TypeCheck(friction, &FrictionType)
             && friction_has_copies(friction, st->copies, st->ncopies);
        if (ok) {
            Py_INCREF(friction);
            st->friction = friction;
        }
    }
    if (!ok) {
        Py_DECREF(st);
        PyErr_SetString(PyExc_ValueError,
                        "Stepper: forces must hold 3 float64 per body pointer (by_rows: per row "
                        "of out), rows and origins one int64 / float64 per body pointer, each "
                        "row within out (6 float64 a row), friction a Friction holding the "
                        "copies (or None); build it with "
                        "kelab.sim.physics._shard");
        return NULL;
    }
    st->frows = by_rows ? st->rows : NULL;
    return (PyObject *)st;
}

PyDoc_STRVAR(stepper_step_doc,
"step(dt, read) -> bool\n\n"
"Write the forces, step the space by ``dt``, run the regime rule and, with ``read``, read\n"
"the bodies into their rows: True when they were read and every value read is within\n"
"[-bound, bound] (False for NaN).");

static PyObject *
stepper_step(Stepper *st, PyObject *args)
{
    double dt;
    int read, within = 0;
    if (!PyArg_ParseTuple(args, "dp", &dt, &read)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    force_loop(st->bodies, st->nbodies, st->forces, st->frows, st->direct);
    ((space_step_f)fn[F_SPACE_STEP])(st->space, dt);
    if (st->friction)
        friction_regimes(st->friction, (uint64_t)(uintptr_t)st->space, st->copies, st->ncopies);
    if (read) within = read_loop(st->bodies, st->nbodies, st->out, st->rows, st->origins, st->bound);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(within);
}

/* ------------------------------------------------------------------ several steps */

/* The shards of a World stepping several steps in one job each meet after every step but
 * the last: each says whether its read was within the bound, and all go on only if every
 * one was. So they stop after the same step, the first whose read was not within: no
 * shard steps past a state the World has not checked, and every copy is at the same step
 * when the World checks it (World.step's error names that step, with that state).
 * Python's own thread locks (no GIL needed): a mutex, and per party a gate held closed
 * that the last to arrive opens for each of the others. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock mutex;
    PyThread_type_lock *gates;
    char *waiting;     /* per party: waiting at its gate (abort opens those) */
    int parties;
    int arrived;
    int stop;          /* a party of this round was not within */
    int go;            /* the last round's verdict, read by the parties it let go */
    int aborted;
} Gang;

PyDoc_STRVAR(gang_doc,
"Gang(parties)\n\n"
"The meeting point of ``parties`` shard threads running Stepper.run together (one party\n"
"each, numbered 0..parties-1): after each step but the last they go on only if every\n"
"read was within the bound. ``abort()`` lets every waiting party go (told to stop) and\n"
"makes later arrivals stop at once, until ``arm()``.");

static void
gang_dealloc(Gang *g)
{
    for (int i = 0; g->gates && i < g->parties; i++)
        if (g->gates[i]) PyThread_free_lock(g->gates[i]);
    PyMem_Free(g->gates);
    PyMem_Free(g->waiting);
    if (g->mutex) PyThread_free_lock(g->mutex);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyObject *
gang_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int parties;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Gang takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "i", &parties)) return NULL;
    if (parties < 1 || parties > 4096) {
        PyErr_Format(PyExc_ValueError, "Gang: parties must be in [1, 4096], got %d", parties);
        return NULL;
    }
    Gang *g = (Gang *)type->tp_alloc(type, 0);
    if (!g) return NULL;
    g->parties = parties;
    g->gates = PyMem_Calloc(parties, sizeof(PyThread_type_lock));
    g->waiting = PyMem_Calloc(parties, 1);
    g->mutex = PyThread_allocate_lock();
    int ok = g->gates && g->waiting && g->mutex;
    for (int i = 0; ok && i < parties; i++) {
        g->gates[i] = PyThread_allocate_lock();
        ok = g->gates[i] && PyThread_acquire_lock(g->gates[i], NOWAIT_LOCK);  /* closed */
    }
    if (!ok) {
        Py_DECREF(g);
        return PyErr_NoMemory();
    }
    return (PyObject *)g;
}

/* Party ``party`` finished a step, ``within`` or not: 1 if every party may take the next. */
static int
gang_meet(Gang *g, int party, int within)
{
    PyThread_acquire_lock(g->mutex, WAIT_LOCK);
    if (g->aborted) {
        PyThread_release_lock(g->mutex);
        return 0;
    }
    g->stop |= !within;
    if (++g->arrived < g->parties) {
        g->waiting[party] = 1;
        PyThread_release_lock(g->mutex);
        PyThread_acquire_lock(g->gates[party], WAIT_LOCK);  /* opened by the last (or abort) */
        return g->go;  /* set before the gate opened; the next round needs this party */
    }
    g->go = !g->stop && !g->aborted;
    g->arrived = 0;
    g->stop = 0;
    for (int i = 0; i < g->parties; i++) {
        if (g->waiting[i]) {
            g->waiting[i] = 0;
            PyThread_release_lock(g->gates[i]);
        }
    }
    int go = g->go;
    PyThread_release_lock(g->mutex);
    return go;
}

/* Whether the gang was aborted (a party's job failed: its run's results are dropped). */
static int
gang_aborted(Gang *g)
{
    PyThread_acquire_lock(g->mutex, WAIT_LOCK);
    int aborted = g->aborted;
    PyThread_release_lock(g->mutex);
    return aborted;
}

static PyObject *
gang_abort(Gang *g, PyObject *unused)
{
    PyThread_acquire_lock(g->mutex, WAIT_LOCK);
    g->aborted = 1;
    g->go = 0;
    for (int i = 0; i < g->parties; i++) {
        if (g->waiting[i]) {
            g->waiting[i] = 0;
            PyThread_release_lock(g->gates[i]);
        }
    }
    PyThread_release_lock(g->mutex);
    Py_RETURN_NONE;
}

static PyObject *
gang_arm(Gang *g, PyObject *unused)
{
    /* called while no party is inside: every gate closed again, no round begun */
    PyThread_acquire_lock(g->mutex, WAIT_LOCK);
    for (int i = 0; i < g->parties; i++) {
        PyThread_acquire_lock(g->gates[i], NOWAIT_LOCK);  /* an opened one closes */
        g->waiting[i] = 0;
    }
    g->aborted = g->arrived = g->stop = 0;
    PyThread_release_lock(g->mutex);
    Py_RETURN_NONE;
}

static PyMethodDef gang_methods[] = {
    {"abort", (PyCFunction)gang_abort, METH_NOARGS,
     "abort()\n\nLet every waiting party go, told to stop; later arrivals stop at once."},
    {"arm", (PyCFunction)gang_arm, METH_NOARGS,
     "arm()\n\nMake the gang ready for a run again (after abort; no party inside)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject GangType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kelab.sim.physics._native.Gang",
    .tp_basicsize = sizeof(Gang),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = gang_doc,
    .tp_new = gang_new,
    .tp_dealloc = (destructor)gang_dealloc,
    .tp_methods = gang_methods,
};

PyDoc_STRVAR(stepper_joints_doc,
"joints(pos, vel, nb, nj, cols, child, parent, rel)\n\n"
"Where ``run(..., joints=True)`` writes the revolute and fixed joints' state of this\n"
"shard's copies after its last read: rows ``copies`` of ``pos`` and ``vel`` (float64,\n"
"``nj`` a row, as many rows as ``out`` has of ``nb`` bodies), from their rows of ``out``,\n"
"with joint_revs' tables and operations (kelab/sim/kinematics.py). Held (not copied); a\n"
"refused call keeps the last binding.");

static PyObject *
stepper_joints(Stepper *st, PyObject *args)
{
    Py_buffer b[6];
    Py_ssize_t nb, nj;
    if (!PyArg_ParseTuple(args, "w*w*nny*y*y*y*", &b[0], &b[1], &nb, &nj, &b[2], &b[3], &b[4],
                          &b[5]))
        return NULL;
    Py_ssize_t k = b[2].len / 8, m = nj > 0 ? b[0].len / (8 * nj) : 0;
    int ok = nb > 0 && nj > 0 && b[0].len == m * nj * 8 && b[1].len == b[0].len
             && st->bufs[3].len == m * nb * 48
             && joint_tables_fit(&b[2], &b[3], &b[4], &b[5], nj, nb);
    for (Py_ssize_t i = 0; ok && i < st->ncopies; i++)
        ok = st->copies[i] >= 0 && st->copies[i] < m;
    if (!ok) {
        for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
        PyErr_Format(PyExc_ValueError,
                     "Stepper.joints: pos and vel must hold nj float64 a row for as many rows "
                     "as out holds of nb bodies, the joint tables one entry per joint within "
                     "them, every copy a row, got nb=%zd, nj=%zd, %zd joints; bind them with "
                     "PackedBackend.bind_joints",
                     nb, nj, k);
        return NULL;
    }
    for (int i = 0; i < st->jheld; i++) PyBuffer_Release(&st->jbufs[i]);
    memcpy(st->jbufs, b, sizeof b);
    st->jheld = 6;
    st->nb = nb;
    st->nj = nj;
    st->njoints = k;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(stepper_run_doc,
"run(dt, count, gang, party, joints=False) -> (taken, within)\n\n"
"Up to ``count`` steps as ``step(dt, True)`` takes them, the GIL released once: after each\n"
"one the read's verdict; it stops after the first step whose read was not within (with a\n"
"``gang``, a Gang or None, as party ``party``: after the first step where any party's was\n"
"not, so every party stops after the same step). With ``joints``, then the joint state of\n"
"its copies from the last read (``joints()``; not after an aborted gang). Returns the\n"
"steps taken and the last read's verdict.");

static PyObject *
stepper_run(Stepper *st, PyObject *args)
{
    double dt;
    int count, party, within = 0, taken = 0, joints = 0;
    PyObject *gang;
    if (!PyArg_ParseTuple(args, "diOi|p", &dt, &count, &gang, &party, &joints)) return NULL;
    if (joints && !st->jheld) {
        PyErr_SetString(PyExc_ValueError,
                        "Stepper.run: joints must be False while no joint tables are bound, "
                        "got True; bind them with Stepper.joints() first");
        return NULL;
    }
    if (gang != Py_None && !PyObject_TypeCheck(gang, &GangType)) {
        PyErr_Format(PyExc_TypeError, "Stepper.run: gang must be a Gang or None, got %.100s",
                     Py_TYPE(gang)->tp_name);
        return NULL;
    }
    Gang *g = gang == Py_None ? NULL : (Gang *)gang;
    if (count < 1 || (g && (party < 0 || party >= g->parties))) {
        PyErr_Format(PyExc_ValueError,
                     "Stepper.run: count must be >= 1 and party within the gang, got %d, %d",
                     count, party);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    while (taken < count) {
        force_loop(st->bodies, st->nbodies, st->forces, st->frows, st->direct);
        ((space_step_f)fn[F_SPACE_STEP])(st->space, dt);
        if (st->friction)
            friction_regimes(st->friction, (uint64_t)(uintptr_t)st->space, st->copies,
                             st->ncopies);
        within = read_loop(st->bodies, st->nbodies, st->out, st->rows, st->origins, st->bound);
        taken++;
        if (taken == count) break;  /* the caller's wait for the job is the last meeting */
        if (g ? !gang_meet(g, party, within) : !within) break;
    }
    /* the joint state of the last read, here rather than in the calling thread after the
     * barrier (Humanoid-v0 x256 on 2 threads: ~12 us of its Python per shard an env step) */
    if (joints && !(g && gang_aborted(g)))
        rev_loop(st->out, st->nb, st->jbufs[0].buf, st->jbufs[1].buf, st->nj, st->njoints,
                 st->jbufs[2].buf, st->jbufs[3].buf, st->jbufs[4].buf, st->jbufs[5].buf,
                 st->copies, st->ncopies);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(iO)", taken, within ? Py_True : Py_False);
}

static PyMethodDef stepper_methods[] = {
    {"step", (PyCFunction)stepper_step, METH_VARARGS, stepper_step_doc},
    {"run", (PyCFunction)stepper_run, METH_VARARGS, stepper_run_doc},
    {"joints", (PyCFunction)stepper_joints, METH_VARARGS, stepper_joints_doc},
    {NULL, NULL, 0, NULL},
};

PyTypeObject StepperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kelab.sim.physics._native.Stepper",
    .tp_basicsize = sizeof(Stepper),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = stepper_doc,
    .tp_new = stepper_new,
    .tp_dealloc = (destructor)stepper_dealloc,
    .tp_methods = stepper_methods,
};

