/* SPDX-License-Identifier: BSD-3-Clause */
/* What a child communicator must look like after a split, for the split suites (test_split, test_split_agree): its
 * rank and size, and collectives whose results depend on which parent ranks it holds and in which order. */
#ifndef TESTS_SPLIT_VERIFY_H
#define TESTS_SPLIT_VERIFY_H

#include <tcomms/tcomms.h>

/* Log "FAIL rank R, label: call returned S (message)" and return 1. */
int split_report(int rank, const char *label, const char *call, tcomms_status_t st);

/* Check `child` held by root rank `root_rank`, whose members are `members` (root ranks in child-rank order): its
 * rank and size, an all_reduce of the members' root ranks and an all_gather that shows their order. At most 8
 * members. Returns the number of failures (each logged). */
int split_verify_child(tcomms_comm_t *child, int root_rank, const int *members, int n, const char *label);

/* The members MPI's rule gives parent rank `rank` from every rank's colors[] and keys[]: the ranks of its color
 * ordered by (key, parent rank). Returns how many were written to members[] (0 for TCOMMS_SPLIT_NOCOLOR). */
int split_color_members(int rank, int size, const int *colors, const int *keys, int *members);

#endif
