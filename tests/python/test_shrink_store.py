# SPDX-License-Identifier: BSD-3-Clause
# A job that survives its rank 0: the root is made with a store of its own (a torch TCPStore served by the last
# rank, through tcomms.Comm(store=...)), rank 0 dies after an all_reduce, and the survivors' next all_reduce fails;
# they shrink without rank 0 and go on, checking all_reduce and all_gather on the survivors against plain loops.
# With the built-in store, served in rank 0's process, that shrink fails instead (tests/test_shrink.c). Rank 0
# prints its RESULT line, then leaves with status 0 (tcomms-run lets the others run on).
# ranks: 3 4
# backends: ucx gloo
# needs: numpy torch
# timeout: 120
import datetime
import os
import sys
import time

import numpy as np
import torch.distributed as dist

import harness
import tcomms
from harness import case

RANK, SIZE = harness.RANK, harness.SIZE
# Creation and the survivors' calls get a loaded CI host's margin; only the call that meets the dead rank waits the
# short timeout, which is what it takes to notice the death.
TIMEOUT_S = 30
DEATH_TIMEOUT_S = 3
HOST = SIZE - 1  # serves the store


@case
def survivors_of_rank_0():
    assert SIZE >= 3, "run this case on 3 ranks or more"
    store = dist.TCPStore(os.environ["TCOMMS_MASTER_ADDR"], int(os.environ["TCOMMS_MASTER_PORT"]), SIZE,
                          RANK == HOST, datetime.timedelta(seconds=60))
    comm = tcomms.Comm(backend=harness.BACKEND or None, store=store, timeout=TIMEOUT_S)
    x = np.ones(1)
    comm.all_reduce(x)
    assert x[0] == SIZE, "all_reduce before the death: %r" % x
    if RANK == 0:
        print("RESULT survivors_of_rank_0 ok", flush=True)
        sys.stdout.flush()
        time.sleep(0.2)
        os._exit(0)
    try:
        comm.all_reduce(x, timeout=DEATH_TIMEOUT_S)
        raise AssertionError("all_reduce after rank 0 died succeeded")
    except tcomms.Error as e:
        print("# rank %d: all_reduce after rank 0 died: %s" % (RANK, str(e).splitlines()[0][:200]), flush=True)
    t0 = time.monotonic()
    child = comm.shrink([0], name="survivors")
    print("# rank %d: shrink without rank 0 took %.2f s" % (RANK, time.monotonic() - t0), flush=True)
    survivors = list(range(1, SIZE))
    assert (child.rank, child.size) == (RANK - 1, SIZE - 1), repr(child)
    y = np.arange(100, dtype=np.float64) * (RANK + 1)
    child.all_reduce(y)
    want = np.array([sum(i * (r + 1.0) for r in survivors) for i in range(100)])
    assert np.array_equal(y, want), "all_reduce on the survivors: %r, expected %r" % (y[:4], want[:4])
    got = np.zeros(SIZE - 1, np.int64)
    child.all_gather(np.array([RANK], np.int64), got)
    assert list(got) == survivors, "all_gather on the survivors: %r" % list(got)
    # the store's host leaves last: the others may still read it
    child.barrier()
    child.destroy()
    comm.destroy()


harness.main()
