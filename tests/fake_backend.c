/* SPDX-License-Identifier: BSD-3-Clause */
/* A test module built several ways (see tests/local.mk): a working single-rank CPU backend ("fakeok"); for the ABI
 * check, one of another major ("fakeabi"), one built against the previous minor ("fakeprev"), one of a newer minor
 * ("fakenewer"), one lacking a required entry ("fakenopost"); one that declines, one missing its symbol; "foo", an out-of-tree module of its own hint namespace
 * and a priority above the tree's modules; and single-rank CUDA backends: "fakecuda" with every optional ABI entry,
 * recording the core's calls in `fake_calls` (tests/fake_calls.h), and "fakecudabare" with none. They let the
 * loader and core routing, binding, groups and memory be tested without any transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcomms/backend.h>

#include "fake_calls.h"

#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR TCOMMS_BACKEND_ABI_MAJOR
#endif

#if defined(FAKE_PREV_MINOR)
/* What a module built against the header of the previous minor exports: the abi header says so, and the table
 * ends where that minor ended. The fields after it are still in this object (this file is compiled against the
 * current header), set so that a core reading past the declared size would be seen to: a priority above every
 * other module's wins the default selection in test_loader. */
_Static_assert(TCOMMS_BACKEND_ABI_MINOR == 2, "fakeprev describes 7.0, the minor before 7.1, the last that appended "
               "to tcomms_backend_t (7.2 appended to tcomms_core_t only): update it with the minor");
#define FAKE_ABI_MINOR 0u
#define FAKE_ABI_SIZE offsetof(tcomms_backend_t, priority)
#define FAKE_PRIORITY 1000
#elif defined(FAKE_NEWER_MINOR)
#define FAKE_ABI_MINOR (TCOMMS_BACKEND_ABI_MINOR + 1)
#elif defined(FAKE_FOO)
#define FAKE_PRIORITY 100 /* above the tree's modules (ucx and nccl 20, gloo 10): foo is every default */
#elif defined(FAKE_DECLINE)
#define FAKE_PRIORITY 200 /* first in the default order, so that the default selection must skip it */
#endif
#ifdef FAKE_NO_POST
/* A table without a required entry: fake_post stays unused. */
#pragma GCC diagnostic ignored "-Wunused-function"
#define FAKE_POST NULL
#else
#define FAKE_POST fake_post
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR TCOMMS_BACKEND_ABI_MINOR
#endif
#ifndef FAKE_ABI_SIZE
#define FAKE_ABI_SIZE sizeof(tcomms_backend_t)
#endif
#ifndef FAKE_PRIORITY
#define FAKE_PRIORITY 0
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
    /* What a module may check of the core it got: its major, and that the entries it uses exist. */
    if (core->abi.major != TCOMMS_BACKEND_ABI_MAJOR || !TCOMMS_ABI_HAS(core, tcomms_core_t, op_name)) {
        snprintf(reason, len, "fake backend declines: the core's table is ABI %u.%u of %u bytes", core->abi.major,
                 core->abi.minor, core->abi.size);
        return TCOMMS_ERR_ABI;
    }
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

#ifdef FAKE_FOO
/* foo checks its own hints, as a real module does: the core let "foo.*" through only because this module exists.
 * foo.color is kept and reported by comm_hint; any other foo.* key is refused at creation. */
typedef struct foo_comm {
    char color[64];
} foo_comm_t;

static tcomms_status_t foo_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    const tcomms_core_t *core = args->core;
    foo_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return core->error(TCOMMS_ERR_NO_MEMORY, "foo: out of memory");
    snprintf(c->color, sizeof(c->color), "none");
    for (size_t i = 0; i < core->hints_count(args->hints); i++) {
        const char *key, *value;
        if (core->hints_entry(args->hints, i, &key, &value) != TCOMMS_SUCCESS || strncmp(key, "foo.", 4) != 0)
            continue;
        if (strcmp(key, "foo.color") != 0) {
            free(c);
            return core->error(TCOMMS_ERR_INVALID_ARG, "foo: unknown hint '%s' (foo honours foo.color)", key);
        }
        snprintf(c->color, sizeof(c->color), "%s", value);
    }
    *bcomm = c;
    return TCOMMS_SUCCESS;
}
#endif

static tcomms_status_t fake_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    if (args->size != 1)
        return args->core->error(TCOMMS_ERR_NOT_SUPPORTED, "fake backend runs a single rank only");
#ifdef FAKE_FOO
    return foo_create(args, bcomm);
#endif
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
#ifdef FAKE_FOO
    free(bcomm);
#else
    (void)bcomm;
#endif
    COUNT(destroy);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t fake_hint(void *bcomm, const char *key, char *buf, size_t len)
{
#ifdef FAKE_FOO
    if (strcmp(key, "foo.color") == 0) {
        snprintf(buf, len, "%s", ((foo_comm_t *)bcomm)->color);
        return TCOMMS_SUCCESS;
    }
#else
    (void)bcomm;
#endif
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

#ifdef FAKE_FOO
static const char *const fake_hints[] = {"max_ctas", "foo.color", NULL};
#else
static const char *const fake_hints[] = {"max_ctas", NULL};
#endif

#if defined(FAKE_FOO)
#define FAKE_NAME "foo"
#elif defined(FAKE_CUDA) && defined(FAKE_BARE)
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
    .abi = {FAKE_ABI_MAJOR, FAKE_ABI_MINOR, (uint32_t)FAKE_ABI_SIZE},
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
    .post = FAKE_POST,
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
    .priority = FAKE_PRIORITY,
};
