/* Per-copy parameters written many objects a call, part of KELab's C helper
 * (kelab/sim/physics/_native.c; kelab/sim/physics/_params.py says what and why): shape
 * masses, friction and elasticity (write_shapes; write_rows from a table of them) and body
 * velocities (write_velocities), Chipmunk's own setters with the given values in the given
 * order, the GIL released; and the bounds check of the rows the World is given (within),
 * no Chipmunk call.
 */
#include "_native.h"

/* What write_shapes() sets: kelab/sim/physics/_params.py names the same numbers. */
enum { SHAPE_MASS, SHAPE_FRICTION, SHAPE_ELASTICITY, N_SHAPE_FIELDS };

const char write_shapes_doc[] = PyDoc_STR(
"write_shapes(what, shapes, values, moved=None)\n\n"
"Per shape (uint64 ``cpShape *``), in order, Chipmunk's setter of field ``what`` (0: mass,\n"
"1: friction, 2: elasticity) with its float64 of ``values``: the calls pymunk's property\n"
"setters make, without a Python call per shape. A mass makes the body add up its mass,\n"
"centre of gravity and moment again (cpShapeSetMass), so a body's shapes are set in the\n"
"order given; that also places the body again from its centre of gravity, which can move\n"
"its position by a rounding: ``moved`` (uint8 per shape, written) says where it did.\n"
"Returns how many of the writes moved their body (0 without ``moved``).");

/* Chipmunk's setter of field ``what`` (checked by the caller: 0, 1 or 2). */
static set_float_f
shape_setter(int what)
{
    return (set_float_f)fn[what == SHAPE_MASS       ? F_SHAPE_SET_MASS
                           : what == SHAPE_FRICTION ? F_SHAPE_SET_FRICTION
                                                    : F_SHAPE_SET_ELASTICITY];
}

/* One shape's write; with ``out``, whether it moved its body's position (1) or not (0). */
static inline void
write_shape(set_float_f set, void *shape, double value, uint8_t *out)
{
    if (!out) {
        set(shape, value);
        return;
    }
    /* the position a state read gives (read_rows): the transform's translation */
    const double *t = &AT(((get_ptr_f)fn[F_SHAPE_GET_BODY])(shape), O_BODY_TRANSFORM, double);
    const double tx = t[4], ty = t[5];
    set(shape, value);
    *out = (uint8_t)(memcmp(&tx, &t[4], sizeof(double)) != 0
                     || memcmp(&ty, &t[5], sizeof(double)) != 0);
}

PyObject *
write_shapes(PyObject *self, PyObject *args)
{
    int what;
    Py_buffer shapes, values, moved = {0};
    if (!require_configured("write_shapes")) return NULL;
    if (!PyArg_ParseTuple(args, "iy*y*|w*", &what, &shapes, &values, &moved)) return NULL;
    Py_ssize_t m = shapes.len / 8;
    const uint64_t *sh = shapes.buf;
    int ok = what >= 0 && what < N_SHAPE_FIELDS && shapes.len % 8 == 0 && values.len == m * 8
             && (moved.obj == NULL || moved.len == m);
    for (Py_ssize_t i = 0; ok && i < m; i++) ok = sh[i] != 0;
    if (!ok) {
        Py_buffer *held[] = {&shapes, &values, &moved};
        return refuse(held, moved.obj ? 3 : 2,
                      "write_shapes: what must be 0 (mass), 1 (friction) or 2 (elasticity), "
                      "shapes non-null uint64 pointers, values one float64 per shape and "
                      "moved (if given) one uint8 per shape");
    }
    const double *v = values.buf;
    uint8_t *out = moved.obj ? moved.buf : NULL;
    Py_ssize_t count = 0;
    set_float_f set = shape_setter(what);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        write_shape(set, (void *)(uintptr_t)sh[i], v[i], out ? &out[i] : NULL);
        if (out) count += out[i];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&shapes);
    PyBuffer_Release(&values);
    if (moved.obj) PyBuffer_Release(&moved);
    return PyLong_FromSsize_t(count);
}

const char write_rows_doc[] = PyDoc_STR(
"write_rows(what, grid, rows, values, moved=None)\n\n"
"write_shapes() over a table: ``grid`` holds a ``cpShape *`` (uint64) per row and column,\n"
"``len(values) // len(rows)`` columns a row; for each of ``rows`` (int64 rows of ``grid``),\n"
"in order, the row's shapes in column order get its float64 ``values`` (one per column).\n"
"A 0 in ``grid`` is a column without a shape: skipped (its ``moved`` 0). ``moved`` (uint8\n"
"per value, written) and the count returned as write_shapes() gives them.");

PyObject *
write_rows(PyObject *self, PyObject *args)
{
    int what;
    Py_buffer grid, rows, values, moved = {0};
    if (!require_configured("write_rows")) return NULL;
    if (!PyArg_ParseTuple(args, "iy*y*y*|w*", &what, &grid, &rows, &values, &moved)) return NULL;
    const Py_ssize_t k = rows.len / 8, nv = values.len / 8;
    const Py_ssize_t m = k ? nv / k : 0;            /* columns a row */
    const Py_ssize_t n = m ? grid.len / 8 / m : 0;  /* rows of grid */
    const int64_t *r = rows.buf;
    int ok = what >= 0 && what < N_SHAPE_FIELDS && rows.len % 8 == 0 && values.len % 8 == 0
             && grid.len % 8 == 0 && nv == k * m && (m == 0 || grid.len / 8 == n * m)
             && (moved.obj == NULL || moved.len == nv);
    for (Py_ssize_t i = 0; ok && m && i < k; i++) ok = r[i] >= 0 && r[i] < n;
    if (!ok) {
        Py_buffer *held[] = {&grid, &rows, &values, &moved};
        return refuse(held, moved.obj ? 4 : 3,
                      "write_rows: what must be 0 (mass), 1 (friction) or 2 (elasticity), "
                      "grid uint64 rows of len(values) // len(rows) pointers, rows int64 "
                      "indices of its rows, values float64 and moved (if given) one uint8 "
                      "per value");
    }
    const uint64_t *g = grid.buf;
    const double *v = values.buf;
    uint8_t *out = moved.obj ? moved.buf : NULL;
    Py_ssize_t count = 0;
    set_float_f set = shape_setter(what);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++) {
        const uint64_t *row = g + r[i] * m;
        for (Py_ssize_t j = 0; j < m; j++) {
            const Py_ssize_t at = i * m + j;
            if (!row[j]) {
                if (out) out[at] = 0;
                continue;
            }
            write_shape(set, (void *)(uintptr_t)row[j], v[at], out ? &out[at] : NULL);
            if (out) count += out[at];
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&grid);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&values);
    if (moved.obj) PyBuffer_Release(&moved);
    return PyLong_FromSsize_t(count);
}

const char write_velocities_doc[] = PyDoc_STR(
"write_velocities(bodies, velocities)\n\n"
"Per body (uint64 ``cpBody *``): ``cpBodySetVelocity`` then ``cpBodySetAngularVelocity``\n"
"with its three float64 of ``velocities`` (vx, vy, omega): a push, nothing else of the\n"
"body changed.");

PyObject *
write_velocities(PyObject *self, PyObject *args)
{
    Py_buffer bodies, vels;
    if (!require_configured("write_velocities")) return NULL;
    if (!PyArg_ParseTuple(args, "y*y*", &bodies, &vels)) return NULL;
    Py_ssize_t m = bodies.len / 8;
    const uint64_t *b = bodies.buf;
    int ok = bodies.len % 8 == 0 && vels.len == m * 24;
    for (Py_ssize_t i = 0; ok && i < m; i++) ok = b[i] != 0;
    if (!ok) {
        Py_buffer *held[] = {&bodies, &vels};
        return refuse(held, 2,
                      "write_velocities: bodies must be non-null uint64 pointers and "
                      "velocities 3 float64 per body");
    }
    const double *v = vels.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        void *body = (void *)(uintptr_t)b[i];
        Vect vel = {v[3 * i], v[3 * i + 1]};
        ((set_vect_f)fn[F_BODY_SET_VELOCITY])(body, vel);
        ((set_float_f)fn[F_BODY_SET_ANGULAR_VELOCITY])(body, v[3 * i + 2]);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bodies);
    PyBuffer_Release(&vels);
    Py_RETURN_NONE;
}

const char within_doc[] = PyDoc_STR(
"within(values, low, high, above=None)\n\n"
"Whether every row of ``values`` (float64, rows of ``len(low)`` values) is within the\n"
"per-column bounds, ``low[j] <= row[j] <= high[j]`` (NaN is not), and, where ``above``\n"
"(int64 per column, -1: none) names a column of the row, ``row[j] <= row[above[j]]``:\n"
"what numpy's comparisons and ``all()`` say of the same arrays, in one pass without\n"
"temporaries (a per-copy parameter's check, kelab/sim/_params.py).");

PyObject *
within(PyObject *self, PyObject *args)
{
    Py_buffer values, low, high, above = {0};
    if (!PyArg_ParseTuple(args, "y*y*y*|y*", &values, &low, &high, &above)) return NULL;
    Py_ssize_t m = low.len / 8;
    Py_ssize_t n = values.len / 8;
    const int64_t *ab = above.obj ? above.buf : NULL;
    int ok = low.len % 8 == 0 && high.len == low.len && values.len % 8 == 0
             && (m ? n % m == 0 : n == 0) && (!ab || above.len == m * 8);
    for (Py_ssize_t j = 0; ok && ab && j < m; j++) ok = ab[j] >= -1 && ab[j] < m;
    if (!ok) {
        Py_buffer *held[] = {&values, &low, &high, &above};
        return refuse(held, ab ? 4 : 3,
                      "within: values must be float64 rows of len(low) values, low and high "
                      "float64 of one length and above (if given) one int64 in [-1, len(low)) "
                      "per column");
    }
    const double *v = values.buf, *lo = low.buf, *hi = high.buf;
    int all = 1;
    for (Py_ssize_t r = 0; all && r < n; r += m) {
        const double *row = v + r;
        for (Py_ssize_t j = 0; j < m; j++) {
            const double x = row[j];
            if (!(x >= lo[j] && x <= hi[j]) || (ab && ab[j] >= 0 && !(x <= row[ab[j]]))) {
                all = 0;
                break;
            }
        }
    }
    PyBuffer_Release(&values);
    PyBuffer_Release(&low);
    PyBuffer_Release(&high);
    if (ab) PyBuffer_Release(&above);
    return PyBool_FromLong(all);
}
