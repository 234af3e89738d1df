# SPDX-License-Identifier: BSD-3-Clause
# Errors through the tcomms torch.distributed backend: a call whose tensors do not fit raises on the calling rank
# alone (the others never enter it) and the group goes on; a peer that dies while the others are in an all_reduce
# makes them raise within the group's timeout (+2 s), and the group raises on every later use, without hanging.
# The dying rank prints its RESULT lines, then leaves with status 0 (tcomms-run lets the others run on), so the job's
# exit status is the survivors'. A peer must die: 2 ranks at least.
# ranks: 2 3 4
# backends: ucx gloo
# needs: numpy torch
# timeout: 120
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import harness
from harness import case
from torch_util import RANK, SIZE, check, init, raises, reduce_ref, tensor, values

TIMEOUT_S = 5
init("tcomms", timeout=datetime.timedelta(seconds=TIMEOUT_S))
LAST = SIZE - 1


def group_still_works(what):
    dist.barrier()
    t = tensor(RANK, 7, torch.float32)
    dist.all_reduce(t)
    check(t, reduce_ref("sum", 7, torch.float32, range(SIZE)), torch.float32, "all_reduce after " + what)
    out = torch.zeros(SIZE * 3, dtype=torch.int64)
    dist.all_gather_into_tensor(out, tensor(RANK, 3, torch.int64))
    check(out, torch.cat([values(r, 3, torch.int64) for r in range(SIZE)]), torch.int64, "all_gather after " + what)


def on_last_rank(what, fn, *words):
    """fn, called on the last rank only, raises (naming `words`); then every rank uses the group."""
    if RANK == LAST:
        raises(fn, *words)
    group_still_works(what)


@case
def wrong_all_gather_sizes():
    n = 7
    on_last_rank("a short all_gather_into_tensor output",
                 lambda: dist.all_gather_into_tensor(torch.zeros(SIZE * n - 1), torch.ones(n)), "output")
    on_last_rank("a long all_gather_into_tensor output",
                 lambda: dist.all_gather_into_tensor(torch.zeros(SIZE * n + 1), torch.ones(n)), "output")
    on_last_rank("an all_gather with one output too many",
                 lambda: dist.all_gather([torch.zeros(n) for _ in range(SIZE + 1)], torch.ones(n)))
    # outputs may differ in size (uneven all_gather), but this rank's own must match its input
    on_last_rank("an all_gather whose own output is of another size",
                 lambda: dist.all_gather([torch.zeros(n + (r == RANK)) for r in range(SIZE)], torch.ones(n)))
    on_last_rank("an all_gather output of another dtype",
                 lambda: dist.all_gather([torch.zeros(n, dtype=torch.float64 if r == 0 else torch.float32)
                                          for r in range(SIZE)], torch.ones(n)))


@case
def wrong_reduce_scatter_sizes():
    n = 5
    on_last_rank("a short reduce_scatter_tensor input",
                 lambda: dist.reduce_scatter_tensor(torch.zeros(n), torch.ones(SIZE * n - 1)), "input")
    on_last_rank("a reduce_scatter with one input missing",
                 lambda: dist.reduce_scatter(torch.zeros(n), [torch.ones(n) for _ in range(SIZE - 1)]))


@case
def wrong_all_to_all_sizes():
    on_last_rank("split sizes that do not sum to the rows",
                 lambda: dist.all_to_all_single(torch.zeros(SIZE + 1), torch.ones(SIZE + 1),
                                                output_split_sizes=[1] * SIZE, input_split_sizes=[1] * SIZE),
                 "split")
    on_last_rank("one split size missing",
                 lambda: dist.all_to_all_single(torch.zeros(SIZE), torch.ones(SIZE),
                                                output_split_sizes=[1] * (SIZE - 1), input_split_sizes=[1] * SIZE))
    on_last_rank("even all_to_all_single, output and input of different sizes",
                 lambda: dist.all_to_all_single(torch.zeros(2 * SIZE), torch.ones(SIZE)))
    on_last_rank("an all_to_all with one tensor too few",
                 lambda: dist.all_to_all([torch.zeros(1) for _ in range(SIZE)],
                                         [torch.ones(1) for _ in range(SIZE - 1)]))


@case
def wrong_tensors():
    # (complex tensors are no error: torch reduces their real view)
    on_last_rank("an all_reduce of int16", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), "int16")
    on_last_rank("a broadcast of int16", lambda: dist.broadcast(torch.ones(3, dtype=torch.int16), src=0), "int16")
    on_last_rank("an all_reduce of a transposed tensor", lambda: dist.all_reduce(torch.ones(4, 3).t()),
                 "contiguous")
    on_last_rank("a scatter root with one input missing",
                 lambda: dist.scatter(torch.zeros(2), [torch.ones(2)] * (SIZE - 1), src=LAST))
    on_last_rank("a send with a tag", lambda: dist.send(torch.ones(2), dst=0, tag=3), "tag")


@case
def peer_killed():
    """The last rank dies while the others are in an all_reduce. What happens (both CPU modules): the survivors'
    all_reduce raises a DistBackendError/RuntimeError (tcomms RemoteFailure or Timeout) within the timeout; every
    later call on the group raises too, within the same bound."""
    assert SIZE > 1, "a peer must die: run this case on 2 ranks or more"
    dist.barrier()
    if RANK == LAST:
        print("RESULT peer_killed ok", flush=True)
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(0.5)  # the others are in their all_reduce by now
        os._exit(0)
    bound = TIMEOUT_S + 2
    for k, (what, fn) in enumerate((("all_reduce", lambda: dist.all_reduce(tensor(RANK, 1000, torch.float32))),
                                    ("second all_reduce", lambda: dist.all_reduce(torch.ones(3))),
                                    ("barrier", dist.barrier),
                                    ("broadcast", lambda: dist.broadcast(torch.ones(3), src=0)))):
        t0 = time.monotonic()
        e = raises(fn)
        took = time.monotonic() - t0
        print("# rank %d: %s after the death of rank %d raised %s in %.2f s: %s"
              % (RANK, what, LAST, type(e).__name__, took, str(e).splitlines()[0][:200]), flush=True)
        assert took <= bound, "%s raised after %.2f s, more than the timeout (%d s) + 2 s" % (what, took, TIMEOUT_S)


harness.main()
