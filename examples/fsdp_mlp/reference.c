/* SPDX-License-Identifier: BSD-3-Clause */
/* The unsharded reference trainer of fsdp_mlp (train.h) and the options shared with the FSDP trainer: the whole
 * model and the whole global batch in one process, with the same kernels, data and optimizer, so that an FSDP run
 * must reproduce its losses and final parameters. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mlp_opts_t mlp_opts_default(void)
{
    mlp_opts_t o;
    memset(&o, 0, sizeof o);
    o.steps = 4;
    o.microbatches = 1;
    o.batch = 8;
    o.outer = 1;
    o.ep = 1;
    o.tp = 1;
    o.mode = MLP_DETERMINISTIC;
    o.seed = 1;
    o.lr_log2 = -6;
    o.timeout_ms = 60000;
    return o;
}

tcomms_dtype_t mlp_compute_dtype(const mlp_opts_t *o)
{
    if (o->dtype != TCOMMS_INT8)
        return o->dtype;
    return mlp_exact(o->mode) ? TCOMMS_FLOAT64 : TCOMMS_FLOAT32;
}

tcomms_dtype_t mlp_main_dtype(const mlp_opts_t *o)
{
    tcomms_dtype_t c = mlp_compute_dtype(o);
    return c == TCOMMS_FLOAT64 ? TCOMMS_FLOAT64 : TCOMMS_FLOAT32;
}

int mlp_opts_check(const mlp_opts_t *o, mlp_result_t *res)
{
    const char *bad = NULL;
    tcomms_dtype_t c = mlp_compute_dtype(o);
    if (o->steps < 1)
        bad = "--steps must be at least 1";
    else if (o->microbatches < 1)
        bad = "--microbatches must be at least 1";
    else if (o->batch < 1 || o->batch > 64)
        bad = "--batch must be in 1..64";
    else if (o->strategy < 0 || o->strategy > 3)
        bad = "--strategy must be 0..3";
    else if (o->prefetch < 0)
        bad = "--prefetch must be >= 0";
    else if (o->outer < 1 || o->ep < 1 || o->tp < 1 || o->offset < 0 || o->dp < 0)
        bad = "--outer, --ep and --tp must be >= 1, --offset and --dp >= 0";
    else if (o->ep > 8)
        bad = "--ep must be at most 8 (16 experts)";
    else if (c != TCOMMS_FLOAT64 && c != TCOMMS_FLOAT32 && c != TCOMMS_BFLOAT16)
        bad = "--dtype must be float64, float32 or bfloat16";
    else if (mlp_exact(o->mode) && c != TCOMMS_FLOAT64)
        bad = "--mode deterministic and learn compute in float64: --dtype float32/bfloat16 need --mode random";
    else if (o->microbatches * o->batch > 1 << MLP_GRID_HEADROOM)
        bad = "--microbatches * --batch must be at most 1024";
    if (bad)
        snprintf(res->err, sizeof res->err, "%s", bad);
    return bad ? -1 : 0;
}

/* The full model: main params and gradients (main dtype) and model weights (compute dtype), flattened in the
 * global order of model.h. */
typedef struct ref_model {
    int E, grid;
    tcomms_dtype_t cdt, mdt;
    size_t total;
    char *weights, *main, *grad;
} ref_model_t;

static void *at(const ref_model_t *m, char *base, tcomms_dtype_t dt, int unit, int expert, int bias)
{
    mlp_param_t p;
    mlp_param(m->E, mlp_param_id(m->E, unit, expert, bias), &p);
    return base + p.offset * tcomms_dtype_size(dt);
}

/* Forward and backward of `n` samples from sample `first`; adds gradients into m->grad, returns the loss sum (NaN
 * when deterministic sums would no longer be exact). */
static double ref_microbatch(const ref_model_t *m, const mlp_opts_t *o, uint64_t first, int n, double **act,
                             double *y, double *dcur, double *dnext)
{
    double loss = 0.0;
    for (int t = 0; t < n; t++)
        mlp_sample(o->seed, o->mode, first + (uint64_t)t, act[0] + MLP_MAX_DIM * t, y + MLP_OUT * t);
    for (int u = 0; u < MLP_UNITS; u++)
        for (int t = 0; t < n; t++) {
            int e = t % m->E;
            mlp_linear_fwd(at(m, m->weights, m->cdt, u, e, 0), at(m, m->weights, m->cdt, u, e, 1), m->cdt,
                           mlp_dim_in(u), mlp_dim_out(u), mlp_relu(u), act[u] + MLP_MAX_DIM * t,
                           act[u + 1] + MLP_MAX_DIM * t);
        }
    for (int t = 0; t < n; t++)
        loss += mlp_loss(act[MLP_UNITS] + MLP_MAX_DIM * t, y + MLP_OUT * t, dcur + MLP_MAX_DIM * t, m->grid);
    for (int u = MLP_UNITS - 1; u >= 0; u--) {
        for (int t = 0; t < n; t++) {
            int e = t % m->E;
            if (mlp_linear_bwd(at(m, m->weights, m->cdt, u, e, 0), m->cdt, mlp_dim_in(u), mlp_dim_out(u),
                               mlp_relu(u), act[u] + MLP_MAX_DIM * t, act[u + 1] + MLP_MAX_DIM * t,
                               dcur + MLP_MAX_DIM * t, u > 0 ? dnext + MLP_MAX_DIM * t : NULL,
                               at(m, m->grad, m->mdt, u, e, 0), at(m, m->grad, m->mdt, u, e, 1), m->mdt, m->grid))
                loss = NAN;
        }
        double *swap = dcur;
        dcur = dnext;
        dnext = swap;
    }
    return loss;
}

/* Scratch for ref_microbatch over up to `n` samples. */
typedef struct scratch {
    double *act[MLP_UNITS + 1], *y, *d0, *d1;
} scratch_t;

static int scratch_alloc(scratch_t *s, int n)
{
    size_t rows = (size_t)n * MLP_MAX_DIM;
    memset(s, 0, sizeof *s);
    int ok = 1;
    for (int u = 0; u <= MLP_UNITS; u++)
        ok &= (s->act[u] = calloc(rows, sizeof(double))) != NULL;
    s->y = calloc((size_t)n * MLP_OUT, sizeof(double));
    s->d0 = calloc(rows, sizeof(double));
    s->d1 = calloc(rows, sizeof(double));
    return ok && s->y && s->d0 && s->d1 ? 0 : -1;
}

static void scratch_free(scratch_t *s)
{
    for (int u = 0; u <= MLP_UNITS; u++)
        free(s->act[u]);
    free(s->y);
    free(s->d0);
    free(s->d1);
}

static void cast_weights(ref_model_t *m)
{
    for (size_t i = 0; i < m->total; i++)
        mlp_store(m->weights, m->cdt, i, mlp_load(m->main, m->mdt, i));
}

static int model_alloc(ref_model_t *m, const mlp_opts_t *o, tcomms_dtype_t cdt, tcomms_dtype_t mdt, int grid)
{
    memset(m, 0, sizeof *m);
    m->E = 2 * o->ep;
    m->grid = grid;
    m->cdt = cdt;
    m->mdt = mdt;
    m->total = mlp_total(m->E);
    m->weights = calloc(m->total, tcomms_dtype_size(cdt));
    m->main = calloc(m->total, tcomms_dtype_size(mdt));
    m->grad = calloc(m->total, tcomms_dtype_size(mdt));
    return m->weights && m->main && m->grad ? 0 : -1;
}

static void model_free(ref_model_t *m)
{
    free(m->weights);
    free(m->main);
    free(m->grad);
}

int mlp_train_reference(const mlp_opts_t *o, mlp_result_t *res)
{
    res->err[0] = '\0';
    if (mlp_opts_check(o, res))
        return -1;
    ref_model_t m;
    scratch_t s;
    int rc = model_alloc(&m, o, mlp_compute_dtype(o), mlp_main_dtype(o),
                         mlp_exact(o->mode) ? MLP_GRID_BITS : 0);
    if (rc == 0)
        rc = scratch_alloc(&s, o->batch);
    if (rc) {
        snprintf(res->err, sizeof res->err, "reference: out of memory");
        model_free(&m);
        return -1;
    }
    double vals[MLP_MAX_DIM * MLP_MAX_DIM];
    for (int g = 0; g < mlp_nparams(m.E); g++) {
        mlp_param_t p;
        mlp_param(m.E, g, &p);
        mlp_init_param(o->seed, o->mode, m.E, g, vals);
        for (size_t k = 0; k < p.numel; k++)
            mlp_store(m.main, m.mdt, p.offset + k, vals[k]);
    }
    cast_weights(&m);
    for (int step = 0; step < o->steps && rc == 0; step++) {
        memset(m.grad, 0, m.total * tcomms_dtype_size(m.mdt));
        double loss = 0.0;
        for (int mb = 0; mb < o->microbatches; mb++) {
            uint64_t first = ((uint64_t)step * (uint64_t)o->microbatches + (uint64_t)mb) * (uint64_t)o->batch;
            loss += ref_microbatch(&m, o, first, o->batch, s.act, s.y, s.d0, s.d1);
        }
        if (isnan(loss)) {
            snprintf(res->err, sizeof res->err, "reference, step %d: a gradient or loss left the range where "
                     "deterministic sums are exact", step);
            rc = -1;
        }
        mlp_sgd(m.main, m.grad, m.total, m.mdt, ldexp(1.0, o->lr_log2));
        cast_weights(&m);
        if (res->losses)
            res->losses[step] = loss;
    }
    if (res->params)
        for (size_t i = 0; i < m.total; i++)
            res->params[i] = mlp_load(m.main, m.mdt, i);
    scratch_free(&s);
    model_free(&m);
    return rc;
}

/* One unsharded pass over samples [first, first + n) with `params`: the summed loss, and where asked the gradient
 * and the number of samples whose largest output is their class. NAN when out of memory. */
static double full_pass(const mlp_opts_t *o, const double *params, uint64_t first, int n, double *grad, int *right)
{
    ref_model_t m;
    scratch_t s;
    double loss = NAN;
    if (model_alloc(&m, o, TCOMMS_FLOAT64, TCOMMS_FLOAT64, 0) == 0 && scratch_alloc(&s, n) == 0) {
        memcpy(m.weights, params, m.total * sizeof(double));
        loss = ref_microbatch(&m, o, first, n, s.act, s.y, s.d0, s.d1);
        if (grad != NULL)
            memcpy(grad, m.grad, m.total * sizeof(double));
        for (int t = 0; right != NULL && t < n; t++) {
            const double *out = s.act[MLP_UNITS] + MLP_MAX_DIM * t, *y = s.y + MLP_OUT * t;
            int best = 0, want = 0;
            for (int j = 1; j < MLP_OUT; j++) {
                best = out[j] > out[best] ? j : best;
                want = y[j] > y[want] ? j : want;
            }
            *right += best == want;
        }
        scratch_free(&s);
    }
    model_free(&m);
    return loss;
}

double mlp_full_accuracy(const mlp_opts_t *o, const double *params, uint64_t first, int n, double *loss)
{
    int right = 0;
    *loss = full_pass(o, params, first, n, NULL, &right) / n; /* its backward is wasted: cheap */
    return isnan(*loss) ? NAN : (double)right / n;
}

double mlp_full_loss_grad(const mlp_opts_t *o, const double *params, uint64_t first, int n, double *grad)
{
    return full_pass(o, params, first, n, grad, NULL);
}
