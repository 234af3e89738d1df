/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-perf: an nccl-tests compatible benchmark of every tcomms collective on any backend. main() parses the
 * command line (args.c), creates the communicator, runs the sweep (bench.c) and writes the report (report.c).
 * An ordinary tcomms program: start one per rank with tcomms-run, mpirun, srun or torchrun. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tcomms/tcomms.h>

#include "args.h"
#include "bench.h"
#include "cuda.h"
#include "mem.h"
#include "report.h"

static int create_comm(const perf_args_t *a, tcomms_comm_t **comm)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_DEVICE;
    p.device = a->device;
    if (a->backend != NULL) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = a->backend;
    }
    tcomms_status_t st = tcomms_comm_create(&p, comm);
    if (st == TCOMMS_SUCCESS)
        return 0;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", tcomms_last_error());
    fprintf(stderr, "tcomms-perf: cannot create a communicator (backend %s, device %s): %s: %s\n",
            a->backend ? a->backend : "default", tcomms_device_type_name(a->device.type), tcomms_strerror(st),
            detail);
    return -1;
}

#define DEV_LINE 256

/* nccl-tests' "#  Rank" line of every rank, in rank order, gathered on every rank (rank 0 prints them). The
 * bracket holds the GPU's PCI address, zeros on the CPU; where nccl-tests names the GPU, the line says which tcomms
 * backend and device ran. NULL after a message on stderr. */
static char *device_lines(perf_mem_t *mem, tcomms_comm_t *comm, int rank, int nranks, const char *backend)
{
    char line[DEV_LINE] = "", host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    int dev = mem->type == TCOMMS_DEVICE_CUDA ? mem->gpu : 0, domain = 0, bus = 0, device = 0;
    if (mem->type == TCOMMS_DEVICE_CUDA && perf_cuda_pci(dev, &domain, &bus, &device) != 0)
        domain = bus = device = 0; /* the address is only shown */
    snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] tcomms %s %s\n",
             rank, 0, (int)getpid(), host, dev, (unsigned)domain, (unsigned)bus, (unsigned)device, backend,
             mem->name);
    perf_buf_t s = {0}, r = {0};
    char *all = calloc((size_t)nranks, DEV_LINE);
    int ok = all != NULL && perf_buf_alloc(mem, DEV_LINE, 0, &s) == 0 &&
             perf_buf_alloc(mem, (size_t)nranks * DEV_LINE, 0, &r) == 0 &&
             perf_mem_upload(mem, s.p, line, DEV_LINE) == 0 &&
             tcomms_all_gather(comm, s.p, r.p, DEV_LINE, TCOMMS_INT8, &mem->opts, NULL) == TCOMMS_SUCCESS &&
             perf_mem_download(mem, all, r.p, (size_t)nranks * DEV_LINE) == 0;
    perf_buf_free(mem, &s);
    perf_buf_free(mem, &r);
    if (!ok) {
        fprintf(stderr, "tcomms-perf: rank %d: cannot gather the ranks' device lines: %s\n", rank,
                tcomms_last_error());
        free(all);
        return NULL;
    }
    /* The lines one after another, for the report. */
    size_t n = 0;
    for (int k = 0; k < nranks; k++) {
        char *l = all + (size_t)k * DEV_LINE;
        l[DEV_LINE - 1] = '\0';
        size_t len = strlen(l);
        memmove(all + n, l, len);
        n += len;
    }
    all[n] = '\0';
    return all;
}

int main(int argc, char **argv)
{
    perf_args_t a;
    int status = perf_args_parse(argc, argv, &a);
    if (status >= 0)
        return status;
    const char *device = tcomms_device_type_name(a.device.type);
    perf_mem_t mem;
    if (perf_mem_open(&mem, &a) != 0) /* before any communicator: a missing GPU is said as such */
        return 1;
    tcomms_comm_t *comm;
    if (create_comm(&a, &comm) != 0)
        return 1;
    int rank = 0, nranks = 1;
    const char *backend = "unknown";
    tcomms_comm_rank(comm, &rank);
    tcomms_comm_size(comm, &nranks);
    if (tcomms_comm_backend(comm, a.device.type, &backend) != TCOMMS_SUCCESS && a.device.type != TCOMMS_DEVICE_CPU) {
        fprintf(stderr, "tcomms-perf: --device %s: no backend of this communicator serves %s buffers: %s (try -B nccl)\n",
                device, device, tcomms_last_error());
        tcomms_comm_destroy(comm);
        return 1;
    }
    if (a.root >= nranks) {
        if (rank == 0)
            fprintf(stderr, "tcomms-perf: -r/--root %d is out of range: the job has %d rank(s)\n", a.root, nranks);
        tcomms_comm_destroy(comm);
        return 2;
    }
    if (perf_mem_bind(&mem, comm, rank) != 0) {
        tcomms_comm_destroy(comm);
        return 1;
    }
    char *devices = device_lines(&mem, comm, rank, nranks, backend);
    if (devices == NULL) {
        tcomms_comm_destroy(comm);
        return 1;
    }
    perf_report_t report;
    perf_report_init(&report, rank == 0, &a, backend, device, a.label ? a.label : backend, nranks, devices);
    long long wrong = 0;
    tcomms_status_t st = perf_bench_run(&a, comm, &mem, &report, &wrong);
    int json_failed = st == TCOMMS_SUCCESS && a.json != NULL && perf_report_json(&report, a.json) != 0;
    json_failed |= st == TCOMMS_SUCCESS && perf_report_ncjson(&report) != 0;
    int bw_failed = report.bw_failed;
    perf_report_free(&report);
    free(devices);
    if (st == TCOMMS_SUCCESS && wrong > 0 && rank == 0)
        fprintf(stderr, "tcomms-perf: %lld wrong element(s)\n", wrong);
    fflush(stdout);
    /* Leave together: a launcher stops every rank once one exits non-zero, which must not cut rank 0's output. */
    if (st == TCOMMS_SUCCESS && tcomms_barrier(comm, &mem.opts, NULL) == TCOMMS_SUCCESS)
        perf_mem_sync(&mem);
    tcomms_comm_destroy(comm);
    perf_mem_close(&mem);
    return st != TCOMMS_SUCCESS || json_failed || bw_failed || wrong > 0 ? 1 : 0;
}
