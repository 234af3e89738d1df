/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal side of the FSDP layout and communicator collection (layout.c, groups.c), for the runtime: checking a
 * tcomms_fsdp_groups_t against a layout on every member, and the layout fields that enter its configuration hash. */
#ifndef TC_FSDP_GROUPS_H
#define TC_FSDP_GROUPS_H

#include <stdint.h>
#include <tcomms/fsdp.h>

/* Collective over g->members: checks every non-NULL communicator of `g` against `layout` (members, their
 * order, the *_ag duplicates equal to their shard communicator). INVALID_ARG naming the communicator field
 * and the first wrong member on every rank, never a hang, even when one rank's struct differs. A struct whose
 * `members` itself is wrong on some rank cannot be told apart from a slow peer: that ends in the communicators'
 * timeout. */
tcomms_status_t tc_fsdp_groups_check(const tcomms_fsdp_groups_t *g, const tcomms_fsdp_layout_t *layout);

/* The layout's outer_dp and rank_offset (for the runtime's configuration hash and checks). */
int tc_fsdp_layout_outer(const tcomms_fsdp_layout_t *layout);
int tc_fsdp_layout_offset(const tcomms_fsdp_layout_t *layout);

/* A stable 64-bit hash of the layout's order string, sizes and offset. */
uint64_t tc_fsdp_layout_hash(const tcomms_fsdp_layout_t *layout);

#endif
