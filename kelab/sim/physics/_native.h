/* What the sources of KELab's C helper share (kelab/sim/physics/_native.c): the layout of
 * the Chipmunk fields and functions configure() takes, and the checks of every entry point.
 * This helper knows no Chipmunk struct: the offsets and addresses come from
 * kelab/sim/physics/_chipmunk.py.
 */
#ifndef KELAB_NATIVE_H
#define KELAB_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct { double x, y; } Vect;

/* Field offsets, in the order _chipmunk._NATIVE_FIELDS lists them (then one size). */
enum {
    O_BODY_ARBITER_LIST,
    O_ARB_A, O_ARB_B, O_ARB_BODY_A, O_ARB_BODY_B,
    O_ARB_A_NEXT, O_ARB_A_PREV, O_ARB_B_NEXT, O_ARB_B_PREV, O_ARB_STATE,
    O_SPACE_CONSTRAINTS, O_SPACE_ARBITERS, O_SPACE_CACHED, O_SPACE_POOLED,
    O_SPACE_LOCKED, O_SPACE_POST_STEP, O_SPACE_ROUSED,
    O_ARRAY_NUM, O_ARRAY_ARR,
    O_SET_ENTRIES, O_SET_SIZE, O_SET_TABLE, O_SET_POOLED,
    O_BIN_ELT, O_BIN_NEXT,
    O_BODY_V, O_BODY_A, O_BODY_W, O_BODY_TRANSFORM, O_BODY_F, O_BODY_T,
    O_BODY_P, O_BODY_COG,
    O_ARB_E, O_ARB_U, O_ARB_COUNT, O_ARB_CONTACTS, O_ARB_N, O_ARB_SWAPPED,
    O_CONTACT_R1, O_CONTACT_R2,
    O_CONTACT_SIZE, /* not an offset: sizeof(struct cpContact), the contacts' stride */
    N_OFFSETS
};

/* Chipmunk functions, in the order _chipmunk._NATIVE_FUNCTIONS lists them. */
typedef void (*set_vect_f)(void *, Vect);
typedef void (*set_float_f)(void *, double);
typedef Vect (*get_vect_f)(void *);
typedef void (*two_ptr_f)(void *, void *);
typedef void (*set_hash_f)(void *, uintptr_t);
typedef double (*get_float_f)(void *);
typedef void *(*get_ptr_f)(void *);
typedef void (*arbiter_visit_f)(void *, void *);
typedef void (*each_arbiter_f)(void *, arbiter_visit_f, void *);
typedef void (*space_step_f)(void *, double);
enum {
    F_BODY_SET_VELOCITY, F_BODY_SET_ANGULAR_VELOCITY, F_BODY_SET_ANGLE, F_BODY_SET_POSITION,
    F_BODY_GET_POSITION, F_BODY_UPDATE_POSITION, F_SHAPE_SET_FRICTION,
    F_SPACE_REINDEX_SHAPE, F_ARRAY_PUSH, F_SPACE_SET_SHAPE_ID_COUNTER,
    F_BODY_GET_ANGLE, F_BODY_GET_VELOCITY, F_BODY_GET_ANGULAR_VELOCITY,
    F_BODY_SET_FORCE, F_BODY_SET_TORQUE, F_SPACE_EACH_CACHED_ARBITER, F_SPACE_STEP,
    F_SHAPE_SET_MASS, F_SHAPE_SET_ELASTICITY, F_SHAPE_GET_BODY,
    N_FUNCTIONS
};

/* Set by configure() (_native.c); shared by the helper's sources, not exported. */
#if defined(__GNUC__)
#define KL_HIDDEN __attribute__((visibility("hidden")))
#else
#define KL_HIDDEN
#endif
KL_HIDDEN extern Py_ssize_t off[N_OFFSETS];
KL_HIDDEN extern void *fn[N_FUNCTIONS];
KL_HIDDEN extern uintptr_t state_cached, state_invalidated, hash_coef;

/* The checks every entry point starts with (_native.c): configured, its buffers' sizes. */
KL_HIDDEN int require_configured(const char *name);
KL_HIDDEN PyObject *refuse(Py_buffer **held, int n, const char *message);

/* The packed reset in place (_native_reset.c), an entry of the module's table. */
KL_HIDDEN extern const char reset_doc[];
KL_HIDDEN PyObject *reset(PyObject *self, PyObject *args);
KL_HIDDEN extern const char reset_rows_doc[];
KL_HIDDEN PyObject *reset_rows(PyObject *self, PyObject *args);

/* The friction model's type (_native_friction.c), its regime rule after a step of one
 * space (called without the GIL: no Python), and whether copies are within its table. */
KL_HIDDEN extern PyTypeObject FrictionType;
KL_HIDDEN void friction_regimes(PyObject *friction, uint64_t space, const int64_t *copies,
                                Py_ssize_t nc);
KL_HIDDEN int friction_has_copies(PyObject *friction, const int64_t *copies, Py_ssize_t nc);

/* A shard's forces written and its bodies read (_native.c), in the order of its table,
 * without the GIL; the Stepper and Gang types (_native_step.c). */
KL_HIDDEN void force_loop(const uint64_t *b, Py_ssize_t m, const double *f, const int64_t *r,
                          int direct);
KL_HIDDEN int read_loop(const uint64_t *b, Py_ssize_t m, double *o, const int64_t *r,
                        const double *org, double bound);
/* The revolute and fixed joints' state of rows of body states (joint_revs, _native.c),
 * without the GIL; ``at`` NULL: rows 0..count-1. */
KL_HIDDEN void rev_loop(const double *raw, Py_ssize_t nb, double *pos, double *vel,
                        Py_ssize_t nj, Py_ssize_t k, const int64_t *cols, const int64_t *child,
                        const int64_t *parent, const double *rel, const int64_t *at,
                        Py_ssize_t count);
/* Whether rev_loop's tables fit: cols, child, parent and rel one 8-byte entry per joint,
 * each column in [0, nj), each child in [0, nb), each parent in [-1, nb) (_native.c). */
KL_HIDDEN int joint_tables_fit(const Py_buffer *cols, const Py_buffer *child,
                               const Py_buffer *parent, const Py_buffer *rel, Py_ssize_t nj,
                               Py_ssize_t nb);
KL_HIDDEN extern PyTypeObject StepperType, GangType;

/* The per-copy parameter writers (_native_params.c), entries of the module's table. */
KL_HIDDEN extern const char write_shapes_doc[], write_rows_doc[], write_velocities_doc[],
    within_doc[];
KL_HIDDEN PyObject *write_shapes(PyObject *self, PyObject *args);
KL_HIDDEN PyObject *write_rows(PyObject *self, PyObject *args);
KL_HIDDEN PyObject *write_velocities(PyObject *self, PyObject *args);
KL_HIDDEN PyObject *within(PyObject *self, PyObject *args);

/* Each listed copy's next uniforms through numpy's bit generators (_native_random.c). */
KL_HIDDEN extern const char uniform_rows_doc[];
KL_HIDDEN PyObject *uniform_rows(PyObject *self, PyObject *args);

#define AT(p, o, T) (*(T *)((char *)(p) + off[o]))
#define PTR(p, o) AT(p, o, void *)

#endif
