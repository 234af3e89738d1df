/* SPDX-License-Identifier: BSD-3-Clause */
/* "fakenccl": a single-rank stand-in for a backend whose library reads environment variables over its config, as
 * NCCL reads NCCL_MIN_CTAS over ncclConfig_t.minCTAs. Its variables are FAKENCCL_<KEY>; it resolves every setting
 * through core->setting_resolve at creation, as the NCCL module does, and reports them through comm_setting, so
 * tests/test_settings.c can check the core's rule and the public call without a GPU. It runs no operation. */
#include <stdlib.h>
#include <string.h>

#include <tcomms/backend.h>

#define EXPORT __attribute__((visibility("default")))

static const struct {
    const char *key, *var, *dflt;
} keys[] = {
    {"min_ctas", "FAKENCCL_MIN_CTAS", "1"},
    {"max_ctas", "FAKENCCL_MAX_CTAS", "64"},
    {"cga_cluster_size", NULL, "4"}, /* no variable: a hint always holds */
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

typedef struct {
    const tcomms_core_t *core;
    tcomms_setting_t set[NKEYS];
} fake_comm_t;

static tcomms_status_t create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    if (args->size != 1)
        return args->core->error(TCOMMS_ERR_NOT_SUPPORTED, "fakenccl runs a single rank only");
    fake_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return args->core->error(TCOMMS_ERR_NO_MEMORY, "fakenccl: out of memory");
    c->core = args->core;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *hint = NULL;
        if (args->core->hints_get(args->hints, keys[i].key, &hint) != TCOMMS_SUCCESS)
            hint = NULL;
        tcomms_status_t st = args->core->setting_resolve(args->hints, "fakenccl", keys[i].key, hint, keys[i].var,
                                                         keys[i].dflt, &c->set[i]);
        if (st != TCOMMS_SUCCESS) {
            free(c);
            return st;
        }
    }
    *bcomm = c;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t destroy(void *bcomm)
{
    free(bcomm);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t setting(void *bcomm, const char *key, tcomms_setting_t *out)
{
    fake_comm_t *c = bcomm;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(key, keys[i].key) == 0) {
            *out = c->set[i];
            return TCOMMS_SUCCESS;
        }
    return TCOMMS_ERR_NOT_SUPPORTED;
}

static tcomms_status_t post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    (void)a;
    (void)bwork;
    return ((fake_comm_t *)bcomm)->core->error(TCOMMS_ERR_NOT_SUPPORTED, "fakenccl runs no operation");
}

static tcomms_status_t work_test(void *bwork)
{
    (void)bwork;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t work_wait(void *bwork, uint32_t timeout_ms)
{
    (void)bwork;
    (void)timeout_ms;
    return TCOMMS_SUCCESS;
}

static void work_free(void *bwork)
{
    (void)bwork;
}

static const char *const hints[] = {"min_ctas", "max_ctas", "cga_cluster_size", NULL};

EXPORT const tcomms_backend_t tcomms_backend_module = {
    .abi = TCOMMS_ABI_INIT(tcomms_backend_t),
    .name = "fakenccl",
    .description = "single-rank stand-in for a library whose variables override its config",
    .device_types = 1u << TCOMMS_DEVICE_CPU,
    .hints = hints,
    .comm_create = create,
    .comm_destroy = destroy,
    .post = post,
    .work_test = work_test,
    .work_wait = work_wait,
    .work_free = work_free,
    .comm_setting = setting,
};
