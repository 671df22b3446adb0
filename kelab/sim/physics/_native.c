/* KELab's C helper: one call per batch, the GIL released.
 *
 * - reset() (_native_reset.c): packed resets in place, the copies' shapes and constraints
 *   kept in the space, and a reset's state write and read-back (kelab/sim/physics/_reset.py
 *   says what and why; the Python side builds every table it reads);
 * - read_rows(), write_forces(), write_bodies(): a shard's body states read straight into
 *   the World's state rows, its held forces and reset states written (_shard.py,
 *   _packed.py);
 * - Stepper (_native_step.c): a shard's whole physics step in one call (forces,
 *   cpSpaceStep, the friction regimes, the read), so its thread takes the GIL once per
 *   step (_shard.py), or several steps in one call, the shards meeting after each at a
 *   Gang, then its copies' joint state (_packed.py);
 * - joint_revs(): the revolute and fixed joints' state from body states (kinematics.py);
 * - term_forces(): the actuators' constant force terms from held efforts (_controls.py);
 * - write_shapes(), write_rows(), write_velocities() (_native_params.c): per-copy
 *   parameters (shape masses, friction, elasticity) and pushes, many objects a call
 *   (kelab/sim/physics/_params.py), and within(): their rows' bounds checked in one pass
 *   (kelab/sim/_params.py);
 * - Friction (_native_friction.c): the friction model of both layouts without Python per
 *   contact (kelab/sim/physics/_friction.py);
 * - uniform_rows() (_native_random.c): many copies' uniform draws in one call through
 *   numpy's bit generator C interface (kelab/sim/random_rows.py, its door).
 *
 * It knows no Chipmunk struct (_native.h). The byte offsets of the fields it reads and writes
 * and the addresses of the Chipmunk functions it calls are handed to configure() once,
 * computed by kelab/sim/physics/_chipmunk.py from its cffi mirror structs and pymunk's own
 * cffi library: the layouts are declared in one place, checked there against pymunk.
 *
 * Optional: setup.py builds it where a C compiler is; without it (or with
 * KELAB_NO_NATIVE=1) pymunk.batch and Chipmunk's remove and add calls do the same work,
 * to the same bits, slower.
 */
#include "_native.h"

Py_ssize_t off[N_OFFSETS];
void *fn[N_FUNCTIONS];
uintptr_t state_cached;
static int configured = 0;
uintptr_t hash_coef, state_invalidated;

/* The checks every entry point starts with: configured, then its buffers' sizes. */
int
require_configured(const char *name)
{
    if (configured) return 1;
    PyErr_Format(PyExc_RuntimeError, "%s: call configure() first", name);
    return 0;
}

PyObject *
refuse(Py_buffer **held, int n, const char *message)
{
    for (int i = 0; i < n; i++) PyBuffer_Release(held[i]);
    PyErr_SetString(PyExc_ValueError, message);
    return NULL;
}

/* ------------------------------------------------------------------ configure */

static PyObject *
configure(PyObject *self, PyObject *args)
{
    Py_buffer offs, fns;
    unsigned long long coef, cached, invalid;
    if (!PyArg_ParseTuple(args, "y*y*KKK", &offs, &fns, &coef, &cached, &invalid))
        return NULL;
    int ok = offs.len == (Py_ssize_t)(N_OFFSETS * sizeof(int64_t))
             && fns.len == (Py_ssize_t)(N_FUNCTIONS * sizeof(uint64_t)) && coef != 0;
    /* checked whole before anything is taken: a refused call leaves the last layout */
    for (int i = 0; ok && i < N_OFFSETS; i++) {
        int64_t o = ((const int64_t *)offs.buf)[i];
        ok = o >= 0 && o <= 4096;
    }
    for (int i = 0; ok && i < N_FUNCTIONS; i++) ok = ((const uint64_t *)fns.buf)[i] != 0;
    if (ok) {
        for (int i = 0; i < N_OFFSETS; i++) off[i] = (Py_ssize_t)((const int64_t *)offs.buf)[i];
        for (int i = 0; i < N_FUNCTIONS; i++)
            fn[i] = (void *)(uintptr_t)((const uint64_t *)fns.buf)[i];
        hash_coef = (uintptr_t)coef;
        state_cached = (uintptr_t)cached;
        state_invalidated = (uintptr_t)invalid;
    }
    PyBuffer_Release(&offs);
    PyBuffer_Release(&fns);
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "configure: offsets must be %d int64 in [0, 4096] and functions %d "
                     "non-null addresses, the hash coefficient non-zero; rebuild kelab's "
                     "_native extension with this kelab",
                     N_OFFSETS, N_FUNCTIONS);
        return NULL;
    }
    configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ body states */

PyDoc_STRVAR(write_bodies_doc,
"write_bodies(bodies, states)\n\n"
"Per body (uint64 ``cpBody *``), in order: angle, position (x, y), velocity (vx, vy),\n"
"angular velocity from ``states`` (float64, 6 per body): Chipmunk's setters.");

static PyObject *
write_bodies(PyObject *self, PyObject *args)
{
    Py_buffer bodies, states;
    if (!require_configured("write_bodies")) return NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &bodies, &states)) return NULL;
    Py_ssize_t m = bodies.len / 8;
    if (bodies.len % 8 || states.len != m * 48) {
        Py_buffer *held[] = {&bodies, &states};
        return refuse(held, 2, "write_bodies: states must hold 6 float64 per body pointer");
    }
    const uint64_t *b = bodies.buf;
    const double *s = states.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        void *body = (void *)(uintptr_t)b[i];
        const double *v = s + 6 * i;
        Vect at = {v[1], v[2]}, vel = {v[3], v[4]};
        ((set_float_f)fn[F_BODY_SET_ANGLE])(body, v[0]);
        ((set_vect_f)fn[F_BODY_SET_POSITION])(body, at);
        ((set_vect_f)fn[F_BODY_SET_VELOCITY])(body, vel);
        ((set_float_f)fn[F_BODY_SET_ANGULAR_VELOCITY])(body, v[5]);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bodies);
    PyBuffer_Release(&states);
    Py_RETURN_NONE;
}

/* Bodies b[0..m) into rows r[i] of o (6 float64 a row), x minus org[i]; whether every
 * value written is within [-bound, bound] (0 for NaN). No Python: runs without the GIL. */
int
read_loop(const uint64_t *b, Py_ssize_t m, double *o, const int64_t *r, const double *org,
          double bound)
{
    int within = 1;
    for (Py_ssize_t i = 0; i < m; i++) {
        void *body = (void *)(uintptr_t)b[i];
        double *v = o + 6 * r[i];
        /* the getters' own arithmetic on the fields they read (cpBodyGetPosition is
         * cpTransformPoint(transform, cpvzero); the others return a field): the same
         * bits, without four calls per body */
        const double *t = &AT(body, O_BODY_TRANSFORM, double); /* a, b, c, d, tx, ty */
        const Vect vel = AT(body, O_BODY_V, Vect);
        v[0] = (t[0] * 0.0 + t[2] * 0.0 + t[4]) - org[i];
        v[1] = t[1] * 0.0 + t[3] * 0.0 + t[5];
        v[2] = AT(body, O_BODY_A, double);
        v[3] = vel.x;
        v[4] = vel.y;
        v[5] = AT(body, O_BODY_W, double);
        for (int j = 0; j < 6; j++) within &= -bound <= v[j] && v[j] <= bound;
    }
    return within;
}

/* A shard's forces written, in its order (see write_forces): body i's three at row i of
 * f, or with ``r`` at row r[i]. */
void
force_loop(const uint64_t *b, Py_ssize_t m, const double *f, const int64_t *r, int direct)
{
    for (Py_ssize_t i = 0; i < m; i++) {
        void *body = (void *)(uintptr_t)b[i];
        const double *fi = f + 3 * (r ? r[i] : i);
        Vect force = {fi[0], fi[1]};
        if (direct) {
            AT(body, O_BODY_F, Vect) = force;
            AT(body, O_BODY_T, double) = fi[2];
        } else {
            ((set_vect_f)fn[F_BODY_SET_FORCE])(body, force);
            ((set_float_f)fn[F_BODY_SET_TORQUE])(body, fi[2]);
        }
    }
}

PyDoc_STRVAR(read_rows_doc,
"read_rows(bodies, out, rows, origins)\n\n"
"Per body (uint64 ``cpBody *``), into row ``rows[i]`` of ``out`` (float64, 6 per row):\n"
"position x minus ``origins[i]``, position y, angle, velocity (vx, vy), angular\n"
"velocity: what Chipmunk's getters return (and a ``pymunk.batch`` read of those fields\n"
"gives, in its order), then the subtraction.");

static PyObject *
read_rows(PyObject *self, PyObject *args)
{
    Py_buffer bodies, out, rows, origins;
    if (!require_configured("read_rows")) return NULL;
    if (!PyArg_ParseTuple(args, "y*w*y*y*", &bodies, &out, &rows, &origins)) return NULL;
    Py_ssize_t m = bodies.len / 8, nrows = out.len / 48;
    const int64_t *r = rows.buf;
    int ok = bodies.len % 8 == 0 && out.len % 48 == 0 && rows.len == m * 8
             && origins.len == m * 8;
    for (Py_ssize_t i = 0; ok && i < m; i++) ok = r[i] >= 0 && r[i] < nrows;
    if (!ok) {
        Py_buffer *held[] = {&bodies, &out, &rows, &origins};
        return refuse(held, 4,
                      "read_rows: rows and origins must hold one int64 / float64 per body "
                      "pointer, each row within out (6 float64 a row)");
    }
    const uint64_t *b = bodies.buf;
    const double *org = origins.buf;
    double *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    read_loop(b, m, o, r, org, INFINITY);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bodies);
    PyBuffer_Release(&out);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&origins);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(write_forces_doc,
"write_forces(bodies, forces, direct)\n\n"
"Per body (uint64 ``cpBody *``): ``cpBodySetForce`` then ``cpBodySetTorque`` with its\n"
"three float64 of ``forces`` (fx, fy, torque): what a ``pymunk.batch`` write of those\n"
"fields calls per body. ``direct``: write the two fields only, for a space that never\n"
"sleeps (there the setters' wake-up of the body writes an idle time that is 0 already).");

static PyObject *
write_forces(PyObject *self, PyObject *args)
{
    Py_buffer bodies, forces;
    int direct;
    if (!require_configured("write_forces")) return NULL;
    if (!PyArg_ParseTuple(args, "y*y*p", &bodies, &forces, &direct)) return NULL;
    Py_ssize_t m = bodies.len / 8;
    if (bodies.len % 8 || forces.len < m * 24) {
        Py_buffer *held[] = {&bodies, &forces};
        return refuse(held, 2, "write_forces: forces must hold 3 float64 per body pointer");
    }
    const uint64_t *b = bodies.buf;
    const double *f = forces.buf;
    Py_BEGIN_ALLOW_THREADS
    force_loop(b, m, f, NULL, direct);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bodies);
    PyBuffer_Release(&forces);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ joint state */

/* Per row ``at[n]`` (or n) of body states ``raw`` (``nb`` bodies of 6 float64) and per
 * joint j: column cols[j] of that row of pos and vel (``nj`` a row) gets ``(a[child] -
 * a[parent]) - rel`` and ``w[child] - w[parent]`` (a parent < 0: 0.0), the numpy formulas'
 * operations in their order. The tables are checked by the caller. No Python: runs
 * without the GIL (joint_revs, and a Stepper's run for its copies' rows). */
int
joint_tables_fit(const Py_buffer *cols, const Py_buffer *child, const Py_buffer *parent,
                 const Py_buffer *rel, Py_ssize_t nj, Py_ssize_t nb)
{
    Py_ssize_t k = cols->len / 8;
    const int64_t *c = cols->buf, *ch = child->buf, *pa = parent->buf;
    int ok = cols->len % 8 == 0 && child->len == cols->len && parent->len == cols->len
             && rel->len == cols->len;
    for (Py_ssize_t j = 0; ok && j < k; j++)
        ok = c[j] >= 0 && c[j] < nj && ch[j] >= 0 && ch[j] < nb && pa[j] >= -1 && pa[j] < nb;
    return ok;
}

void
rev_loop(const double *raw, Py_ssize_t nb, double *pos, double *vel, Py_ssize_t nj,
         Py_ssize_t k, const int64_t *cols, const int64_t *child, const int64_t *parent,
         const double *rel, const int64_t *at, Py_ssize_t count)
{
    for (Py_ssize_t n = 0; n < count; n++) {
        Py_ssize_t i = at ? at[n] : n;
        const double *b = raw + i * nb * 6;
        for (Py_ssize_t j = 0; j < k; j++) {
            const double *cb = b + 6 * child[j];
            double ap = 0.0, wp = 0.0;
            if (parent[j] >= 0) {
                ap = b[6 * parent[j] + 2];
                wp = b[6 * parent[j] + 5];
            }
            pos[i * nj + cols[j]] = (cb[2] - ap) - rel[j];
            vel[i * nj + cols[j]] = cb[5] - wp;
        }
    }
}

PyDoc_STRVAR(joint_revs_doc,
"joint_revs(raw, nb, pos, vel, nj, cols, child, parent, rel, rows=None)\n\n"
"The revolute and fixed joints' state (kelab/sim/kinematics.py, joint_state): per row of\n"
"body states ``raw`` (float64, ``nb`` bodies of 6 a row) and per joint ``j``, column\n"
"``cols[j]`` of ``pos`` and ``vel`` (float64, ``nj`` a row) gets ``(a[child] - a[parent])\n"
"- rel`` and ``w[child] - w[parent]`` (a parent < 0: 0.0), the numpy formulas' operations\n"
"in their order; with ``rows`` (int64), only those rows. Keeps the GIL (a few\n"
"microseconds).");

static PyObject *
joint_revs(PyObject *self, PyObject *args)
{
    Py_buffer raw, pos, vel, cols, child, parent, rel, rows = {0};
    Py_ssize_t nb, nj;
    if (!PyArg_ParseTuple(args, "y*nw*w*ny*y*y*y*|y*", &raw, &nb, &pos, &vel, &nj, &cols,
                          &child, &parent, &rel, &rows))
        return NULL;
    Py_ssize_t k = cols.len / 8, m = nj > 0 ? pos.len / (8 * nj) : 0;
    const int64_t *at = rows.obj ? rows.buf : NULL;
    Py_ssize_t count = at ? rows.len / 8 : m;
    int ok = nb > 0 && nj > 0 && pos.len == m * nj * 8 && vel.len == pos.len
             && raw.len == m * nb * 48 && (!at || rows.len % 8 == 0)
             && joint_tables_fit(&cols, &child, &parent, &rel, nj, nb);
    for (Py_ssize_t i = 0; ok && at && i < count; i++) ok = at[i] >= 0 && at[i] < m;
    if (!ok) {
        Py_buffer *held[] = {&raw, &pos, &vel, &cols, &child, &parent, &rel, &rows};
        return refuse(held, at ? 8 : 7,
                      "joint_revs: pos and vel must hold nj float64 a row and raw nb * 6 a row "
                      "for as many rows, the joint tables one entry per joint within them, "
                      "rows (if given) int64 rows of them");
    }
    rev_loop(raw.buf, nb, pos.buf, vel.buf, nj, k, cols.buf, child.buf, parent.buf, rel.buf, at,
             count);
    PyBuffer_Release(&raw);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&vel);
    PyBuffer_Release(&cols);
    PyBuffer_Release(&child);
    PyBuffer_Release(&parent);
    PyBuffer_Release(&rel);
    if (at) PyBuffer_Release(&rows);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ actuator forces */

PyDoc_STRVAR(term_forces_doc,
"term_forces(effort, nj, out, width, slots, joints, coefs)\n\n"
"The actuators' constant force terms (kelab/sim/_controls.py, Controls.forces): per row of\n"
"``effort`` (float64, ``nj`` a row) and per term ``t`` in order, ``out[slots[t]] +=\n"
"effort[joints[t]] * coefs[t]`` in that row of ``out`` (float64, ``width`` a row): the\n"
"numpy layers' product then sum, in their order (a slot's terms in layer order). Keeps the\n"
"GIL (a few microseconds).");

static PyObject *
term_forces(PyObject *self, PyObject *args)
{
    Py_buffer effort, out, slots, joints, coefs;
    Py_ssize_t nj, width;
    if (!PyArg_ParseTuple(args, "y*nw*ny*y*y*", &effort, &nj, &out, &width, &slots, &joints,
                          &coefs))
        return NULL;
    Py_ssize_t k = slots.len / 8, m = nj > 0 ? effort.len / (8 * nj) : 0;
    const int64_t *sl = slots.buf, *jt = joints.buf;
    int ok = nj > 0 && width > 0 && effort.len == m * nj * 8 && out.len == m * width * 8
             && slots.len % 8 == 0 && joints.len == slots.len && coefs.len == slots.len;
    for (Py_ssize_t t = 0; ok && t < k; t++)
        ok = sl[t] >= 0 && sl[t] < width && jt[t] >= 0 && jt[t] < nj;
    if (!ok) {
        Py_buffer *held[] = {&effort, &out, &slots, &joints, &coefs};
        return refuse(held, 5,
                      "term_forces: effort must hold nj float64 a row and out width a row for "
                      "as many rows, the term tables one entry per term within them");
    }
    const double *e = effort.buf, *cf = coefs.buf;
    double *o = out.buf;
    for (Py_ssize_t i = 0; i < m; i++) {
        const double *er = e + i * nj;
        double *orow = o + i * width;
        for (Py_ssize_t t = 0; t < k; t++) {
            double term = er[jt[t]] * cf[t]; /* rounded, then added: -ffp-contract=off */
            orow[sl[t]] = orow[sl[t]] + term;
        }
    }
    PyBuffer_Release(&effort);
    PyBuffer_Release(&out);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&joints);
    PyBuffer_Release(&coefs);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(offsets, functions, hash_coef, state_cached, state_invalidated)"},
    {"reset", reset, METH_VARARGS, reset_doc},
    {"reset_rows", reset_rows, METH_VARARGS, reset_rows_doc},
    {"write_bodies", write_bodies, METH_VARARGS, write_bodies_doc},
    {"read_rows", read_rows, METH_VARARGS, read_rows_doc},
    {"write_forces", write_forces, METH_VARARGS, write_forces_doc},
    {"joint_revs", joint_revs, METH_VARARGS, joint_revs_doc},
    {"term_forces", term_forces, METH_VARARGS, term_forces_doc},
    {"write_shapes", write_shapes, METH_VARARGS, write_shapes_doc},
    {"write_rows", write_rows, METH_VARARGS, write_rows_doc},
    {"write_velocities", write_velocities, METH_VARARGS, write_velocities_doc},
    {"within", within, METH_VARARGS, within_doc},
    {"uniform_rows", uniform_rows, METH_VARARGS, uniform_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "KELab's C helper: packed resets, body reads and writes, per-copy parameters, the "
    "friction model, per-copy uniform draws (kelab/sim/physics/_native.c).",
    -1, methods, NULL, NULL, NULL, NULL,
};

/* The tables' format and the entry points: _chipmunk.NATIVE_ABI must equal it (a stale build
 * is not used). */
#define NATIVE_ABI 14

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&FrictionType) < 0 || PyType_Ready(&StepperType) < 0
        || PyType_Ready(&GangType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&FrictionType);
    if (PyModule_AddIntConstant(m, "ABI", NATIVE_ABI) < 0
        || PyModule_AddObject(m, "Friction", (PyObject *)&FrictionType) < 0) {
        Py_DECREF(&FrictionType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&StepperType);
    if (PyModule_AddObject(m, "Stepper", (PyObject *)&StepperType) < 0) {
        Py_DECREF(&StepperType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&GangType);
    if (PyModule_AddObject(m, "Gang", (PyObject *)&GangType) < 0) {
        Py_DECREF(&GangType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
