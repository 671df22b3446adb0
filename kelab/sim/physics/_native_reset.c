/* The packed layout's reset in place (kelab/sim/physics/_native.c says what the helper
 * is; kelab/sim/physics/_reset.py what the reset does and why): a reset copy's cached
 * arbiters found and dropped as the rebuild's filters would, its constraint block swapped
 * and restored, its bodies and shapes made fresh; then, where asked, its bodies' states
 * written and read back in the same call (a World's set_body_states).
 */
#include "_native.h"

/* ------------------------------------------------------------------ arbiters */

typedef struct {
    void *arb;
    int64_t rank;  /* the first removed shape it touches: copy position * shapes + shape */
    uintptr_t idx; /* its hash set bin chain */
    int64_t pos;   /* its place in that chain */
    int64_t where; /* its index in space->arbiters, -1: not there */
} Found;

static int
by_address(const void *x, const void *y)
{
    const Found *a = x, *b = y;
    if (a->arb != b->arb) return (uintptr_t)a->arb < (uintptr_t)b->arb ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static const Found *order_base;

static int
by_removal(const void *x, const void *y)
{
    const Found *a = order_base + *(const int64_t *)x, *b = order_base + *(const int64_t *)y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static Found *
lookup(Found *found, Py_ssize_t n, void *arb)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if ((uintptr_t)found[mid].arb < (uintptr_t)arb) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && found[lo].arb == arb ? found + lo : NULL;
}

/* Chipmunk's unthreadHelper: take an arbiter out of one body's arbiter list. */
static void
unthread(void *arb, void *body)
{
    int a_side = PTR(arb, O_ARB_BODY_A) == body;
    void *prev = a_side ? PTR(arb, O_ARB_A_PREV) : PTR(arb, O_ARB_B_PREV);
    void *next = a_side ? PTR(arb, O_ARB_A_NEXT) : PTR(arb, O_ARB_B_NEXT);
    if (prev) {
        if (PTR(prev, O_ARB_BODY_A) == body) PTR(prev, O_ARB_A_NEXT) = next;
        else PTR(prev, O_ARB_B_NEXT) = next;
    } else if (PTR(body, O_BODY_ARBITER_LIST) == arb) {
        PTR(body, O_BODY_ARBITER_LIST) = next;
    }
    if (next) {
        if (PTR(next, O_ARB_BODY_A) == body) PTR(next, O_ARB_A_PREV) = prev;
        else PTR(next, O_ARB_B_PREV) = prev;
    }
    if (a_side) PTR(arb, O_ARB_A_PREV) = PTR(arb, O_ARB_A_NEXT) = NULL;
    else PTR(arb, O_ARB_B_PREV) = PTR(arb, O_ARB_B_NEXT) = NULL;
}

/* The cached arbiters of the copies' shapes, in the order the shape removals would drop
 * them. Returns the count (found and order filled, sorted), -1: out of memory, -2: an
 * arbiter on a body's list is not in the cache (nothing changed either way). */
static Py_ssize_t
collect(void *space, const uint64_t *bodies, const int64_t *locals, Py_ssize_t nl,
        Py_ssize_t nb, Found **found_out, int64_t **order_out)
{
    Py_ssize_t cap = 64, n = 0;
    Found *found = malloc(cap * sizeof(Found));
    if (!found) return -1;
    for (Py_ssize_t r = 0; r < nl; r++) {
        const uint64_t *own = bodies + locals[r] * nb;
        for (Py_ssize_t j = 0; j < nb; j++) {
            void *body = (void *)(uintptr_t)own[j];
            void *arb = PTR(body, O_BODY_ARBITER_LIST);
            while (arb) {
                if (n == cap) {
                    Found *more = realloc(found, 2 * cap * sizeof(Found));
                    if (!more) { free(found); return -1; }
                    found = more;
                    cap *= 2;
                }
                found[n].arb = arb;
                found[n].rank = (int64_t)(r * nb + j); /* one shape per body, in body order */
                n++;
                arb = PTR(arb, O_ARB_BODY_A) == body ? PTR(arb, O_ARB_A_NEXT)
                                                     : PTR(arb, O_ARB_B_NEXT);
            }
        }
    }
    /* one entry per arbiter (both its bodies may be reset): its first shape */
    qsort(found, n, sizeof(Found), by_address);
    Py_ssize_t u = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (u == 0 || found[u - 1].arb != found[i].arb) found[u++] = found[i];
    n = u;
    void *set = PTR(space, O_SPACE_CACHED);
    uintptr_t size = AT(set, O_SET_SIZE, unsigned int);
    void **table = PTR(set, O_SET_TABLE);
    for (Py_ssize_t i = 0; i < n; i++) {
        void *arb = found[i].arb;
        uintptr_t a = (uintptr_t)PTR(arb, O_ARB_A), b = (uintptr_t)PTR(arb, O_ARB_B);
        uintptr_t idx = ((a * hash_coef) ^ (b * hash_coef)) % size;
        int64_t pos = 0;
        void *bin = table[idx];
        while (bin && PTR(bin, O_BIN_ELT) != arb) { bin = PTR(bin, O_BIN_NEXT); pos++; }
        if (!bin) { free(found); return -2; }
        found[i].idx = idx;
        found[i].pos = pos;
        found[i].where = -1;
    }
    /* where each is in space->arbiters (those processed in the last step) */
    void *active = PTR(space, O_SPACE_ARBITERS);
    int num = AT(active, O_ARRAY_NUM, int);
    void **arr = PTR(active, O_ARRAY_ARR);
    for (int i = 0; i < num; i++) {
        Found *f = lookup(found, n, arr[i]);
        if (f && f->where < 0) f->where = i;
    }
    int64_t *order = malloc((n ? n : 1) * sizeof(int64_t));
    if (!order) { free(found); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = i;
    order_base = found; /* the GIL is held: one sort at a time */
    qsort(order, n, sizeof(int64_t), by_removal);
    *found_out = found;
    *order_out = order;
    return n;
}

/* cachedArbitersFilter for each arbiter, in removal order: invalidate, unthread, delete from
 * space->arbiters (the last element fills the hole), push onto the pool, recycle its bin. */
static void
drop(void *space, Found *found, const int64_t *order, Py_ssize_t n)
{
    void *active = PTR(space, O_SPACE_ARBITERS);
    void **arr = PTR(active, O_ARRAY_ARR);
    void *pool = PTR(space, O_SPACE_POOLED);
    void *set = PTR(space, O_SPACE_CACHED);
    void **table = PTR(set, O_SET_TABLE);
    for (Py_ssize_t k = 0; k < n; k++) {
        Found *f = found + order[k];
        void *arb = f->arb;
        if ((uintptr_t)AT(arb, O_ARB_STATE, int) != state_cached)
            AT(arb, O_ARB_STATE, int) = (int)state_invalidated;
        unthread(arb, PTR(arb, O_ARB_BODY_A));
        unthread(arb, PTR(arb, O_ARB_BODY_B));
        if (f->where >= 0) {
            int num = --AT(active, O_ARRAY_NUM, int);
            void *moved = arr[num];
            arr[f->where] = moved;
            arr[num] = NULL;
            Found *m = lookup(found, n, moved);
            if (m && m != f) m->where = f->where;
            f->where = -1;
        }
        ((two_ptr_f)fn[F_ARRAY_PUSH])(pool, arb);
        void **link = &table[f->idx];
        while (PTR(*link, O_BIN_ELT) != arb) link = &PTR(*link, O_BIN_NEXT);
        void *bin = *link;
        *link = PTR(bin, O_BIN_NEXT);
        AT(set, O_SET_ENTRIES, unsigned int) -= 1;
        PTR(bin, O_BIN_NEXT) = PTR(set, O_SET_POOLED);
        PTR(set, O_SET_POOLED) = bin;
        PTR(bin, O_BIN_ELT) = NULL;
    }
}

/* ------------------------------------------------------------------ the reset */

typedef struct {
    Py_buffer locals, bodies, shapes, pose, cons, block, owner, images, rows, fric;
} Tables;

static void
release(Tables *t)
{
    Py_buffer *all[] = {&t->locals, &t->bodies, &t->shapes, &t->pose, &t->cons,
                        &t->block, &t->owner, &t->images, &t->rows, &t->fric};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]->obj) PyBuffer_Release(all[i]);
}

/* Whether every copy's constraint block is where the tables say (else Python rebuilds). */
static int
ready(void *space, const int64_t *locals, Py_ssize_t nl, Py_ssize_t n, Py_ssize_t k,
      const uint64_t *cons, const int64_t *block)
{
    if (AT(space, O_SPACE_LOCKED, int)) return 0;
    if (AT(PTR(space, O_SPACE_POST_STEP), O_ARRAY_NUM, int)) return 0;
    if (AT(PTR(space, O_SPACE_ROUSED), O_ARRAY_NUM, int)) return 0;
    /* every cached arbiter is one the last step processed (so on its bodies' arbiter
     * lists, where collect() finds them): not so with sensors or ignored pairs, which
     * Chipmunk caches unthreaded; then the rebuild's filters must find them */
    if ((Py_ssize_t)AT(PTR(space, O_SPACE_CACHED), O_SET_ENTRIES, unsigned int)
        != AT(PTR(space, O_SPACE_ARBITERS), O_ARRAY_NUM, int))
        return 0;
    void *carr = PTR(space, O_SPACE_CONSTRAINTS);
    if (AT(carr, O_ARRAY_NUM, int) != n * k) return 0;
    uint64_t *arr = PTR(carr, O_ARRAY_ARR);
    for (Py_ssize_t r = 0; r < nl; r++) {
        int64_t cl = locals[r];
        if (block[cl] < 0 || block[cl] >= n) return 0;
        if (memcmp(arr + block[cl] * k, cons + cl * k, k * sizeof(uint64_t))) return 0;
    }
    return 1;
}

/* A reset's state write and read in the same call (reset's ``then``): per reset copy r
 * (local copy cl = locals[r]), per moving body j (body addrs[cl * m + j]), the setters of
 * write_bodies with angle, x + origins[cl * m + j], y from poses[r, moving[j]] and vx, vy,
 * w from vels[r, moving[j]]; then read_rows of those bodies into rows[cl * m + j] of out.
 * The tables are the shard's (every local copy's); poses and vels the reset copies'. */
typedef struct {
    Py_buffer poses, vels, out, addrs, rows, origins, moving;
    Py_ssize_t m, nall;  /* moving bodies per copy, bodies per copy in poses */
    /* where given, after the read: the copies' rows of ``forces`` zeroed and their joint
     * state computed into pos and vel (nj a row) from their rows of out */
    Py_buffer forces, pos, vel, cols, child, parent, rel;
    Py_ssize_t nj, k;
} Then;

static void
release_then(Then *w)
{
    Py_buffer *all[] = {&w->poses, &w->vels, &w->out, &w->addrs, &w->rows, &w->origins,
                        &w->moving, &w->forces, &w->pos, &w->vel, &w->cols, &w->child,
                        &w->parent, &w->rel};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]->obj) PyBuffer_Release(all[i]);
}

/* 1: parsed and checked for the nl copies ``locals`` of a shard of n; 0: an error is set
 * (nothing held). */
static int
parse_then(PyObject *then, Then *w, const int64_t *locals, Py_ssize_t nl, Py_ssize_t n)
{
    if (!PyTuple_Check(then)) {
        PyErr_SetString(PyExc_TypeError, "reset: then must be a tuple or None");
        return 0;
    }
    PyObject *forces = Py_None, *joints = Py_None;
    if (!PyArg_ParseTuple(then, "y*y*w*y*y*y*y*|OO", &w->poses, &w->vels, &w->out, &w->addrs,
                          &w->rows, &w->origins, &w->moving, &forces, &joints))
        return 0;
    if ((forces != Py_None && PyObject_GetBuffer(forces, &w->forces, PyBUF_WRITABLE) < 0)
        || (joints != Py_None
            && (!PyTuple_Check(joints)
                || !PyArg_ParseTuple(joints, "w*w*y*y*y*y*", &w->pos, &w->vel, &w->cols,
                                     &w->child, &w->parent, &w->rel)))) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "reset: then's joints must be a JointTables (a tuple of 6 arrays) or "
                         "None, got %.100s; pass JointCache.reset_tables()",
                         Py_TYPE(joints)->tp_name);
        release_then(w);
        return 0;
    }
    Py_ssize_t m = w->moving.len / 8, nrows = w->out.len / 48;
    Py_ssize_t nall = nl ? w->poses.len / 24 / nl : 0;
    const int64_t *mv = w->moving.buf, *r = w->rows.buf;
    int ok = w->moving.len % 8 == 0 && w->addrs.len == n * m * 8
             && w->poses.len == nl * nall * 24 && w->vels.len == w->poses.len
             && w->out.len % 48 == 0 && w->rows.len == w->addrs.len
             && w->origins.len == w->addrs.len;
    for (Py_ssize_t j = 0; ok && j < m; j++) ok = mv[j] >= 0 && mv[j] < nall;
    for (Py_ssize_t i = 0; ok && i < nl; i++) {
        ok = locals[i] >= 0 && locals[i] < n;
        for (Py_ssize_t j = 0; ok && j < m; j++)
            ok = r[locals[i] * m + j] >= 0 && r[locals[i] * m + j] < nrows;
    }
    int extra = w->forces.obj || w->pos.obj;
    /* the copy of a reset local copy: its first moving body's row, less that body, over
     * the bodies per copy (every one of its moving bodies at its row of that copy) */
    Py_ssize_t copies = nall && ok ? nrows / nall : 0;
    ok = ok && (!extra || (m > 0 && nall > 0 && nrows % nall == 0));
    for (Py_ssize_t i = 0; ok && extra && i < nl; i++) {
        Py_ssize_t c = (r[locals[i] * m] - mv[0]) / nall;
        for (Py_ssize_t j = 0; ok && j < m; j++) ok = r[locals[i] * m + j] == c * nall + mv[j];
    }
    if (ok && w->forces.obj) ok = w->forces.len == copies * nall * 24;
    if (ok && w->pos.obj) {
        Py_ssize_t k = w->cols.len / 8, nj = copies ? w->pos.len / 8 / copies : 0;
        ok = nj > 0 && w->pos.len == copies * nj * 8 && w->vel.len == w->pos.len
             && joint_tables_fit(&w->cols, &w->child, &w->parent, &w->rel, nj, nall);
        w->nj = nj;
        w->k = k;
    }
    if (!ok) {
        release_then(w);
        PyErr_SetString(PyExc_ValueError,
                        "reset: then's tables disagree (addrs, rows and origins one per moving "
                        "body of every local copy, rows within out, poses and vels (copies, "
                        "bodies, 3), moving within the bodies, forces and joints' pos and "
                        "vel a row per copy of out, the joint tables as joint_revs'); build "
                        "them with kelab.sim.physics._shard");
        return 0;
    }
    w->m = m;
    w->nall = nall;
    return 1;
}

/* The write and the read of a parsed ``then`` (no Python: runs without the GIL). */
static void
write_then_read(const Then *w, const int64_t *locals, Py_ssize_t nl)
{
    const uint64_t *b = w->addrs.buf;
    const int64_t *mv = w->moving.buf, *rows = w->rows.buf;
    const double *poses = w->poses.buf, *vels = w->vels.buf, *org = w->origins.buf;
    Py_ssize_t m = w->m;
    for (Py_ssize_t r = 0; r < nl; r++) {
        Py_ssize_t at = locals[r] * m;
        for (Py_ssize_t j = 0; j < m; j++) {
            void *body = (void *)(uintptr_t)b[at + j];
            const double *p = poses + 3 * (r * w->nall + mv[j]);
            const double *v = vels + 3 * (r * w->nall + mv[j]);
            Vect pos = {p[0] + org[at + j], p[1]}, vel = {v[0], v[1]};
            ((set_float_f)fn[F_BODY_SET_ANGLE])(body, p[2]);
            ((set_vect_f)fn[F_BODY_SET_POSITION])(body, pos);
            ((set_vect_f)fn[F_BODY_SET_VELOCITY])(body, vel);
            ((set_float_f)fn[F_BODY_SET_ANGULAR_VELOCITY])(body, v[2]);
        }
    }
    for (Py_ssize_t r = 0; r < nl; r++) {
        Py_ssize_t at = locals[r] * m;
        read_loop(b + at, m, w->out.buf, rows + at, org + at, INFINITY);
    }
    for (Py_ssize_t r = 0; (w->forces.obj || w->pos.obj) && r < nl; r++) {
        Py_ssize_t c = (rows[locals[r] * m] - mv[0]) / w->nall;
        if (w->forces.obj) memset((double *)w->forces.buf + c * w->nall * 3, 0, w->nall * 24);
        int64_t row = c;
        if (w->pos.obj)
            rev_loop(w->out.buf, w->nall, w->pos.buf, w->vel.buf, w->nj, w->k, w->cols.buf,
                     w->child.buf, w->parent.buf, w->rel.buf, &row, 1);
    }
}

const char reset_doc[] = PyDoc_STR(
"reset(space, locals, place, bodies, shapes, pose, cons, block, owner, images, rows, fric,\n"
"      stride, then=None) -> bool\n\n"
"Make local copies ``locals`` (int64, ascending, distinct) of a packed shard fresh in\n"
"place. False (and nothing changed) where the space is not as the tables say. With\n"
"``then`` (poses, vels, out, addrs, rows, origins, moving), in the same call: each\n"
"copy's moving bodies (``addrs``, the shard's table) get write_bodies' setters with their\n"
"state in ``poses`` and ``vels`` (copies, bodies, 3) at body ``moving[j]``, x plus its\n"
"``origins``, then are read into ``out`` as read_rows does, at ``rows`` (a reset's state\n"
"write, one GIL release). ``then`` may go on with ``forces`` (None or float64, 3 a body\n"
"row of ``out``: each reset copy's rows zeroed) and ``joints`` (None or joint_revs'\n"
"``(pos, vel, cols, child, parent, rel)``: each reset copy's joint state from its rows\n"
"of ``out``, read just before; a copy's rows are those of its bodies, its moving ones\n"
"at ``rows``).");

PyObject *
reset(PyObject *self, PyObject *args)
{
    unsigned long long space_addr, stride;
    int place;
    Tables t;
    memset(&t, 0, sizeof(t));
    if (!require_configured("reset")) return NULL;
    PyObject *then = Py_None;
    Then w;
    memset(&w, 0, sizeof(w));
    if (!PyArg_ParseTuple(args, "Ky*py*y*y*y*w*w*y*y*y*K|O", &space_addr, &t.locals, &place,
                          &t.bodies, &t.shapes, &t.pose, &t.cons, &t.block, &t.owner,
                          &t.images, &t.rows, &t.fric, &stride, &then))
        return NULL;
    if (then != Py_None
        && !parse_then(then, &w, t.locals.buf, t.locals.len / 8, t.block.len / 8)) {
        release(&t);
        return NULL;
    }
    Py_ssize_t n = t.block.len / 8, nl = t.locals.len / 8;
    Py_ssize_t nb = n ? t.bodies.len / 8 / n : 0, k = n ? t.cons.len / 8 / n : 0;
    const int64_t *locals = t.locals.buf, *rows = t.rows.buf;
    const uint64_t *bodies = t.bodies.buf, *shapes = t.shapes.buf, *cons = t.cons.buf;
    const double *pose = t.pose.buf, *fric = t.fric.buf;
    int64_t *block = t.block.buf, *owner = t.owner.buf;
    const char *images = t.images.buf;
    int sizes_ok = t.owner.len == t.block.len && t.bodies.len == n * nb * 8
                   && t.shapes.len == t.bodies.len && t.pose.len == n * nb * 24
                   && t.cons.len == n * k * 8 && t.rows.len == n * k * 40
                   && (t.fric.len == 0 || t.fric.len == t.bodies.len);
    for (Py_ssize_t r = 0; sizes_ok && r < nl; r++)
        sizes_ok = locals[r] >= 0 && locals[r] < n && (r == 0 || locals[r] > locals[r - 1]);
    for (Py_ssize_t i = 0; sizes_ok && i < n; i++)  /* block and owner: copies' places */
        sizes_ok = block[i] >= 0 && block[i] < n && owner[i] >= 0 && owner[i] < n;
    for (Py_ssize_t i = 0; sizes_ok && i < n * k; i++) {
        /* image offset, image size, impulse offset, impulse size, the struct's size */
        const int64_t *row = rows + 5 * i;
        sizes_ok = row[0] >= 0 && row[1] >= 0 && row[1] <= t.images.len - row[0]
                   && row[4] > 0 && row[4] <= 4096 && row[1] <= row[4] && row[2] >= 0
                   && row[3] >= 0 && row[3] <= row[4] - row[2];
    }
    if (!sizes_ok) {
        release(&t);
        release_then(&w);
        PyErr_SetString(PyExc_ValueError,
                        "reset: the tables' sizes disagree (locals must be ascending local "
                        "copies); build them with kelab.sim.physics._reset.KeptReset");
        return NULL;
    }
    void *space = (void *)(uintptr_t)space_addr;
    if (nl == 0 || !ready(space, locals, nl, n, k, cons, block)) {
        release(&t);
        release_then(&w);
        return PyBool_FromLong(nl == 0);
    }
    Found *found = NULL;
    int64_t *order = NULL;
    Py_ssize_t nf = collect(space, bodies, locals, nl, nb, &found, &order);
    if (nf < 0) {  /* nothing changed yet */
        release(&t);
        release_then(&w);
        if (nf == -1) return PyErr_NoMemory();
        Py_RETURN_FALSE;  /* an arbiter on a body's list is not cached: rebuild instead */
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; fric && t.fric.len && r < nl; r++)
        for (Py_ssize_t j = 0; j < nb; j++)
            ((set_float_f)fn[F_SHAPE_SET_FRICTION])((void *)(uintptr_t)shapes[locals[r] * nb + j],
                                                    fric[locals[r] * nb + j]);
    drop(space, found, order, nf);
    /* constraints: the copy's block and the last one swap places; each restored */
    uint64_t *carr = PTR(PTR(space, O_SPACE_CONSTRAINTS), O_ARRAY_ARR);
    Py_ssize_t last = n - 1;
    for (Py_ssize_t r = 0; r < nl && k; r++) {
        int64_t cl = locals[r], b = block[cl], other = owner[last];
        if (b != last) {
            for (Py_ssize_t j = 0; j < k; j++) {
                uint64_t tmp = carr[b * k + j];
                carr[b * k + j] = carr[last * k + j];
                carr[last * k + j] = tmp;
            }
        }
        block[cl] = last;
        block[other] = b;
        owner[last] = cl;
        owner[b] = other;
        for (Py_ssize_t j = 0; j < k; j++) {
            const int64_t *row = rows + 5 * (cl * k + j);
            char *con = (char *)(uintptr_t)cons[cl * k + j];
            memcpy(con, images + row[0], (size_t)row[1]);
            memset(con + row[2], 0, (size_t)row[3]);
        }
    }
    /* bodies: a fresh state (or the re-add's realignment), each shape hashed again */
    const Vect zero = {0.0, 0.0};
    for (Py_ssize_t r = 0; r < nl; r++) {
        int64_t cl = locals[r];
        for (Py_ssize_t j = 0; j < nb; j++) {
            void *body = (void *)(uintptr_t)bodies[cl * nb + j];
            const double *p = pose + 3 * (cl * nb + j);
            if (place) {
                ((set_vect_f)fn[F_BODY_SET_VELOCITY])(body, zero);
                ((set_float_f)fn[F_BODY_SET_ANGULAR_VELOCITY])(body, 0.0);
            }
            ((set_float_f)fn[F_BODY_UPDATE_POSITION])(body, 0.0);
            if (place) {
                Vect at = {p[1], p[2]};
                ((set_float_f)fn[F_BODY_SET_ANGLE])(body, p[0]);
                ((set_vect_f)fn[F_BODY_SET_POSITION])(body, at);
            } else {
                ((set_vect_f)fn[F_BODY_SET_POSITION])(
                    body, ((get_vect_f)fn[F_BODY_GET_POSITION])(body));
            }
            ((two_ptr_f)fn[F_SPACE_REINDEX_SHAPE])(space,
                                                   (void *)(uintptr_t)shapes[cl * nb + j]);
        }
    }
    /* the shape id counter where the last copy's re-add left it */
    ((set_hash_f)fn[F_SPACE_SET_SHAPE_ID_COUNTER])(space,
                                                   (uintptr_t)(locals[nl - 1] + 1) * stride);
    if (then != Py_None) write_then_read(&w, locals, nl);
    Py_END_ALLOW_THREADS
    free(found);
    free(order);
    release(&t);
    release_then(&w);
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------ the World's rows */

const char reset_rows_doc[] = PyDoc_STR(
"reset_rows(ids, zeros, ones, epoch, index, epoch_step, step) -> (int, int)\n\n"
"A reset's bookkeeping rows (kelab/sim/_history.py, History._rebuilt), in one call: for\n"
"each of ``ids`` (int64, each in ``[0, n)``) its row of every array of ``zeros`` (C-ordered,\n"
"``n`` rows) is set to zero bytes (0.0, False, 0: what ``a[ids] = 0`` writes), of every\n"
"array of ``ones`` (bool, ``n`` rows) to True, and ``epoch`` and ``epoch_step`` (int64,\n"
"``(n,)``) get ``index`` and ``step``. Returns their minima after the writes (numpy's\n"
"``min()``). Keeps the GIL (a microsecond).");

PyObject *
reset_rows(PyObject *self, PyObject *args)
{
    Py_buffer ids, epoch, steps;
    PyObject *zeros, *ones;
    long long index, step;
    if (!PyArg_ParseTuple(args, "y*O!O!w*Lw*L", &ids, &PyTuple_Type, &zeros, &PyTuple_Type,
                          &ones, &epoch, &index, &steps, &step))
        return NULL;
    Py_ssize_t n = epoch.len / 8, m = ids.len / 8;
    Py_ssize_t nz = PyTuple_GET_SIZE(zeros), no = PyTuple_GET_SIZE(ones), na = nz + no;
    Py_buffer *bufs = PyMem_Calloc((size_t)(na ? na : 1), sizeof(Py_buffer));
    Py_ssize_t got = 0;
    int ok = bufs != NULL && n > 0 && steps.len == epoch.len && ids.len % 8 == 0;
    const int64_t *at = ids.buf;
    for (Py_ssize_t r = 0; ok && r < m; r++) ok = at[r] >= 0 && at[r] < n;
    int ids_ok = ok;
    for (; ok && got < na; got++) {
        PyObject *a = PyTuple_GET_ITEM(got < nz ? zeros : ones, got < nz ? got : got - nz);
        if (PyObject_GetBuffer(a, &bufs[got], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) break;
        ok = bufs[got].len % n == 0;
    }
    if (ok && got == na) {
        for (Py_ssize_t i = 0; i < na; i++) {
            Py_ssize_t size = bufs[i].len / n;
            char *base = bufs[i].buf;
            for (Py_ssize_t r = 0; r < m; r++) memset(base + at[r] * size, i < nz ? 0 : 1, size);
        }
    }
    int64_t *ep = epoch.buf, *st = steps.buf, low = INT64_MAX, oldest = INT64_MAX;
    for (Py_ssize_t r = 0; ok && got == na && r < m; r++) {
        ep[at[r]] = index;
        st[at[r]] = step;
    }
    for (Py_ssize_t i = 0; ok && got == na && i < n; i++) {
        if (ep[i] < low) low = ep[i];
        if (st[i] < oldest) oldest = st[i];
    }
    Py_ssize_t misfit = !ok && ids_ok && got > 0 ? bufs[got - 1].len : 0;  /* for the error */
    for (Py_ssize_t i = 0; bufs && i < got; i++) PyBuffer_Release(&bufs[i]);
    PyMem_Free(bufs);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&epoch);
    PyBuffer_Release(&steps);
    if (ok && got == na) return Py_BuildValue("LL", (long long)low, (long long)oldest);
    if (bufs == NULL) return PyErr_NoMemory();
    if (!PyErr_Occurred() && !ids_ok)
        PyErr_Format(PyExc_ValueError,
                     "reset_rows: ids must be int64 in [0, n) (n = len(epoch) > 0, epoch_step "
                     "as long), got n=%zd and %zd ids with one out of range or a table of "
                     "another length; pass the World's own arrays (nothing was written)",
                     n, m);
    else if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError,
                     "reset_rows: every array must be C-ordered with n=%zd rows, got array %zd "
                     "of the %zd (zeros, then ones) of %zd bytes; pass the World's own arrays "
                     "(nothing was written)",
                     n, got - 1, na, misfit);
    return NULL;
}
