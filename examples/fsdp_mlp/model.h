/* SPDX-License-Identifier: BSD-3-Clause */
/* The fsdp_mlp model: a chain of Linear(+ReLU) layers of odd sizes with one expert layer, its data and initial
 * weights, and per-sample forward/backward kernels shared by the FSDP trainer and the unsharded reference
 * (train.c), so that both run the same arithmetic and differ only in how gradients are summed. */
#ifndef FSDP_MLP_MODEL_H
#define FSDP_MLP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <tcomms/tcomms.h>

/* Units (one FSDP unit per layer): 13 -> 17 -> 11 -> 17 -> [experts 17 -> 17] -> 13 -> 7 -> 5. An odd number of
 * units puts the expert layer in the middle, where the 1F1B schedule holds it in both directions at once. */
#define MLP_UNITS 7
#define MLP_EXPERT_UNIT 3
#define MLP_IN 13
#define MLP_OUT 5
#define MLP_MAX_DIM 17
#define MLP_GRID_BITS 16   /* deterministic mode: gradient contributions are multiples of 2^-16 */
#define MLP_GRID_HEADROOM 10 /* ... and below 2^(53-16-10), so sums of up to 1024 of them stay exact */

/* MLP_LEARN (fsdp_mlp's default) is the demonstration: a classification task and He-scaled initial weights, so
 * the loss falls, with the float64 arithmetic and gradient grid of MLP_DETERMINISTIC, so sharded and unsharded runs
 * still print the same figures. */
typedef enum mlp_mode { MLP_DETERMINISTIC, MLP_RANDOM, MLP_LEARN } mlp_mode_t;

/* Float64 with every gradient contribution on the grid: sums exact in any order, results bit for bit. */
static inline int mlp_exact(mlp_mode_t mode) { return mode != MLP_RANDOM; }

/* Input and output widths of unit u. */
int mlp_dim_in(int u);
int mlp_dim_out(int u);
/* ReLU after unit u (every unit but the last). */
int mlp_relu(int u);

/* Parameters of the full model, in a fixed global order: per unit, W (out x in) then b (out); the expert unit
 * lists W and b of expert 0, 1, ..., nexperts-1. */
typedef struct mlp_param {
    int unit;
    int expert; /* -1 for a dense layer */
    int bias;   /* 0: W, 1: b */
    int rows, cols;
    size_t numel;
    size_t offset; /* in the flattened full model */
} mlp_param_t;

int mlp_nparams(int nexperts);
void mlp_param(int nexperts, int gid, mlp_param_t *p);
/* The global id of W (bias 0) or b (bias 1) of unit u, expert e (ignored for dense units). */
int mlp_param_id(int nexperts, int unit, int expert, int bias);
size_t mlp_total(int nexperts);

/* Element access in the dtypes the model uses (FLOAT64, FLOAT32, BFLOAT16); arithmetic is in double. Storing into
 * BFLOAT16 rounds the float value to nearest even, as the runtime's cast does. */
double mlp_load(const void *buf, tcomms_dtype_t dt, size_t i);
void mlp_store(void *buf, tcomms_dtype_t dt, size_t i, double v);

/* Sample `index` of the data stream: x (MLP_IN) and target y (MLP_OUT). Deterministic mode: x small integers, y a
 * fixed linear map of x (multiples of 1/4); random mode: x floats in [-1, 1] exact in float32, the same map; learn
 * mode: one of MLP_OUT classes, x a corner of [-1, 1]^MLP_IN (one per class) plus noise in [-1, 1], y one-hot. */
void mlp_sample(uint64_t seed, mlp_mode_t mode, uint64_t index, double *x, double *y);
/* Initial value of parameter `gid`: small integers times 2^-3 (deterministic), float32-exact uniform values
 * scaled by 1/sqrt(fan-in) (random), or He-uniform weights and zero biases (learn). `values` holds numel doubles. */
void mlp_init_param(uint64_t seed, mlp_mode_t mode, int nexperts, int gid, double *values);

/* y = act(W x + b) for one sample; W (nout x nin) and b in dtype `wdt`. */
void mlp_linear_fwd(const void *W, const void *b, tcomms_dtype_t wdt, int nin, int nout, int relu, const double *x,
                    double *y);
/* Backward of mlp_linear_fwd for one sample, given its input x, output y and dL/dy: adds dL/dW and dL/db into gW
 * and gb (dtype gdt), and writes dL/dx into dx unless it is NULL. With grid > 0 each contribution is rounded to a
 * multiple of 2^-grid first, so that sums of them are exact in any order; returns -1 when one leaves the range
 * where such sums stay exact (the run is then not exact), else 0. */
int mlp_linear_bwd(const void *W, tcomms_dtype_t wdt, int nin, int nout, int relu, const double *x, const double *y,
                   const double *dy, double *dx, void *gW, void *gb, tcomms_dtype_t gdt, int grid);
/* Loss of one sample, 0.5 * sum (out - y)^2 (rounded to the grid when grid > 0; NaN when off its range), and
 * dL/dout. */
double mlp_loss(const double *out, const double *y, double *dout, int grid);

/* SGD on n elements of main params (dtype dt): main -= lr * grad, in that dtype's arithmetic. */
void mlp_sgd(void *main, const void *grad, size_t n, tcomms_dtype_t dt, double lr);

#endif
