/* SPDX-License-Identifier: BSD-3-Clause */
/* A test module built several ways (see tests/local.mk): a working single-rank CPU backend ("fakeok"), one with a
 * wrong ABI version, one that declines, one missing its symbol, and single-rank CUDA backends: "fakecuda" with every
 * optional ABI entry, recording the core's calls in `fake_calls` (tests/fake_calls.h), and "fakecudabare" with
 * none. They let the loader and core routing, binding, groups and memory be tested without any transport. */
#include <stdlib.h>
#include <string.h>

#include <tcomms/backend.h>

#include "fake_calls.h"

#ifndef FAKE_ABI
#define FAKE_ABI TCOMMS_BACKEND_ABI_VERSION
#endif

#define EXPORT __attribute__((visibility("default")))

static int done_marker;

#ifdef FAKE_CUDA
EXPORT fake_calls_t fake_calls;
#define COUNT(field) (fake_calls.field++)
#else
#define COUNT(field) ((void)0)
#endif

static const tcomms_core_t *fake_core; /* kept by query() */

static tcomms_status_t fake_query(const tcomms_core_t *core, char *reason, size_t len)
{
    fake_core = core;
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
#ifdef FAKE_CUDA
    COUNT(create);
    fake_calls.create_device_type = (int)args->device.type;
    fake_calls.create_device_index = args->device.index;
    fake_calls.create_has_parent = args->parent != NULL;
#endif
    *bcomm = &done_marker;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_destroy(void *bcomm)
{
    (void)bcomm;
    COUNT(destroy);
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

/* One rank: every reduction is the identity and a gather takes this rank's block, so recvbuf = sendbuf. */
static void copy_if_all_reduce(const tcomms_coll_args_t *a)
{
    if ((a->type == TCOMMS_COLL_ALL_REDUCE || a->type == TCOMMS_COLL_ALL_GATHER) && !a->in_place)
        memcpy(a->recvbuf, a->sendbuf, a->count * fake_core->dtype_size(a->dtype));
}

#ifndef FAKE_CUDA
/* One rank: every reduction is the identity, so recvbuf = sendbuf for all_reduce. */
static tcomms_status_t fake_post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    (void)bcomm;
    copy_if_all_reduce(a);
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
#else
/* Works are real allocations here, so a leak shows in live_works (and under ASan). */
typedef struct fake_work {
    tcomms_status_t status;
} fake_work_t;

static tcomms_status_t fake_post(void *bcomm, const tcomms_coll_args_t *a, void **bwork)
{
    (void)bcomm;
    COUNT(post);
    fake_calls.last_flags = a->flags;
    fake_calls.last_stream = a->stream;
    if (a->count == FAKE_FAIL_POST_COUNT)
        return TCOMMS_ERR_NOT_SUPPORTED;
    fake_work_t *w = malloc(sizeof(*w));
    if (w == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    w->status = a->count == FAKE_FAIL_WAIT_COUNT ? TCOMMS_ERR_REMOTE : TCOMMS_SUCCESS;
    copy_if_all_reduce(a);
    COUNT(live_works);
    *bwork = w;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_test(void *bwork)
{
    return ((fake_work_t *)bwork)->status;
}

static tcomms_status_t fake_wait(void *bwork, uint32_t timeout_ms)
{
    (void)timeout_ms;
    COUNT(wait);
    return ((fake_work_t *)bwork)->status;
}

static void fake_free(void *bwork)
{
    COUNT(work_free);
    fake_calls.live_works--;
    free(bwork);
}
#endif

#if defined(FAKE_CUDA) && !defined(FAKE_BARE)
static tcomms_status_t fake_synchronize(void *bwork, uint32_t timeout_ms)
{
    (void)timeout_ms;
    COUNT(synchronize);
    return ((fake_work_t *)bwork)->status;
}

static tcomms_status_t fake_split_nonmember(void *parent, const tcomms_backend_comm_args_t *args)
{
    COUNT(nonmember);
    fake_calls.nonmember_rank = args->rank;
    fake_calls.nonmember_size = args->size;
    fake_calls.nonmember_has_ranks = args->parent_ranks != NULL;
    fake_calls.nonmember_has_parent = parent != NULL && args->parent == parent;
    strncpy(fake_calls.nonmember_name, args->name, sizeof(fake_calls.nonmember_name) - 1);
    const char *v = NULL;
    if (args->core->hints_get(args->hints, "max_ctas", &v) != TCOMMS_SUCCESS)
        v = "";
    strncpy(fake_calls.nonmember_max_ctas, v, sizeof(fake_calls.nonmember_max_ctas) - 1);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_group_start(void)
{
    COUNT(group_start);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_group_end(void)
{
    COUNT(group_end);
    fake_calls.waits_at_group_end = fake_calls.wait;
    return fake_calls.fail_group_end ? TCOMMS_ERR_REMOTE : TCOMMS_SUCCESS;
}

static tcomms_status_t fake_mem_alloc(void *bcomm, size_t bytes, void **ptr)
{
    (void)bcomm;
    COUNT(mem_alloc);
    *ptr = malloc(bytes);
    return *ptr ? TCOMMS_SUCCESS : TCOMMS_ERR_NO_MEMORY;
}

static tcomms_status_t fake_mem_free(void *bcomm, void *ptr)
{
    (void)bcomm;
    COUNT(mem_free);
    free(ptr);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_mem_register(void *bcomm, void *buf, size_t bytes, unsigned flags, void **handle)
{
    (void)bcomm;
    (void)buf;
    (void)bytes;
    COUNT(mem_register);
    fake_calls.last_reg_flags = flags;
    *handle = malloc(1);
    return *handle ? TCOMMS_SUCCESS : TCOMMS_ERR_NO_MEMORY;
}

static tcomms_status_t fake_mem_deregister(void *bcomm, void *handle)
{
    (void)bcomm;
    COUNT(mem_deregister);
    free(handle);
    return TCOMMS_SUCCESS;
}
#endif

static const char *const fake_hints[] = {"max_ctas", NULL};

#if defined(FAKE_CUDA) && defined(FAKE_BARE)
#define FAKE_NAME "fakecudabare"
#elif defined(FAKE_CUDA)
#define FAKE_NAME "fakecuda"
#else
#define FAKE_NAME "fake"
#endif

#ifndef FAKE_NO_SYMBOL
EXPORT const tcomms_backend_t tcomms_backend_module = {
#else
EXPORT const tcomms_backend_t tcomms_backend_other = {
#endif
    .abi_version = FAKE_ABI,
    .name = FAKE_NAME,
    .description = "single-rank test backend",
#ifdef FAKE_CUDA
    .device_types = 1u << TCOMMS_DEVICE_CUDA,
#else
    .device_types = 1u << TCOMMS_DEVICE_CPU,
#endif
    .hints = fake_hints,
    .query = fake_query,
    .comm_create = fake_create,
    .comm_destroy = fake_destroy,
    .comm_hint = fake_hint,
    .post = fake_post,
    .work_test = fake_test,
    .work_wait = fake_wait,
    .work_free = fake_free,
#if defined(FAKE_CUDA) && !defined(FAKE_BARE)
    .work_synchronize = fake_synchronize,
    .comm_split_nonmember = fake_split_nonmember,
    .group_start = fake_group_start,
    .group_end = fake_group_end,
    .mem_alloc = fake_mem_alloc,
    .mem_free = fake_mem_free,
    .mem_register = fake_mem_register,
    .mem_deregister = fake_mem_deregister,
#endif
};
