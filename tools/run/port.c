/* SPDX-License-Identifier: BSD-3-Clause */
/* A free port for rank 0's store server, below the kernel's ephemeral range. A port the kernel hands out for
 * bind(0) may be handed out again (to a Gloo or NCCL listener, or as a connection's local port) before rank 0
 * binds it, which made creation fail with "Address already in use" now and then when runs follow each other.
 * Ports below the range are taken only by explicit binds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h" /* lib/util/clock.h */
#include "port.h"

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int run_free_port(void)
{
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    int lo = 10000, span = low - lo;
    if (span < 1000)
        lo = 1024, span = low - lo;
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)tc_now_ns();
    for (int tries = 0; tries < 200 && span > 0; tries++) {
        seed = seed * 1103515245u + 12345u;
        int port = lo + (int)((seed >> 8) % (unsigned)span);
        if (port_free(port))
            return port;
    }
    return -1;
}
