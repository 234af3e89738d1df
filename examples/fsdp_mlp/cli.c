/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line of fsdp_mlp and fsdp_mlp_cuda (train.h, mlp_main): options, the world communicator, either
 * trainer, and "step N loss X" lines, so the sharded run and --reference can be compared with diff. The host and
 * CUDA programs differ only in the driver they pass (main.c, cuda_main.c). The host program's default is the
 * demonstration (--mode learn): a student network learning a teacher's linear map, its loss printed every few
 * steps and a last line saying how much of it is left. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

static const char *prog = "fsdp_mlp"; /* for messages: the driver's name */

/* The demonstration's run, unless the command line says otherwise: 32 samples a step keep the gradient's noise
 * small; with the default rate 2^-6 and gradients summed over the batch, the rate per sample is 1/2 (2^-5
 * diverges). By 300 steps the loss has fallen below 2% of the first step's (docs/fsdp_example.md shows the curve). */
#define LEARN_STEPS 300
#define LEARN_BATCH 32
#define HELD_OUT 1000

static void usage(FILE *f)
{
    fprintf(f, "usage: %s [options]        (under tcomms-run -n N, or alone with --reference)\n", prog);
    fprintf(f,
            "  --steps S          optimizer steps (learn: %d; otherwise 4)\n"
            "  --microbatches M   microbatches per step (1)\n"
            "  --batch B          global samples per microbatch (learn: %d; otherwise 8)\n"
            "  --strategy 0-3     no_shard, optim, optim_grads, optim_grads_params (0)\n"
            "  --prefetch P       units gathered ahead, forward and backward (0)\n"
            "  --outer O          HSDP replicas (1); --hybrid shards across them (OUTER_OPTIM)\n"
            "  --ep E             expert parallel size; the expert layer has 2*E experts (1)\n"
            "  --tp T             tensor parallel stand-in: T ranks hold identical copies (1)\n"
            "  --dp D             data parallel size (default: (N - offset) / T)\n"
            "  --order S          layout order (tp-cp-ep-dp-pp)\n"
            "  --offset K         first world rank of the layout; ranks below it only create groups (0)\n"
            "  --schedule standard|1f1b\n"
            "  --mode learn|deterministic|random\n"
            "                     learn: the demonstration, a loss that falls (fsdp_mlp's default);\n"
            "                     deterministic: float64 exact sums, small integers (the tests' mode;\n"
            "                     fsdp_mlp_cuda's default); random: float32 random data\n"
            "  --dtype D          compute dtype: float64, float32 or bf16 (bf16: float32 main, random mode)\n"
            "  --seed N           data and weights (1)\n"
            "  --lr-log2 K        learning rate 2^K (-6)\n"
            "  --log PATH         the runtime's issued-collective log, PATH.<rank>\n"
            "  --reference        train unsharded in this process\n",
            LEARN_STEPS, LEARN_BATCH);
}

static int parse_int(const char *name, const char *text, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < -1000000 || v > 1000000) {
        fprintf(stderr, "%s: %s: not an integer: \"%s\"\n", prog, name, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Fill `o` from argv; *reference set by --reference. Returns 0, 1 after --help, -1 on a bad option. In learn mode
 * (the host program's default) steps and batch not given take the demonstration's values. */
static int parse(int argc, char **argv, mlp_opts_t *o, int *reference)
{
    int given_steps = 0, given_batch = 0;
    enum { O_STEPS = 256, O_MB, O_BATCH, O_STRAT, O_PREF, O_OUTER, O_HYBRID, O_EP, O_TP, O_DP, O_ORDER, O_OFFSET,
           O_SCHED, O_MODE, O_DTYPE, O_SEED, O_LR, O_LOG, O_REF, O_HELP };
    static const struct option longopts[] = {
        {"steps", required_argument, 0, O_STEPS},     {"microbatches", required_argument, 0, O_MB},
        {"batch", required_argument, 0, O_BATCH},     {"strategy", required_argument, 0, O_STRAT},
        {"prefetch", required_argument, 0, O_PREF},   {"outer", required_argument, 0, O_OUTER},
        {"hybrid", no_argument, 0, O_HYBRID},         {"ep", required_argument, 0, O_EP},
        {"tp", required_argument, 0, O_TP},           {"dp", required_argument, 0, O_DP},
        {"order", required_argument, 0, O_ORDER},     {"offset", required_argument, 0, O_OFFSET},
        {"schedule", required_argument, 0, O_SCHED},  {"mode", required_argument, 0, O_MODE},
        {"dtype", required_argument, 0, O_DTYPE},     {"seed", required_argument, 0, O_SEED},
        {"lr-log2", required_argument, 0, O_LR},      {"log", required_argument, 0, O_LOG},
        {"reference", no_argument, 0, O_REF},         {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    int c, v = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int *target = NULL;
        switch (c) {
        case O_STEPS: target = &o->steps; given_steps = 1; break;
        case O_MB: target = &o->microbatches; break;
        case O_BATCH: target = &o->batch; given_batch = 1; break;
        case O_STRAT: target = &o->strategy; break;
        case O_PREF: target = &o->prefetch; break;
        case O_OUTER: target = &o->outer; break;
        case O_EP: target = &o->ep; break;
        case O_TP: target = &o->tp; break;
        case O_DP: target = &o->dp; break;
        case O_OFFSET: target = &o->offset; break;
        case O_LR: target = &o->lr_log2; break;
        case O_SEED:
            if (parse_int("--seed", optarg, &v))
                return -1;
            o->seed = (uint64_t)v;
            break;
        case O_HYBRID: o->hybrid = 1; break;
        case O_ORDER: o->order = optarg; break;
        case O_LOG: o->log_path = optarg; break;
        case O_REF: *reference = 1; break;
        case O_SCHED:
            if (strcmp(optarg, "standard") && strcmp(optarg, "1f1b")) {
                fprintf(stderr, "%s: --schedule: \"%s\" is not standard or 1f1b\n", prog, optarg);
                return -1;
            }
            o->schedule = strcmp(optarg, "1f1b") == 0 ? MLP_1F1B : MLP_STANDARD;
            break;
        case O_MODE:
            if (strcmp(optarg, "deterministic") && strcmp(optarg, "random") && strcmp(optarg, "learn")) {
                fprintf(stderr, "%s: --mode: \"%s\" is not learn, deterministic or random\n", prog, optarg);
                return -1;
            }
            o->mode = strcmp(optarg, "random") == 0  ? MLP_RANDOM
                      : strcmp(optarg, "learn") == 0 ? MLP_LEARN
                                                     : MLP_DETERMINISTIC;
            break;
        case O_DTYPE:
            if (tcomms_dtype_parse(optarg, &o->dtype) != TCOMMS_SUCCESS) {
                fprintf(stderr, "%s: --dtype: %s\n", prog, tcomms_last_error());
                return -1;
            }
            break;
        case O_HELP: usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
        if (target && parse_int(longopts[c - O_STEPS].name, optarg, target))
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
        return -1;
    }
    if (o->mode == MLP_LEARN) {
        o->steps = given_steps ? o->steps : LEARN_STEPS;
        o->batch = given_batch ? o->batch : LEARN_BATCH;
    }
    return 0;
}

/* Every step's summed loss to 17 digits, for diff; in learn mode the mean loss per sample every few steps and a
 * last line with what is left of the first step's loss (the figures are exact sums, so sharded and --reference
 * runs print the same). */
static void print_losses(const mlp_opts_t *o, const double *losses, const double *params)
{
    if (o->mode != MLP_LEARN) {
        for (int s = 0; s < o->steps; s++)
            printf("step %d loss %.17g\n", s, losses[s]);
        fflush(stdout);
        return;
    }
    double per = 1.0 / ((double)o->batch * o->microbatches);
    int every = o->steps > 20 ? o->steps / 15 : 1;
    printf("classifying points of %d clusters in %d dimensions with a %d-layer ReLU network; loss: mean of "
           "0.5*|out - onehot(class)|^2 over the %d new samples of each step\n", MLP_OUT, MLP_IN, MLP_UNITS,
           o->batch * o->microbatches);
    for (int s = 0; s < o->steps; s++)
        if (s % every == 0 || s == o->steps - 1)
            printf("step %4d loss %.6f\n", s, losses[s] * per);
    printf("last step's loss %.6f: %.1f%% of the first step's\n", losses[o->steps - 1] * per,
           100.0 * losses[o->steps - 1] / losses[0]);
    /* Samples far beyond any step's, so never trained on. */
    int whole = 1;
    for (size_t i = 0; i < mlp_total(2 * o->ep); i++)
        whole &= !isnan(params[i]);
    double loss, acc = whole ? mlp_full_accuracy(o, params, (uint64_t)1 << 40, HELD_OUT, &loss) : NAN;
    if (!isnan(acc))
        printf("held-out: accuracy %.1f%%, loss %.6f on %d new samples\n", 100.0 * acc, loss, HELD_OUT);
    else
        printf("held-out: not measured (this rank holds only its own experts; --ep 1 keeps them all here)\n");
    fflush(stdout);
}

int mlp_main(int argc, char **argv, const mlp_driver_t *d)
{
    mlp_opts_t o = mlp_opts_default();
    int reference = 0;
    prog = d->prog;
    /* The CUDA model (cuda_model.cu) has no learn mode: its default stays the deterministic one it is tested in. */
    if (d->device.type == TCOMMS_DEVICE_CPU)
        o.mode = MLP_LEARN;
    int rc = parse(argc, argv, &o, &reference);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (o.mode == MLP_LEARN && d->device.type != TCOMMS_DEVICE_CPU) {
        fprintf(stderr, "%s: --mode learn is the host program's (fsdp_mlp); use deterministic or random\n", prog);
        return 2;
    }
    char why[256] = "";
    if (d->available && d->available(why, sizeof why)) {
        fprintf(stderr, "%s: SKIP: %s\n", prog, why);
        return 77;
    }
    double *losses = calloc((size_t)(o.steps > 0 ? o.steps : 1), sizeof(double));
    double *params = o.mode == MLP_LEARN ? calloc(mlp_total(2 * (o.ep > 0 ? o.ep : 1)), sizeof(double)) : NULL;
    mlp_result_t res = {.losses = losses, .params = params};
    if (!losses || (o.mode == MLP_LEARN && !params)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        free(losses);
        free(params);
        return 1;
    }
    if (reference) {
        rc = d->train_reference(&o, &res);
        if (rc == 0)
            print_losses(&o, losses, params);
    } else {
        tcomms_comm_t *world = NULL;
        tcomms_comm_params_t p = {0};
        p.field_mask = TCOMMS_COMM_PARAM_DEVICE; /* the backend: TCOMMS_BACKEND, else the device's default */
        p.device = d->device;
        tcomms_status_t st = tcomms_comm_create(&p, &world);
        int wrank = -1;
        if (st != TCOMMS_SUCCESS) {
            snprintf(res.err, sizeof res.err, "tcomms_comm_create: %s: %s", tcomms_strerror(st),
                     tcomms_last_error());
            rc = -1;
        } else {
            tcomms_comm_rank(world, &wrank);
            rc = d->train_fsdp(world, &o, &res);
            if (rc == 0 && res.in_layout && wrank == o.offset)
                print_losses(&o, losses, params);
            tcomms_comm_destroy(world);
        }
        if (rc)
            fprintf(stderr, "%s: rank %d: %s\n", prog, wrank, res.err);
    }
    if (rc && reference)
        fprintf(stderr, "%s: %s\n", prog, res.err);
    free(losses);
    free(params);
    return rc ? 1 : 0;
}
