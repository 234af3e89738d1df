/* SPDX-License-Identifier: BSD-3-Clause */
/* Which ranks share a host, learnt from the rendezvous rather than from the launcher: a root communicator gathers
 * every rank's host id through the store once; splits restrict the parent's table to their members. */
#ifndef TC_TOPO_H
#define TC_TOPO_H

#include <stddef.h>

#include <tcomms/tcomms.h>

struct tcomms_comm;

/* What the launcher (or the caller's params) claimed, for the cross-check: -1 where it said nothing. */
typedef struct tc_topo_claim {
    int local_rank, local_size;
    const char *from; /* "TCOMMS_LOCAL_RANK/TCOMMS_LOCAL_SIZE", "params", ... */
} tc_topo_claim_t;

/* This process's host id: TCOMMS_HOST_ID when set (for tests and containers that share a kernel but not memory),
 * else the host name and the kernel's boot id (/proc/sys/kernel/random/boot_id), "name/boot-id". */
void tc_topo_host_id(char *buf, size_t len);

/* Fill comm->hosts, local_rank and local_size for a root whose store is open: one allgather of host ids over the
 * store (none for a single rank). Warns where `claim` disagrees; the rendezvous' answer is kept. */
tcomms_status_t tc_topo_root(struct tcomms_comm *comm, const tc_topo_claim_t *claim);

/* The same for a split's member `child` (rank and size set) over `members` (parent ranks in child order), from the
 * parent's table: no communication. */
tcomms_status_t tc_topo_split(struct tcomms_comm *child, const struct tcomms_comm *parent, const int *members);

#endif
