/* SPDX-License-Identifier: BSD-3-Clause */
/* What the fake CUDA module (tests/fake_backend.c built with -DFAKE_CUDA) records about the core's calls into it.
 * The module exports one `fake_calls` object; tests reach it with dlopen(RTLD_NOLOAD) + dlsym after the loader has
 * loaded the module. */
#ifndef TESTS_FAKE_CALLS_H
#define TESTS_FAKE_CALLS_H

#include <stdint.h>

/* post() fails at once for this count; a work posted with FAKE_FAIL_WAIT_COUNT fails when waited for. */
#define FAKE_FAIL_POST_COUNT 13
#define FAKE_FAIL_WAIT_COUNT 666

typedef struct fake_calls {
    int create, destroy, post, wait, synchronize, work_free, live_works;
    int group_start, group_end, nonmember;
    int mem_alloc, mem_free, mem_register, mem_deregister;
    int fail_group_end;          /* set by a test: group_end returns TCOMMS_ERR_REMOTE */
    int waits_at_group_end;      /* `wait` when group_end was last called */
    uint32_t last_flags;         /* args->flags of the last post */
    void *last_stream;           /* args->stream of the last post */
    int create_device_type, create_device_index, create_has_parent;
    int nonmember_rank, nonmember_size, nonmember_has_ranks, nonmember_has_parent;
    char nonmember_name[64], nonmember_max_ctas[16];
    unsigned last_reg_flags;
} fake_calls_t;

#endif
