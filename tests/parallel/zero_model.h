/*
 * A synthetic model for the ZeRO tests, and the single-process reference that trains it.
 *
 * Tensors of odd sizes in a few groups (layers). The loss of sample s is
 *   sum over elements of 0.5 * a * (w - c)^2,   a in [0.5, 1.5), c in +-[2, 3)
 * with a and c drawn from a counter-based generator keyed by (seed, tensor, part, global sample,
 * element), so the gradient a * (w - c) of any sample can be computed anywhere in any order.
 * Parameters start in [-1, 1) and each element's targets keep one sign, so no gradient comes
 * near zero within the tests' steps: Adam divides a gradient by its own magnitude, and near zero
 * that would turn the rounding of two equally valid summation orders into large differences. A
 * step uses `batch` samples (step * batch ...); dp rank r takes a contiguous share split into
 * micro-batches, and the model adds (d / batch) * gradient, so that the layer's average over dp
 * gives the mean over the batch. The reference computes the same mean over all samples at once,
 * the global norm over every distinct tensor of every model-parallel rank, and the optimizer in
 * the same fp32 arithmetic as torch.optim.
 */
#ifndef MESH_TEST_ZERO_MODEL_H
#define MESH_TEST_ZERO_MODEL_H

#include <mesh/zero.h>
#include <stddef.h>
#include <stdint.h>

#define ZM_MAX_TENSORS 32

typedef enum { ZM_MP_NONE = 0, ZM_MP_TP, ZM_MP_PP } zm_mp_mode_t;

typedef struct {
    char name[64];
    int ndim;
    size_t shape[3];
    size_t numel;
    int group;
    unsigned flags;
    int key;         /* part of a partitioned tensor (the mp rank), -1 for one shared value */
    int direct_init; /* initialised through mesh_zero_param rather than mesh_zero_init_param */
} zm_spec_t;

typedef struct {
    int n;
    zm_spec_t t[ZM_MAX_TENSORS];
} zm_model_t;

/* Tensors of model-parallel rank m of mp (mode NONE: the plain model). variant: "" or
 * "missing", "extra", "shape" (the tensor set a mismatched checkpoint test registers). big adds
 * a large tensor (memory and byte counts with little padding). */
void zm_model(zm_model_t *md, zm_mp_mode_t mode, int m, int mp, const char *variant, int big);

/* Initial value of element i (uniform in [-1, 1)). */
float zm_init(const zm_spec_t *t, uint64_t seed, size_t i);
/* a and c of sample s for element i of the tensor whose zm_base is base. */
uint64_t zm_base(const zm_spec_t *t, uint64_t seed);
void zm_sample(uint64_t base, long sample, size_t i, float *a, float *c);

float zm_round_bf16(float x);

typedef struct {
    mesh_zero_optimizer_t opt;
    double lr, beta1, beta2, eps, wd, momentum, max_norm;
    int bf16;
    int batch;
    uint64_t seed;
} zm_conf_t;

/* The reference: every model-parallel rank's tensors, trained on one process. */
typedef struct {
    zm_conf_t c;
    int mp;
    zm_model_t md[8]; /* per mp rank */
    float *w[8][ZM_MAX_TENSORS], *m[8][ZM_MAX_TENSORS], *v[8][ZM_MAX_TENSORS];
    int counted[8][ZM_MAX_TENSORS]; /* distinct tensor: first holder of its (name, key) */
    long step;
    double norm;
    int clipped;
} zm_ref_t;

/* The model of zm_model(mode, m, mp, variant, big) for every m. */
int zm_ref_init(zm_ref_t *r, const zm_conf_t *c, zm_mp_mode_t mode, int mp, const char *variant,
                int big);
void zm_ref_step(zm_ref_t *r);
void zm_ref_free(zm_ref_t *r);

#endif
