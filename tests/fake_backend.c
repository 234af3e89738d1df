/* A test module built four ways (see tests/local.mk): a working single-rank backend ("fakeok"), one with a wrong
 * ABI version, one that declines, and one missing its symbol. It lets the loader and core routing be tested
 * without any real transport. */
#include <string.h>

#include <tcomms/backend.h>

#ifndef FAKE_ABI
#define FAKE_ABI TCOMMS_BACKEND_ABI_VERSION
#endif

static int done_marker;

static tcomms_status_t fake_query(const tcomms_core_t *core, char *reason, size_t len)
{
    (void)core;
#ifdef FAKE_DECLINE
    strncpy(reason, "fake backend declines: no such hardware", len - 1);
    reason[len - 1] = '\0';
    return TCOMMS_ERR_NOT_SUPPORTED;
#else
    (void)reason;
    (void)len;
    return TCOMMS_SUCCESS;
#endif
}

static tcomms_status_t fake_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    if (args->size != 1)
        return args->core->error(TCOMMS_ERR_NOT_SUPPORTED, "fake backend runs a single rank only");
    *bcomm = &done_marker;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_destroy(void *bcomm)
{
    (void)bcomm;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_hint(void *bcomm, const char *key, char *buf, size_t len)
{
    (void)bcomm;
    if (strcmp(key, "max_ctas") != 0)
        return TCOMMS_ERR_NOT_SUPPORTED;
    strncpy(buf, "7", len);
    return TCOMMS_SUCCESS;
}

/* One rank: every reduction is the identity, so recvbuf = sendbuf for all_reduce. */
static tcomms_status_t fake_post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    (void)bcomm;
    if (a->type == TCOMMS_COLL_ALL_REDUCE && !a->in_place)
        memcpy(a->recvbuf, a->sendbuf, a->count * (a->dtype == TCOMMS_FLOAT64 ? 8 : 4));
    *bwork = &done_marker;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_test(void *bwork)
{
    (void)bwork;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_wait(void *bwork, uint32_t timeout_ms)
{
    (void)bwork;
    (void)timeout_ms;
    return TCOMMS_SUCCESS;
}

static void fake_free(void *bwork)
{
    (void)bwork;
}

static const char *const fake_hints[] = {"max_ctas", NULL};

#ifndef FAKE_NO_SYMBOL
__attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_module = {
#else
__attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_other = {
#endif
    .abi_version = FAKE_ABI,
    .name = "fake",
    .description = "single-rank test backend",
    .device_types = 1u << TCOMMS_DEVICE_CPU,
    .hints = fake_hints,
    .query = fake_query,
    .comm_create = fake_create,
    .comm_destroy = fake_destroy,
    .comm_hint = fake_hint,
    .post = fake_post,
    .work_test = fake_test,
    .work_wait = fake_wait,
    .work_free = fake_free,
};
