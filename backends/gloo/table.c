/* SPDX-License-Identifier: BSD-3-Clause */
/* The Gloo backend's one exported symbol, tcomms_backend_module. It is C so that the table is filled by field
 * name, as include/tcomms/backend.h asks: entries are appended over ABI minors, and C++17 has no designated
 * initialisers for it. The entries themselves are in module.cc (backends/gloo/entries.h). */
#include "entries.h"

__attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_module = {
    .abi = TCOMMS_ABI_INIT(tcomms_backend_t),
    .name = "gloo",
    .description = "Gloo collectives and point-to-point over TCP (CPU buffers)",
    .device_types = 1u << TCOMMS_DEVICE_CPU,
    .hints = tcg_honoured_hints,
    .query = tcg_query,
    .comm_create = tcg_comm_create,
    .comm_destroy = tcg_comm_destroy,
    .comm_hint = tcg_comm_hint,
    .post = tcg_post,
    .work_test = tcg_work_test,
    .work_wait = tcg_work_wait,
    .work_free = tcg_work_free,
    /* Left NULL, the core's fallbacks: work_synchronize (work_wait already blocks the host),
     * comm_split_nonmember (non-members have nothing to do), group_start/end (posts never block, so a group needs
     * nothing of Gloo), mem_* (the core's page-aligned host memory, nothing to register). */
    .comm_abort = tcg_comm_abort,
    .priority = 10, /* below ucx (20): slower for every collective and size measured (docs/perf.md) */
};
