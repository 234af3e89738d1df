# SPDX-License-Identifier: BSD-3-Clause
# Process groups of the tcomms torch.distributed backend: new_group over various rank lists (members see the right
# rank and size and reduce over the members only; the others get NON_GROUP_MEMBER), several groups in a row and
# overlapping, pg_options as a dict and as tcomms.torch.Options (read back through comm_of(group).hint), refused
# options on every rank, and torch's own gloo groups next to tcomms ones (the split bookkeeping for groups tcomms
# does not serve).
# ranks: 1 2 3 4
# backends: ucx gloo
# needs: numpy torch
# timeout: 180
import os

import torch
import torch.distributed as dist

import harness
from harness import case
import tcomms
import tcomms.torch
from torch_util import RANK, SIZE, check, init, raises, reduce_ref, tensor, values

init("tcomms")
NON_MEMBER = dist.GroupMember.NON_GROUP_MEMBER


def rank_lists():
    """Rank lists for new_group on SIZE ranks: singletons, all, evens, odds, the upper half, an unsorted pair."""
    lists = [[0], [SIZE - 1], list(range(SIZE)), list(range(0, SIZE, 2)), list(range(1, SIZE, 2)),
             list(range(SIZE // 2, SIZE)), [SIZE - 1, 0] if SIZE > 1 else [0]]
    return [lst for lst in lists if lst]


def exercise(group, members, what, tag=0):
    """On a member: the group's rank and size, and collectives over the members only; on the others: nothing."""
    members = sorted(set(members))
    if RANK not in members:
        assert group == NON_MEMBER, "%s: rank %d is not a member, got %r" % (what, RANK, group)
        assert dist.get_rank(group) == -1
        return
    assert group != NON_MEMBER, "%s: member %d got NON_GROUP_MEMBER" % (what, RANK)
    assert dist.get_rank(group) == members.index(RANK), (what, dist.get_rank(group), members)
    assert dist.get_world_size(group) == len(members), (what, dist.get_world_size(group), members)
    t = tensor(RANK + tag, 7, torch.float32)
    dist.all_reduce(t, group=group)
    check(t, reduce_ref("sum", 7, torch.float32, [r + tag for r in members]), torch.float32, what + " all_reduce")
    t = tensor(RANK, 5, torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    check(t, reduce_ref("max", 5, torch.int64, members), torch.int64, what + " all_reduce max")
    src = members[-1]  # a global rank, as torch's group calls take
    t = tensor(RANK, 7, torch.float64) if RANK == src else torch.zeros(7, dtype=torch.float64)
    dist.broadcast(t, src=src, group=group)
    check(t, values(src, 7, torch.float64), torch.float64, what + " broadcast from %d" % src)
    if isinstance(group, tcomms.torch.ProcessGroupTcomms):
        out = torch.zeros(len(members) * 3, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(out, tensor(RANK, 3, torch.bfloat16), group=group)
        check(out, torch.cat([values(r, 3, torch.bfloat16) for r in members]), torch.bfloat16, what + " all_gather")
    else:  # torch 1.13's gloo has only the list form
        outs = [torch.zeros(3, dtype=torch.int32) for _ in members]
        dist.all_gather(outs, tensor(RANK, 3, torch.int32), group=group)
        check(torch.cat(outs), torch.cat([values(r, 3, torch.int32) for r in members]), torch.int32,
              what + " all_gather")
    dist.barrier(group=group)


@case
def groups_of_rank_lists():
    for lst in rank_lists():
        g = dist.new_group(lst)
        exercise(g, lst, "new_group(%s)" % lst)


@case
def groups_created_in_a_row():
    # overlapping groups, all created first, then used in turn (every member in the same global order)
    lists = rank_lists() + [None]
    groups = [dist.new_group(lst) for lst in lists]
    for k, (g, lst) in enumerate(zip(groups, lists)):
        exercise(g, lst if lst is not None else list(range(SIZE)), "group %d (%s)" % (k, lst), tag=k)
    # again in reverse order: old groups keep working after newer ones exist
    for k in reversed(range(len(groups))):
        lst = lists[k] if lists[k] is not None else list(range(SIZE))
        exercise(groups[k], lst, "group %d again" % k, tag=10 + k)


@case
def groups_in_flight_together():
    # async operations of the world and two overlapping groups in flight at once
    low, high = list(range(0, (SIZE + 1) // 2 + 1)), list(range(SIZE // 2, SIZE))
    low, high = [r for r in low if r < SIZE], high or [0]
    g_low, g_high = dist.new_group(low), dist.new_group(high)
    works, checks = [], []
    t = tensor(RANK, 1000, torch.float32)
    works.append(dist.all_reduce(t, async_op=True))
    checks.append((t, reduce_ref("sum", 1000, torch.float32, range(SIZE)), "world"))
    for g, members in ((g_low, low), (g_high, high)):
        if RANK in members:
            t = tensor(RANK + 3, 1000, torch.float64)
            works.append(dist.all_reduce(t, op=dist.ReduceOp.MIN, group=g, async_op=True))
            checks.append((t, reduce_ref("min", 1000, torch.float64, [r + 3 for r in members]), str(members)))
    for w in works:
        w.wait()
    for t, ref, what in checks:
        check(t, ref, t.dtype, "in flight together: " + what)


@case
def pg_options_dict():
    g = dist.new_group(list(range(SIZE)), pg_options={"min_ctas": "4", "max_ctas": 8, "blocking": "0"})
    exercise(g, list(range(SIZE)), "group with a dict of hints")
    comm = tcomms.torch.comm_of(g)
    for key in ("min_ctas", "max_ctas", "blocking"):
        assert comm.hint(key) == "not applicable", (key, comm.hint(key))
    # a subset group with hints
    members = [SIZE - 1]
    g = dist.new_group(members, pg_options={"high_priority_stream": True})
    exercise(g, members, "subset group with hints")
    if RANK in members:
        assert tcomms.torch.comm_of(g).hint("high_priority_stream") == "not applicable"


@case
def pg_options_object():
    opts = tcomms.torch.Options(hints={"min_ctas": 2}, cga_cluster_size=1)
    assert opts.hints == {"min_ctas": 2, "cga_cluster_size": 1}, opts.hints
    members = list(range(0, SIZE, 2))
    g = dist.new_group(members, pg_options=opts)
    exercise(g, members, "group with tcomms.torch.Options")
    if RANK in members:
        comm = tcomms.torch.comm_of(g)
        assert comm.hint("minCTAs") == "not applicable"  # any spelling tcomms takes
        assert comm.hint("cga_cluster_size") == "not applicable"
        # the world is not that group, and a torch gloo group is not tcomms
        assert tcomms.torch.comm_of() is not comm
    raises(lambda: tcomms.torch.comm_of(dist.new_group(backend="gloo")), "tcomms")


def refused_everywhere(what, members, options, *words):
    """new_group(members, pg_options=options) raises on every rank, members or not, and the world goes on."""
    raises(lambda: dist.new_group(members, pg_options=options), *words)
    t = tensor(RANK, 7, torch.float32)
    dist.all_reduce(t)
    check(t, reduce_ref("sum", 7, torch.float32, range(SIZE)), torch.float32, "all_reduce after " + what)


@case
def pg_options_refused():
    everyone, last = list(range(SIZE)), [SIZE - 1]
    for members in (everyone, last):
        refused_everywhere("min_ctas 0", members, {"min_ctas": "0"}, "min_ctas")
        refused_everywhere("blocking maybe", members, tcomms.torch.Options(blocking="maybe"), "blocking")
        refused_everywhere("an unknown hint", members, {"no_such_hint": "1"}, "no_such_hint")
        refused_everywhere("min_ctas > max_ctas", members, {"min_ctas": 8, "max_ctas": 4}, "min_ctas")
        refused_everywhere("pg_options of a wrong type", members, 42, "pg_options")
        refused_everywhere("pg_options of a wrong type", members, ["min_ctas", 4], "pg_options")
    # groups created after the refusals pair up
    for members in (everyone, last, [0]):
        exercise(dist.new_group(members), members, "new_group(%s) after refusals" % members)


@case
def torch_gloo_groups_beside():
    everyone = list(range(SIZE))
    g_tc1 = dist.new_group(everyone)
    g_gloo = dist.new_group(backend="gloo")
    assert not isinstance(g_gloo, tcomms.torch.ProcessGroupTcomms), type(g_gloo)
    assert dist.get_backend(g_gloo) == "gloo", dist.get_backend(g_gloo)
    exercise(g_gloo, everyone, "torch gloo group")
    # a gloo subgroup and tcomms subgroups around it
    last = [SIZE - 1]
    g_gloo_last = dist.new_group(last, backend="gloo")
    g_tc2 = dist.new_group(last)
    g_tc3 = dist.new_group([0])
    exercise(g_gloo_last, last, "torch gloo subgroup")
    exercise(g_tc2, last, "tcomms group after gloo groups")
    exercise(g_tc3, [0], "second tcomms group after gloo groups")
    exercise(g_tc1, everyone, "tcomms group made before the gloo groups")
    exercise(g_gloo, everyone, "torch gloo group again")
    assert dist.get_backend(g_tc1) == "tcomms", dist.get_backend(g_tc1)


@case
def default_selection_is_the_cores():
    """With TCOMMS_BACKEND unset, the module the torch layer names for cpu is the one tcomms itself takes by default
    (a one-rank communicator created with no selection); a bare name covers the devices its module serves."""
    from tcomms.torch import _select
    saved = os.environ.pop("TCOMMS_BACKEND", None)
    try:
        spec, served = _select.selection(["cpu"], "cpu")
        # Without a master address a one-rank communicator serves a private store (the job's port is taken).
        job = {k: os.environ.pop(k) for k in ("TCOMMS_MASTER_ADDR", "MASTER_ADDR") if k in os.environ}
        try:
            alone = tcomms.Comm(rank=0, size=1, name="alone")
        finally:
            os.environ.update(job)
        try:
            want = alone.backend("cpu")
        finally:
            alone.destroy()
        assert (spec, served) == ("cpu:%s" % want, ["cpu"]), (spec, served, want)
        os.environ["TCOMMS_BACKEND"] = "gloo"
        spec, served = _select.selection(["cpu"], "cpu")
        assert (spec, served) == ("cpu:gloo", ["cpu"]), (spec, served)
    finally:
        os.environ.pop("TCOMMS_BACKEND", None)
        if saved is not None:
            os.environ["TCOMMS_BACKEND"] = saved


harness.main()
