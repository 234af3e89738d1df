/* SPDX-License-Identifier: BSD-3-Clause */
/* The root communicator a multi-rank test child starts from (the environment mrank_run sets names its rank, size
 * and rendezvous): one helper for the suites that need nothing else at creation. */
#ifndef TESTS_MRANK_WORLD_H
#define TESTS_MRANK_WORLD_H

#include <stdint.h>
#include <tcomms/tcomms.h>

/* A root on `backend` (NULL or "": the default selection) with operations bounded by `timeout_ms`, or NULL after logging "FAIL rank R: ..." with the
 * library's message. */
tcomms_comm_t *mrank_world(const char *backend, uint32_t timeout_ms, int rank);

#endif
