/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_bench's command line: its options (with defaults) and their parsing, apart from the benchmark itself. */
#ifndef FSDP_OPTS_CUH
#define FSDP_OPTS_CUH

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcomms/fsdp.h>

enum { MODE_COMPUTE, MODE_COMM, MODE_FULL, MODE_COUNT };
static const char *const mode_names[MODE_COUNT] = {"compute", "comm", "full"};
static const char *const strategy_names[] = {"noshard", "zero1", "zero2", "zero3"};

typedef struct opts {
    int layers, dim, tokens, micro, steps, warmup, prefetch, max_live, fp32, modes;
    tcomms_fsdp_strategy_t strategy;
    float lr;
    const char *backend;
    int sm_margin; /* SMs the GEMMs leave free for the collectives' kernels */
    int timeline;  /* one more full step with per-layer events (fsdp_timeline.cuh) */
    int concurrency; /* then GEMMs and all_gathers alone and together, without the runtime */
    int window;      /* the probe's all_gather buffer is a symmetric window (ncclMemAlloc, ncclCommWindowRegister) */
    int no_windows;  /* config.windows = -1: the runtime's buffers stay plain device memory */
    int sync_all;    /* the optimizer waits for every reduction first (finish_grad_sync), not piece by piece */
    int optimizer_casts; /* SGD writes the weights too (config.optimizer_casts): install_weights does not cast */
    int reduce_bf16;     /* gradients in bf16 and reduce-scattered in bf16 (config.reduce_dtype); main grads fp32 */
} opts_t;

static void usage(FILE *f)
{
    fputs("usage: fsdp_bench [options]   (one rank per GPU, under tcomms-run -n N)\n"
          "  --layers L      linear layers (default 8)        --dim D       width d (default 4096)\n"
          "  --tokens T      tokens per microbatch (4096)     --micro M     microbatches per step (1)\n"
          "  --dtype bf16|fp32   compute dtype (bf16; main params and gradients are fp32)\n"
          "  --strategy zero3|zero2|zero1|noshard (zero3)     --prefetch N  forward and backward (1)\n"
          "  --max-live N    ZeRO-3 unit buffers (0: the runtime's default)\n"
          "  --steps S       timed steps per mode (20)        --warmup W    untimed steps first (5)\n"
          "  --mode all|full|compute|comm  (all: compute, comm, full, then the overlap line)\n"
          "  --lr X          SGD learning rate (1e-3)         --backend B   world backend (nccl)\n"
          "  --sm-margin N   SMs the GEMMs leave to the collectives (0: cuBLAS takes them all)\n"
          "  --timeline      then one full step with per-layer events: the stall before each layer's compute\n"
          "  --concurrency   then 8 GEMMs and 8 all_gathers of one layer, alone and together (no runtime)\n"
          "  --window        the --concurrency all_gathers use a symmetric window\n"
          "                  (with NCCL_CTA_POLICY=2: on the copy engines)\n"
          "  --no-windows    the runtime's unit buffers and gradient slots in plain device memory (config.windows -1)\n"
          "  --sync-all      the optimizer starts after finish_grad_sync, not on each piece after its sync_shard\n"
          "  --optimizer-casts  SGD also writes the weights (config.optimizer_casts): install_weights does not cast\n"
          "  --reduce-dtype bf16|fp32  gradients and their reduce-scatters (config.reduce_dtype; fp32; bf16 needs\n"
          "                  bf16 compute and zero2 or zero3): the weight-gradient GEMMs write that dtype\n"
          "Prints one line per mode and, with all three, the overlap (compute + comm - full) / comm in [0, 1].\n"
          "Exit 77 without a GPU.\n",
          f);
}

static int bad_arg(const char *what, const char *v)
{
    fprintf(stderr, "fsdp_bench: %s, not '%s'\n", what, v);
    return -1;
}

static int parse_int(const char *name, const char *v, int lo, int *out)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > 1 << 20) {
        fprintf(stderr, "fsdp_bench: %s needs an integer >= %d, not '%s'\n", name, lo, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"layers", 1, 0, 'L'}, {"dim", 1, 0, 'd'},      {"tokens", 1, 0, 'T'},  {"micro", 1, 0, 'm'},
        {"steps", 1, 0, 's'},  {"warmup", 1, 0, 'w'},   {"prefetch", 1, 0, 'p'}, {"max-live", 1, 0, 'x'},
        {"dtype", 1, 0, 't'},  {"strategy", 1, 0, 'S'}, {"mode", 1, 0, 'M'},    {"lr", 1, 0, 'r'},
        {"backend", 1, 0, 'B'}, {"sm-margin", 1, 0, 'G'}, {"timeline", 0, 0, 'E'},
        {"concurrency", 0, 0, 'C'}, {"window", 0, 0, 'W'}, {"no-windows", 0, 0, 'N'},
        {"sync-all", 0, 0, 'A'}, {"optimizer-casts", 0, 0, 'O'}, {"reduce-dtype", 1, 0, 'R'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    *o = opts_t{8, 4096, 4096, 1, 20, 5, 1, 0, 0, 7, TCOMMS_FSDP_OPTIM_GRADS_PARAMS, 1e-3f, "nccl",
                0, 0, 0, 0, 0, 0, 0, 0};
    int c, bad = 0;
    while (!bad && (c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'L': bad = parse_int("--layers", optarg, 1, &o->layers); break;
        case 'd': bad = parse_int("--dim", optarg, 16, &o->dim); break;
        case 'T': bad = parse_int("--tokens", optarg, 1, &o->tokens); break;
        case 'm': bad = parse_int("--micro", optarg, 1, &o->micro); break;
        case 's': bad = parse_int("--steps", optarg, 1, &o->steps); break;
        case 'w': bad = parse_int("--warmup", optarg, 0, &o->warmup); break;
        case 'p': bad = parse_int("--prefetch", optarg, 0, &o->prefetch); break;
        case 'x': bad = parse_int("--max-live", optarg, 0, &o->max_live); break;
        case 'G': bad = parse_int("--sm-margin", optarg, 0, &o->sm_margin); break;
        case 'E': o->timeline = 1; break;
        case 'C': o->concurrency = 1; break;
        case 'W': o->window = 1; break;
        case 'N': o->no_windows = 1; break;
        case 'A': o->sync_all = 1; break;
        case 'O': o->optimizer_casts = 1; break;
        case 'r': o->lr = strtof(optarg, NULL); break;
        case 'B': o->backend = optarg; break;
        case 'R':
            if (!strcmp(optarg, "bf16") || !strcmp(optarg, "bfloat16")) o->reduce_bf16 = 1;
            else if (!strcmp(optarg, "fp32") || !strcmp(optarg, "float32")) o->reduce_bf16 = 0;
            else bad = bad_arg("--reduce-dtype is bf16 or fp32", optarg);
            break;
        case 't':
            if (!strcmp(optarg, "bf16") || !strcmp(optarg, "bfloat16")) o->fp32 = 0;
            else if (!strcmp(optarg, "fp32") || !strcmp(optarg, "float32") || !strcmp(optarg, "float")) o->fp32 = 1;
            else bad = bad_arg("--dtype is bf16 or fp32", optarg);
            break;
        case 'S': {
            int k = 0;
            while (k < 4 && strcmp(optarg, strategy_names[k])) k++;
            if (k == 4) bad = bad_arg("--strategy is zero3, zero2, zero1 or noshard", optarg);
            else o->strategy = (tcomms_fsdp_strategy_t)k;
            break;
        }
        case 'M': {
            int k = 0;
            while (k < MODE_COUNT && strcmp(optarg, mode_names[k])) k++;
            if (!strcmp(optarg, "all")) o->modes = 7;
            else if (k == MODE_COUNT) bad = bad_arg("--mode is all, full, compute or comm", optarg);
            else o->modes = 1 << k;
            break;
        }
        case 'h': usage(stdout); exit(0);
        default: bad = -1;
        }
    }
    if (!bad && optind < argc) bad = bad_arg("unexpected argument", argv[optind]);
    if (!bad && o->reduce_bf16 && o->strategy < TCOMMS_FSDP_OPTIM_GRADS)
        bad = bad_arg("--reduce-dtype bf16 needs --strategy zero2 or zero3", strategy_names[o->strategy]);
    if (!bad && o->reduce_bf16 && o->fp32) /* cuBLAS has no fp32 GEMM writing bf16 */
        bad = bad_arg("--reduce-dtype bf16 needs --dtype bf16", "fp32");
    if (bad) usage(stderr);
    return bad;
}

#endif
