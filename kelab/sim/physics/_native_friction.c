/* The friction model of both layouts without Python per contact, part of KELab's C helper
 * (kelab/sim/physics/_native.c; kelab/sim/physics/_friction.py says what and why): a
 * pre-solve function for the contacts the shapes' values cannot express, and the per-step
 * choice of static or dynamic friction of the bodies touching the main static material.
 */
#include "_native.h"

/* The coefficient table's columns (kelab/sim/physics/_friction.py, COLUMNS): per body
 * row, sqrt(static friction), sqrt(dynamic friction), restitution (a pair of materials:
 * the pre-solve rule), then the shapes' friction while sticking and while sliding against
 * the main static material (the regime rule). */
enum { C_STATIC, C_DYNAMIC, C_RESTITUTION, C_STICK, C_SLIDE, N_COLUMNS };

typedef struct {
    PyObject_HEAD
    Py_buffer bufs[9];   /* held: the arrays below stay alive and in place */
    int held;            /* how many of bufs are held */
    const uint64_t *keys;  /* sorted cpBody * of the spaces this object serves */
    const int64_t *rows;   /* per key: its body row */
    Py_ssize_t nkeys;
    const double *coef;    /* N_COLUMNS per row: (copies + 1) * nb rows */
    Py_ssize_t ncoef;      /* rows of coef */
    const int64_t *codes;  /* per body: 1 its regime is chosen, 2 main static, else 0 */
    const double *cog;     /* per body: its centre of gravity in the body frame */
    const double *origins; /* per copy: x of its origin in its space */
    uint8_t *stick;        /* per copy row: 1 sticking, 0 sliding (the World's array) */
    const int64_t *starts; /* per copy row: its shapes are shapes[starts[r]:starts[r+1]] */
    const uint64_t *shapes;
    Py_ssize_t nb, ncopies;
    int has_cog;
    double static_speed, slide_speed, static_speed2;
    double *speed;         /* per copy row: the step's largest sliding speed, -1: none */
    /* made from the tables above (the lookups of a step: measured, a binary search over
     * a shard's 1,537 bodies per side of each arbiter cost ~10 % of a 256-copy stack's
     * step; a hash table and walking the friction bodies' own arbiter lists, far less) */
    uint64_t *hkeys;       /* open addressing: the keys, 0 where empty */
    int64_t *hrows;
    uint64_t hmask;
    int hshift;
    uint64_t *row_body;    /* per copy row: its cpBody *, 0 where none */
    uint64_t *mains;       /* the bodies of the main static material, ascending */
    Py_ssize_t nmains;
} Friction;

static uint64_t
slot_of(const Friction *m, uint64_t key)
{
    return ((key >> 4) * 0x9E3779B97F4A7C15ull) >> m->hshift;
}

/* The body row of a cpBody *, -1 where it is not one of this object's. */
static int64_t
row_of(const Friction *m, const void *body)
{
    uint64_t key = (uint64_t)(uintptr_t)body;
    for (uint64_t i = slot_of(m, key);; i = (i + 1) & m->hmask) {
        if (m->hkeys[i] == key) return m->hrows[i];
        if (m->hkeys[i] == 0) return -1;
    }
}

/* Whether a cpBody * is of the main static material. */
static int
is_main(const Friction *m, const void *body)
{
    uint64_t key = (uint64_t)(uintptr_t)body;
    Py_ssize_t lo = 0, hi = m->nmains;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (m->mains[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->nmains && m->mains[lo] == key;
}

/* cpArbiterGetCount: no contacts once the arbiter is cached (or invalidated). */
static int
contact_count(const void *arb)
{
    return (uintptr_t)AT(arb, O_ARB_STATE, int) < state_cached ? AT(arb, O_ARB_COUNT, int) : 0;
}

/* contacts[i] of an arbiter */
static const char *
contact(const void *arb, int i)
{
    return (const char *)PTR(arb, O_ARB_CONTACTS) + (Py_ssize_t)i * off[O_CONTACT_SIZE];
}

/* cpBodyGetVelocityAtWorldPoint, its arithmetic in its order. */
static Vect
velocity_at(const void *body, Vect p)
{
    const double *t = &AT(body, O_BODY_TRANSFORM, double); /* a, b, c, d, tx, ty */
    const Vect cog = AT(body, O_BODY_COG, Vect), v = AT(body, O_BODY_V, Vect);
    const double w = AT(body, O_BODY_W, double);
    const Vect c = {t[0] * cog.x + t[2] * cog.y + t[4], t[1] * cog.x + t[3] * cog.y + t[5]};
    const Vect r = {p.x - c.x, p.y - c.y};
    const Vect out = {v.x + (-r.y) * w, v.y + r.x * w};
    return out;
}

/* The pre-solve rule of a contact the shapes' values cannot express (two moving shapes,
 * or a moving shape and a static one of another material), set on its arbiter: the
 * static combination while the relative tangential speed at the first contact point is
 * below the threshold, else the dynamic one; restitution the larger. The arithmetic of
 * _compile.pre_solve on what pymunk hands it (the contact point set, the bodies'
 * velocities at a point, the normal), in its order: the same bits. Chipmunk calls it
 * inside cpSpaceStep (no GIL), with the arbiter's shapes in the handler's order. */
static void
presolve(void *arb, void *space, void *data)
{
    const Friction *m = data;
    int swapped = AT(arb, O_ARB_SWAPPED, unsigned char) != 0;
    void *body_a = PTR(arb, O_ARB_BODY_A), *body_b = PTR(arb, O_ARB_BODY_B);
    void *ba = swapped ? body_b : body_a, *bb = swapped ? body_a : body_b;
    int64_t ra = row_of(m, ba), rb = row_of(m, bb);
    (void)space;
    if (ra < 0 || rb < 0) return; /* a shape without a material: left as Chipmunk made it */
    int sliding = 1;
    if (contact_count(arb) > 0) {
        const char *con = contact(arb, 0);
        const Vect r1 = AT(con, O_CONTACT_R1, Vect), r2 = AT(con, O_CONTACT_R2, Vect);
        const Vect pa = AT(body_a, O_BODY_P, Vect), pb = AT(body_b, O_BODY_P, Vect);
        const Vect p1 = {pa.x + r1.x, pa.y + r1.y}, p2 = {pb.x + r2.x, pb.y + r2.y};
        const Vect p = swapped ? p2 : p1; /* the set's point A */
        const Vect va = velocity_at(ba, p), vb = velocity_at(bb, p);
        Vect n = AT(arb, O_ARB_N, Vect);
        if (swapped) {
            n.x = n.x * -1.0;
            n.y = n.y * -1.0;
        }
        const double rx = vb.x - va.x, ry = vb.y - va.y;
        const double vn = rx * n.x + ry * n.y;
        const double tx = rx - vn * n.x, ty = ry - vn * n.y;
        sliding = tx * tx + ty * ty >= m->static_speed2;
    }
    const double *ca = m->coef + ra * N_COLUMNS, *cb = m->coef + rb * N_COLUMNS;
    AT(arb, O_ARB_U, double) =
        sliding ? ca[C_DYNAMIC] * cb[C_DYNAMIC] : ca[C_STATIC] * cb[C_STATIC];
    /* Python's max(a, b): a unless b is larger */
    AT(arb, O_ARB_E, double) = cb[C_RESTITUTION] > ca[C_RESTITUTION] ? cb[C_RESTITUTION]
                                                                      : ca[C_RESTITUTION];
}

/* numpy's maximum: NaN wins */
static double
np_maximum(double a, double b)
{
    if (a != a) return a;
    if (b != b) return b;
    return a >= b ? a : b;
}

/* An arbiter of the last step between the body of copy row ``row`` (its regime chosen)
 * and the main static material: the body's largest tangential speed at its contact
 * points. What _contacts.update_friction computes from pymunk.batch's arbiter read (the
 * points on shape A, the normal of the shapes' order, the count) and the body states the
 * World reads (x through its copy frame and back), in numpy's order of operations. */
static void
contribute(Friction *m, void *arb, int64_t row, void *body)
{
    void *body_a = PTR(arb, O_ARB_BODY_A);
    const int count = contact_count(arb);
    const int swapped = AT(arb, O_ARB_SWAPPED, unsigned char) != 0;
    Vect n = AT(arb, O_ARB_N, Vect);
    const double sign = swapped ? -1.0 : 1.0; /* cpArbiterGetNormal */
    n.x = n.x * sign;
    n.y = n.y * sign;
    Vect pts[2] = {{0.0, 0.0}, {0.0, 0.0}};
    const Vect pa = AT(body_a, O_BODY_P, Vect); /* cpArbiterGetPointA: body A's side */
    for (int i = 0; i < 2; i++) {
        if (i < count && (i == 0 || count == 2)) {
            const Vect r1 = AT(contact(arb, i), O_CONTACT_R1, Vect);
            pts[i].x = pa.x + r1.x;
            pts[i].y = pa.y + r1.y;
        }
    }
    const double *t = &AT(body, O_BODY_TRANSFORM, double);
    const double org = m->origins[row / m->nb];
    const double x = ((t[0] * 0.0 + t[2] * 0.0 + t[4]) - org) + org;
    const double y = t[1] * 0.0 + t[3] * 0.0 + t[5];
    double cx = x, cy = y;
    if (m->has_cog) {
        const double angle = AT(body, O_BODY_A, double);
        const double c = cos(angle), s = sin(angle);
        const double *g = m->cog + 2 * (row % m->nb);
        cx = x + c * g[0] - s * g[1];
        cy = y + s * g[0] + c * g[1];
    }
    const Vect v = AT(body, O_BODY_V, Vect);
    const double w = AT(body, O_BODY_W, double);
    double sp[2];
    for (int i = 0; i < 2; i++) {
        const double rx = pts[i].x - cx, ry = pts[i].y - cy;
        const double vx = v.x - w * ry, vy = v.y + w * rx;
        sp[i] = fabs(vx * n.y - vy * n.x);
    }
    const double best = count > 1 ? np_maximum(sp[0], sp[1]) : sp[0];
    m->speed[row] = np_maximum(m->speed[row], best);
}

/* One cached arbiter (cpSpaceEachCachedArbiter): where it joins a body whose regime is
 * chosen and the main static material, its contribution. */
static void
visit(void *arb, void *data)
{
    Friction *m = data;
    void *body_a = PTR(arb, O_ARB_BODY_A), *body_b = PTR(arb, O_ARB_BODY_B);
    int64_t ra = row_of(m, body_a), rb = row_of(m, body_b);
    if (ra < 0 || rb < 0) return;
    int64_t ca = m->codes[ra % m->nb], cb = m->codes[rb % m->nb];
    if (ca == 1 && cb == 2 && ra < m->ncopies * m->nb) contribute(m, arb, ra, body_a);
    else if (ca == 2 && cb == 1 && rb < m->ncopies * m->nb) contribute(m, arb, rb, body_b);
}

/* Whether every cached arbiter of a space is one its last step processed: then they are
 * exactly the arbiters on the bodies' arbiter lists (Chipmunk threads those; an ignored
 * pair, e.g. a kinematic body on the ground, is cached unthreaded). */
static int
all_threaded(void *space)
{
    return (Py_ssize_t)AT(PTR(space, O_SPACE_CACHED), O_SET_ENTRIES, unsigned int)
           == AT(PTR(space, O_SPACE_ARBITERS), O_ARRAY_NUM, int);
}

/* The contributions of the copies' bodies' own arbiter lists (the same arbiters as the
 * cached ones where all_threaded: each once per body, and the maximum does not depend on
 * the order). */
static void
walk(Friction *m, const int64_t *copies, Py_ssize_t nc)
{
    const Py_ssize_t nb = m->nb;
    for (Py_ssize_t k = 0; k < nc; k++) {
        for (Py_ssize_t b = 0; b < nb; b++) {
            if (m->codes[b] != 1) continue;
            const int64_t r = copies[k] * nb + b;
            void *body = (void *)(uintptr_t)m->row_body[r];
            if (!body) continue;
            void *arb = PTR(body, O_BODY_ARBITER_LIST);
            while (arb) {
                void *a = PTR(arb, O_ARB_BODY_A);
                void *other = a == body ? PTR(arb, O_ARB_BODY_B) : a;
                if (is_main(m, other)) contribute(m, arb, r, body);
                arb = a == body ? PTR(arb, O_ARB_A_NEXT) : PTR(arb, O_ARB_B_NEXT);
            }
        }
    }
}

/* The copies' bodies whose regime is chosen stick or slide for the next step (the
 * hysteresis of _contacts.update_friction); the shapes of those that change get their new
 * friction with Chipmunk's setter. Every row of the copies is left at speed -1. */
static void
decide(Friction *m, const int64_t *copies, Py_ssize_t nc)
{
    const Py_ssize_t nb = m->nb;
    for (Py_ssize_t k = 0; k < nc; k++) {
        for (Py_ssize_t b = 0; b < nb; b++) {
            if (m->codes[b] != 1) continue;
            const Py_ssize_t r = copies[k] * nb + b;
            const double sp = m->speed[r];
            const int was = m->stick[r] != 0;
            m->speed[r] = -1.0;
            if (!(sp >= 0.0) && was) continue; /* unseen and sticking: sticks on */
            int now = was ? sp <= m->slide_speed : sp < m->static_speed;
            now |= sp < 0.0;
            if (now == was) continue;
            m->stick[r] = (uint8_t)now;
            const double value = m->coef[r * N_COLUMNS + (now ? C_STICK : C_SLIDE)];
            for (int64_t j = m->starts[r]; j < m->starts[r + 1]; j++)
                ((set_float_f)fn[F_SHAPE_SET_FRICTION])((void *)(uintptr_t)m->shapes[j], value);
        }
    }
}

/* The regime rule after a step of the spaces ``s`` (no Python: called without the GIL). */
static void
regimes(Friction *m, const uint64_t *s, Py_ssize_t ns, const int64_t *c, Py_ssize_t nc)
{
    int threaded = 1;
    for (Py_ssize_t i = 0; threaded && i < ns; i++) threaded = all_threaded((void *)(uintptr_t)s[i]);
    if (threaded) {
        walk(m, c, nc);
    } else {
        for (Py_ssize_t i = 0; i < ns; i++)
            ((each_arbiter_f)fn[F_SPACE_EACH_CACHED_ARBITER])((void *)(uintptr_t)s[i], visit, m);
    }
    decide(m, c, nc);
}

void
friction_regimes(PyObject *friction, uint64_t space, const int64_t *copies, Py_ssize_t nc)
{
    regimes((Friction *)friction, &space, 1, copies, nc);
}

int
friction_has_copies(PyObject *friction, const int64_t *copies, Py_ssize_t nc)
{
    const Friction *m = (const Friction *)friction;
    for (Py_ssize_t i = 0; i < nc; i++)
        if (copies[i] < 0 || copies[i] >= m->ncopies) return 0;
    return 1;
}

PyDoc_STRVAR(update_doc,
"update(spaces, copies)\n\n"
"After a step of the spaces (uint64 ``cpSpace *``), choose the regime of the bodies of\n"
"``copies`` (int64; every copy of those spaces that stepped) from the spaces' cached\n"
"arbiters; the GIL released.");

static PyObject *
friction_update(Friction *m, PyObject *args)
{
    Py_buffer spaces, copies;
    if (!require_configured("Friction.update")) return NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &spaces, &copies)) return NULL;
    Py_ssize_t ns = spaces.len / 8, nc = copies.len / 8;
    const int64_t *c = copies.buf;
    int ok = spaces.len % 8 == 0 && copies.len % 8 == 0;
    for (Py_ssize_t i = 0; ok && i < nc; i++) ok = c[i] >= 0 && c[i] < m->ncopies;
    if (!ok) {
        Py_buffer *held[] = {&spaces, &copies};
        return refuse(held, 2,
                      "Friction.update: spaces must be uint64 pointers and copies int64 "
                      "copy indices below the table's copies");
    }
    const uint64_t *s = spaces.buf;
    Py_BEGIN_ALLOW_THREADS
    regimes(m, s, ns, c, nc);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&spaces);
    PyBuffer_Release(&copies);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(handler_doc,
"handler() -> (function, data)\n\n"
"The addresses of the pre-solve function and of its data (this object's tables): a\n"
"collision handler's preSolveFunc and userData. Keep this object alive while a space\n"
"with that handler can step.");

static PyObject *
friction_handler(Friction *m, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)&presolve,
                         (unsigned long long)(uintptr_t)m);
}

static void
friction_dealloc(Friction *m)
{
    for (int i = 0; i < m->held; i++) PyBuffer_Release(&m->bufs[i]);
    free(m->speed);
    free(m->hkeys);
    free(m->hrows);
    free(m->row_body);
    free(m->mains);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

PyDoc_STRVAR(friction_doc,
"Friction(keys, rows, coef, codes, cog, origins, stick, starts, shapes, static_speed,\n"
"         slide_speed, static_speed2, has_cog)\n\n"
"The friction model's tables for the spaces of some copies (kelab/sim/physics/\n"
"_friction.py builds them): keys (uint64, ascending) the cpBody * of those spaces and\n"
"rows (int64) their body rows; coef (float64, 5 columns per row, (copies + 1) * nb rows);\n"
"codes (int64 per body), cog (2 float64 per body), origins (float64 per copy), stick\n"
"(uint8 per copy row, written), starts (int64, copy rows + 1) and shapes (uint64): the\n"
"shapes of each copy row. Held (not copied): the arrays must keep their memory.");

static PyObject *
friction_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Friction takes positional arguments only");
        return NULL;
    }
    Friction *m = (Friction *)type->tp_alloc(type, 0);
    if (!m) return NULL;
    Py_buffer *b = m->bufs;
    int has_cog;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*y*y*dddp", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &m->static_speed, &m->slide_speed,
                          &m->static_speed2, &has_cog)) {
        Py_DECREF(m); /* PyArg_ParseTuple released the buffers it had taken */
        return NULL;
    }
    m->held = 9;
    m->has_cog = has_cog;
    m->keys = b[0].buf;
    m->rows = b[1].buf;
    m->nkeys = b[0].len / 8;
    m->coef = b[2].buf;
    m->ncoef = b[2].len / (8 * N_COLUMNS);
    m->codes = b[3].buf;
    m->nb = b[3].len / 8;
    m->cog = b[4].buf;
    m->origins = b[5].buf;
    m->ncopies = b[5].len / 8;
    m->stick = b[6].buf;
    m->starts = b[7].buf;
    m->shapes = b[8].buf;
    Py_ssize_t nrows = m->ncopies * m->nb, nshapes = b[8].len / 8;
    int ok = m->nb > 0 && b[0].len % 8 == 0 && b[1].len == b[0].len
             && b[2].len == (m->ncopies + 1) * m->nb * N_COLUMNS * 8 && b[3].len % 8 == 0
             && b[4].len == m->nb * 16 && b[5].len % 8 == 0 && b[6].len == nrows
             && b[7].len == (nrows + 1) * 8 && b[8].len % 8 == 0;
    for (Py_ssize_t i = 0; ok && i < m->nkeys; i++)
        ok = m->rows[i] >= 0 && m->rows[i] < m->ncoef && m->keys[i] != 0
             && (i == 0 || m->keys[i] > m->keys[i - 1]);
    for (Py_ssize_t r = 0; ok && r < nrows; r++)
        ok = m->starts[r] >= 0 && m->starts[r] <= m->starts[r + 1];
    ok = ok && (nrows == 0 || m->starts[0] == 0) && m->starts[nrows] == nshapes;
    if (!ok) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_ValueError,
                        "Friction: the tables' sizes disagree (keys ascending, rows within "
                        "coef, starts non-decreasing up to the shapes); build them with "
                        "kelab.sim.physics._friction");
        return NULL;
    }
    /* the lookups: a hash table of at least twice the keys, the rows' bodies, the mains */
    int bits = 3;
    while (((Py_ssize_t)1 << bits) < 2 * m->nkeys) bits++;
    m->hmask = ((uint64_t)1 << bits) - 1;
    m->hshift = 64 - bits;
    m->speed = malloc((nrows ? nrows : 1) * sizeof(double));
    m->hkeys = calloc((size_t)m->hmask + 1, sizeof(uint64_t));
    m->hrows = calloc((size_t)m->hmask + 1, sizeof(int64_t));
    m->row_body = calloc(nrows ? nrows : 1, sizeof(uint64_t));
    m->mains = malloc((m->nkeys ? m->nkeys : 1) * sizeof(uint64_t));
    if (!m->speed || !m->hkeys || !m->hrows || !m->row_body || !m->mains) {
        Py_DECREF(m);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t r = 0; r < nrows; r++) m->speed[r] = -1.0;
    for (Py_ssize_t i = 0; i < m->nkeys; i++) {
        uint64_t key = m->keys[i];
        int64_t row = m->rows[i];
        uint64_t j = slot_of(m, key);
        while (m->hkeys[j]) j = (j + 1) & m->hmask;
        m->hkeys[j] = key;
        m->hrows[j] = row;
        if (row < nrows) m->row_body[row] = key;
        if (m->codes[row % m->nb] == 2) m->mains[m->nmains++] = key; /* keys ascend */
    }
    return (PyObject *)m;
}

static PyMethodDef friction_methods[] = {
    {"update", (PyCFunction)friction_update, METH_VARARGS, update_doc},
    {"handler", (PyCFunction)friction_handler, METH_NOARGS, handler_doc},
    {NULL, NULL, 0, NULL},
};

PyTypeObject FrictionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kelab.sim.physics._native.Friction",
    .tp_basicsize = sizeof(Friction),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = friction_doc,
    .tp_new = friction_new,
    .tp_dealloc = (destructor)friction_dealloc,
    .tp_methods = friction_methods,
};
