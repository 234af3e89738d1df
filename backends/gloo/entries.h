/* SPDX-License-Identifier: BSD-3-Clause */
/* The Gloo module's entries as C functions: module.cc defines them over the C++ shim (namespace tcg), table.c
 * lists them in the backend table with designated initialisers, which C++17 cannot write for this struct. */
#ifndef TCG_ENTRIES_H
#define TCG_ENTRIES_H

#include <tcomms/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

extern const char *const tcg_honoured_hints[];
tcomms_status_t tcg_query(const tcomms_core_t *core, char *reason, size_t len);
tcomms_status_t tcg_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm);
tcomms_status_t tcg_comm_destroy(void *bcomm);
tcomms_status_t tcg_comm_hint(void *bcomm, const char *key, char *buf, size_t len);
tcomms_status_t tcg_post(void *bcomm, const tcomms_coll_args_t *args, void **bwork);
tcomms_status_t tcg_work_test(void *bwork);
tcomms_status_t tcg_work_wait(void *bwork, uint32_t timeout_ms);
void tcg_work_free(void *bwork);
tcomms_status_t tcg_comm_abort(void *bcomm);

#ifdef __cplusplus
}
#endif
#endif
