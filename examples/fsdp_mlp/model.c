/* SPDX-License-Identifier: BSD-3-Clause */
/* The fsdp_mlp model (model.h): layer sizes, the global parameter order, data and initial weights from a counter
 * hash (so any rank can produce any sample or parameter without communication), and the per-sample kernels both
 * trainers run. */
#include "model.h"

#include <math.h>
#include <string.h>

static const int dims[MLP_UNITS + 1] = {MLP_IN, 17, 11, 17, 17, 13, 7, MLP_OUT};

int mlp_dim_in(int u) { return dims[u]; }
int mlp_dim_out(int u) { return dims[u + 1]; }
int mlp_relu(int u) { return u < MLP_UNITS - 1; }

/* Parameters per unit: 2, or 2 per expert. */
static int unit_params(int nexperts, int u) { return u == MLP_EXPERT_UNIT ? 2 * nexperts : 2; }

int mlp_nparams(int nexperts)
{
    int n = 0;
    for (int u = 0; u < MLP_UNITS; u++)
        n += unit_params(nexperts, u);
    return n;
}

void mlp_param(int nexperts, int gid, mlp_param_t *p)
{
    size_t offset = 0;
    int first = 0;
    for (int u = 0; u < MLP_UNITS; u++) {
        int n = unit_params(nexperts, u);
        size_t in = (size_t)dims[u], out = (size_t)dims[u + 1];
        if (gid < first + n) {
            int k = gid - first;
            p->unit = u;
            p->expert = u == MLP_EXPERT_UNIT ? k / 2 : -1;
            p->bias = k % 2;
            p->rows = (int)out;
            p->cols = p->bias ? 1 : (int)in;
            p->numel = (size_t)p->rows * (size_t)p->cols;
            p->offset = offset + (size_t)(k / 2) * (out * in + out) + (p->bias ? out * in : 0);
            return;
        }
        offset += (size_t)(n / 2) * (out * in + out);
        first += n;
    }
    memset(p, 0, sizeof *p);
}

int mlp_param_id(int nexperts, int unit, int expert, int bias)
{
    int first = 0;
    for (int u = 0; u < unit; u++)
        first += unit_params(nexperts, u);
    return first + (unit == MLP_EXPERT_UNIT ? 2 * expert : 0) + bias;
}

size_t mlp_total(int nexperts)
{
    mlp_param_t p;
    mlp_param(nexperts, mlp_nparams(nexperts) - 1, &p);
    return p.offset + p.numel;
}

/* ---- dtypes --------------------------------------------------------------------------------------------------- */

static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);       /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

double mlp_load(const void *buf, tcomms_dtype_t dt, size_t i)
{
    switch (dt) {
    case TCOMMS_FLOAT64:
        return ((const double *)buf)[i];
    case TCOMMS_FLOAT32:
        return ((const float *)buf)[i];
    default:
        return bf16_to_float(((const uint16_t *)buf)[i]);
    }
}

void mlp_store(void *buf, tcomms_dtype_t dt, size_t i, double v)
{
    switch (dt) {
    case TCOMMS_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case TCOMMS_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((uint16_t *)buf)[i] = float_to_bf16((float)v);
        break;
    }
}

/* ---- data and weights ----------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value in [0, 1) from (seed, stream, index, component): 24 random bits, exact in float32. */
static double unit_value(uint64_t seed, uint64_t stream, uint64_t index, uint64_t k)
{
    uint64_t h = mix(mix(mix(seed ^ (stream << 56)) ^ index) ^ k);
    return (double)(h >> 40) / 16777216.0;
}

/* An integer in [-m, m]. */
static double small_int(uint64_t seed, uint64_t stream, uint64_t index, uint64_t k, int m)
{
    return floor(unit_value(seed, stream, index, k) * (2 * m + 1)) - m;
}

void mlp_sample(uint64_t seed, mlp_mode_t mode, uint64_t index, double *x, double *y)
{
    for (int i = 0; i < MLP_IN; i++)
        x[i] = mode == MLP_DETERMINISTIC ? small_int(seed, 1, index, (uint64_t)i, 2)
                                         : 2.0 * unit_value(seed, 1, index, (uint64_t)i) - 1.0;
    if (mode == MLP_LEARN) {
        /* A class the network can learn in a few hundred plain SGD steps (a linear map through seven narrow ReLU
         * layers takes thousands): class c's points lie around a corner of the cube [-1, 1]^13, the noise as wide
         * as the corner's distance to the centre, and the target is its one-hot vector. */
        int c = (int)(unit_value(seed, 4, index, 0) * MLP_OUT);
        for (int i = 0; i < MLP_IN; i++)
            x[i] += unit_value(seed, 5, (uint64_t)c, (uint64_t)i) < 0.5 ? -1.0 : 1.0;
        for (int j = 0; j < MLP_OUT; j++)
            y[j] = j == c;
        return;
    }
    /* the target is a fixed linear map of x with coefficients in {-1, 0, 1} over 4, so there is something to learn */
    for (int j = 0; j < MLP_OUT; j++) {
        double s = 0.0;
        for (int i = 0; i < MLP_IN; i++)
            s += small_int(seed, 2, (uint64_t)j, (uint64_t)i, 1) * x[i];
        y[j] = s / 4;
    }
}

#define LEARN_LAST_SCALE 0.125

void mlp_init_param(uint64_t seed, mlp_mode_t mode, int nexperts, int gid, double *values)
{
    mlp_param_t p;
    mlp_param(nexperts, gid, &p);
    /* keyed by (unit, expert, bias), not gid, so expert e starts the same whatever the number of experts */
    uint64_t key = (uint64_t)p.unit * 4096u + (uint64_t)(p.expert + 1) * 2u + (uint64_t)p.bias;
    double scale = 1.0 / sqrt((double)mlp_dim_in(p.unit));
    /* Learn: He-uniform keeps the signal's size through the six ReLU layers (1/sqrt(fan-in) shrinks it about
     * sixfold a layer, so the early layers would barely learn); the last layer starts small, so the first loss is
     * the target's own size and what falls is what the network learned. */
    double he = sqrt(6.0 / (double)mlp_dim_in(p.unit)) * (mlp_relu(p.unit) ? 1.0 : LEARN_LAST_SCALE);
    for (size_t i = 0; i < p.numel; i++) {
        if (mode == MLP_LEARN)
            values[i] = p.bias ? 0.0 : (double)(float)((2.0 * unit_value(seed, 3, key, i) - 1.0) * he);
        else if (mode == MLP_DETERMINISTIC)
            values[i] = ldexp(small_int(seed, 3, key, i, 2), -3);
        else
            values[i] = (double)(float)((2.0 * unit_value(seed, 3, key, i) - 1.0) * scale);
    }
}

/* ---- kernels -------------------------------------------------------------------------------------------------- */

void mlp_linear_fwd(const void *W, const void *b, tcomms_dtype_t wdt, int nin, int nout, int relu, const double *x,
                    double *y)
{
    for (int o = 0; o < nout; o++) {
        double s = mlp_load(b, wdt, (size_t)o);
        for (int i = 0; i < nin; i++)
            s += mlp_load(W, wdt, (size_t)o * (size_t)nin + (size_t)i) * x[i];
        y[o] = relu && s < 0 ? 0.0 : s;
    }
}

/* Round v to a multiple of 2^-grid; *bad set when it leaves the range where sums of 2^HEADROOM such values are
 * exact in double. */
static double on_grid(double v, int grid, int *bad)
{
    if (grid <= 0)
        return v;
    double r = nearbyint(ldexp(v, grid));
    if (!(fabs(r) < ldexp(1.0, 53 - MLP_GRID_HEADROOM)))
        *bad = 1;
    return ldexp(r, -grid);
}

static void add_into(void *g, tcomms_dtype_t gdt, size_t i, double v)
{
    mlp_store(g, gdt, i, mlp_load(g, gdt, i) + v);
}

int mlp_linear_bwd(const void *W, tcomms_dtype_t wdt, int nin, int nout, int relu, const double *x, const double *y,
                   const double *dy, double *dx, void *gW, void *gb, tcomms_dtype_t gdt, int grid)
{
    double dpre[MLP_MAX_DIM];
    int bad = 0;
    for (int o = 0; o < nout; o++)
        dpre[o] = relu && !(y[o] > 0) ? 0.0 : dy[o];
    for (int o = 0; o < nout; o++) {
        add_into(gb, gdt, (size_t)o, on_grid(dpre[o], grid, &bad));
        for (int i = 0; i < nin; i++)
            add_into(gW, gdt, (size_t)o * (size_t)nin + (size_t)i, on_grid(dpre[o] * x[i], grid, &bad));
    }
    if (dx) {
        for (int i = 0; i < nin; i++) {
            double s = 0.0;
            for (int o = 0; o < nout; o++)
                s += mlp_load(W, wdt, (size_t)o * (size_t)nin + (size_t)i) * dpre[o];
            dx[i] = s;
        }
    }
    return bad ? -1 : 0;
}

double mlp_loss(const double *out, const double *y, double *dout, int grid)
{
    double s = 0.0;
    int bad = 0;
    for (int i = 0; i < MLP_OUT; i++) {
        dout[i] = out[i] - y[i];
        s += dout[i] * dout[i];
    }
    double l = on_grid(0.5 * s, grid, &bad);
    return bad ? NAN : l;
}

void mlp_sgd(void *main, const void *grad, size_t n, tcomms_dtype_t dt, double lr)
{
    if (dt == TCOMMS_FLOAT64) {
        double *m = main;
        const double *g = grad;
        for (size_t i = 0; i < n; i++)
            m[i] = m[i] - lr * g[i];
    } else {
        float *m = main;
        const float *g = grad;
        float flr = (float)lr;
        for (size_t i = 0; i < n; i++)
            m[i] = m[i] - flr * g[i];
    }
}
