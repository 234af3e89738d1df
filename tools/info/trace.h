/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-info --trace (trace.c). */
#ifndef TCOMMS_INFO_TRACE_H
#define TCOMMS_INFO_TRACE_H

/* Merge the TCOMMS_TRACE_DUMP files and print each communicator's first divergent operation. Returns the exit
 * status: 0 the records agree, 1 a divergence was found, 2 a file could not be read. */
int tc_trace_merge(int nfiles, char **files);

#endif
