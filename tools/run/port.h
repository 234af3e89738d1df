/* SPDX-License-Identifier: BSD-3-Clause */
/* Picking a TCP port for rank 0's store server: shared by tcomms-run and the multi-rank test harness. */
#ifndef TOOLS_RUN_PORT_H
#define TOOLS_RUN_PORT_H

/* A port free right now on 127.0.0.1, chosen at random below the kernel's ephemeral range; -1 if none was found. */
int run_free_port(void);

#endif
