/* SPDX-License-Identifier: BSD-3-Clause */
/* The call check (TCOMMS_CHECK_CALLS): every rank describes each collective before posting it, and rank 0
 * compares the descriptions (call_check.c). */
#ifndef TC_CALL_CHECK_H
#define TC_CALL_CHECK_H

#include "comm.h"

/* Agree on `a` (validated, about to run on the `device` slot) with every rank of `comm`: TCOMMS_SUCCESS, or the
 * same TCOMMS_ERR_MISMATCH on every rank with a message naming the ranks and what differs, or TCOMMS_ERR_TIMEOUT
 * when a rank does not reach the call. Point-to-point calls pass unchecked. */
tcomms_status_t tc_check_call(tcomms_comm_t *comm, const tcomms_coll_args_t *a, tcomms_device_type_t device);

#endif
