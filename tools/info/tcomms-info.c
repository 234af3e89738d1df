/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-info: what this installation can do: version, where modules are searched, which load, which decline and
 * why, the ABI, device types and priority of each, the hints each honours, and the default per device type that
 * those priorities give. Exit status 0 when at least one backend loads. With --trace, it merges the ranks'
 * TCOMMS_TRACE_DUMP files instead (trace.c). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcomms/tcomms.h>

#include "loader.h"
#include "trace.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tcomms-info [-h|--help] [--version]\n"
                 "       tcomms-info --trace FILE...\n"
                 "Lists the backend modules found in TCOMMS_BACKEND_PATH, the build tree (when run from it) and the\n"
                 "install directory, whether each loads (and why not), its ABI, the device types it serves, its\n"
                 "priority for the default selection and the hints it honours. With --trace, merges the files the\n"
                 "ranks wrote under TCOMMS_TRACE_DUMP and prints each communicator's first operation where the\n"
                 "ranks diverge (exit 0: they agree, 1: a divergence, 2: a file could not be read).\n");
}

static void print_module(const tc_module_info_t *m)
{
    printf("  %-8s %s\n", m->name, m->status == TCOMMS_SUCCESS ? "available" : "unavailable");
    printf("    file:    %s\n", m->path[0] ? m->path : "(none)");
    if (m->backend == NULL)
        printf("    reason:  %s\n", m->reason);
    if (m->table == NULL)
        return;
    /* A module that declines still has a table: what it would serve is worth seeing. */
    printf("    ABI:     %u.%u\n", m->table->abi.major, m->table->abi.minor);
    printf("    about:   %s\n", m->table->description ? m->table->description : "");
    printf("    devices:");
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++)
        if (m->table->device_types & (1u << t))
            printf(" %s", tcomms_device_type_name((tcomms_device_type_t)t));
    printf("\n    priority: %d\n", (int)m->table->priority);
    if (m->backend == NULL)
        return;
    printf("    hints:  ");
    int any = 0;
    for (const char *const *h = m->backend->hints; h != NULL && *h != NULL; h++, any = 1)
        printf(" %s", *h);
    printf("%s\n", any ? "" : " (none: every common hint reads \"not applicable\")");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--trace") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tcomms-info: --trace needs the files TCOMMS_TRACE_DUMP wrote\n");
                return 2;
            }
            return tc_trace_merge(argc - i - 1, argv + i + 1);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("tcomms-info (tcomms) %s\n", PACKAGE_VERSION); /* the tool's; the library's is listed below */
            return 0;
        }
        fprintf(stderr, "tcomms-info: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    const tc_module_info_t *mods;
    size_t n;
    tc_backend_list(&mods, &n);
    printf("tcomms %s\n", tcomms_version());
    char *search = tc_backend_search_path();
    printf("module search path: %s\n", search ? search : "(out of memory)");
    free(search);
    printf("backends (%zu found):\n", n);
    int available = 0;
    for (size_t i = 0; i < n; i++) {
        print_module(&mods[i]);
        available += mods[i].status == TCOMMS_SUCCESS;
    }
    if (n == 0)
        printf("  (no tcomms_<name>.so module in the search path)\n");
    /* The order tc_backend_default tries, among the modules that loaded here. */
    printf("default selection (by priority; override with TCOMMS_BACKEND):");
    size_t *order = n ? malloc(n * sizeof(*order)) : NULL;
    for (int t = 0; t < TCOMMS_DEVICE_TYPE_COUNT; t++) {
        size_t k = order ? tc_backend_order(mods, n, (tcomms_device_type_t)t, 1, order) : 0;
        printf("%s %s ->", t ? ";" : "", tcomms_device_type_name((tcomms_device_type_t)t));
        for (size_t j = 0; j < k; j++)
            printf("%s %s", j ? "," : "", mods[order[j]].name);
        printf("%s", k ? "" : " (none)");
    }
    printf("\n");
    free(order);
    return available > 0 ? 0 : 1;
}
