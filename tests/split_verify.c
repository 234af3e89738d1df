/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks of split children shared by the split suites (tests/split_verify.h): every result is computed here from
 * the member list the test expects, never read back from the library. */
#include "split_verify.h"

#include "mrank.h"

int split_report(int rank, const char *label, const char *call, tcomms_status_t st)
{
    mrank_logf("FAIL rank %d, %s: %s returned %d (%s)", rank, label, call, st, tcomms_last_error());
    return 1;
}

int split_verify_child(tcomms_comm_t *child, int root_rank, const int *members, int n, const char *label)
{
    int me = -1, rank = -1, size = -1, sum = 0, fails = 0;
    for (int k = 0; k < n; k++) {
        sum += members[k];
        if (members[k] == root_rank)
            me = k;
    }
    if (!child) {
        mrank_logf("FAIL rank %d, %s: got no communicator, expected rank %d of %d", root_rank, label, me, n);
        return 1;
    }
    tcomms_status_t st = tcomms_comm_rank(child, &rank);
    if (st != TCOMMS_SUCCESS || rank != me)
        fails += mrank_failf("FAIL rank %d, %s: child rank %d (status %d), expected %d", root_rank, label, rank,
                            st, me);
    st = tcomms_comm_size(child, &size);
    if (st != TCOMMS_SUCCESS || size != n)
        fails += mrank_failf("FAIL rank %d, %s: child size %d (status %d), expected %d", root_rank, label, size,
                            st, n);
    if (fails)
        return fails; /* collectives would not match up */
    int32_t mine = root_rank, total = -1, gathered[8];
    st = tcomms_all_reduce(child, &mine, &total, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return split_report(root_rank, label, "tcomms_all_reduce", st);
    if (total != sum)
        fails += mrank_failf("FAIL rank %d, %s: all_reduce of member ranks = %d, expected %d", root_rank, label,
                            (int)total, sum);
    st = tcomms_all_gather(child, &mine, gathered, 1, TCOMMS_INT32, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return split_report(root_rank, label, "tcomms_all_gather", st);
    for (int k = 0; k < n; k++)
        if (gathered[k] != members[k])
            fails += mrank_failf("FAIL rank %d, %s: all_gather[%d] = %d, expected root rank %d", root_rank, label,
                                k, (int)gathered[k], members[k]);
    return fails;
}

int split_color_members(int rank, int size, const int *colors, const int *keys, int *members)
{
    if (colors[rank] == TCOMMS_SPLIT_NOCOLOR)
        return 0;
    int n = 0;
    for (int r = 0; r < size; r++) { /* insertion sort by (key, rank) */
        if (colors[r] != colors[rank])
            continue;
        int k = n++;
        while (k > 0 && (keys[members[k - 1]] > keys[r] || (keys[members[k - 1]] == keys[r] && members[k - 1] > r))) {
            members[k] = members[k - 1];
            k--;
        }
        members[k] = r;
    }
    return n;
}
