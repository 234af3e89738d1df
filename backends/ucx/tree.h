/* SPDX-License-Identifier: BSD-3-Clause */
/* The binomial tree shared by the rooted algorithms (broadcast, gather, scatter): ranks renumbered so that the root
 * is virtual rank 0; v's parent is v minus its lowest set bit and v's subtree is the contiguous virtual range
 * [v, v + tcu_tree_span(v, n)), so a whole subtree's blocks travel as one message. */
#ifndef TCU_TREE_H
#define TCU_TREE_H

#include "engine.h"

/* The power of two above v's children: v's lowest set bit, or the first power of two >= n for the root. Children
 * of v are v + m for each power of two m < tcu_tree_top(v, n) with v + m < n. */
static inline int tcu_tree_top(int v, int n)
{
    if (v)
        return v & -v;
    int top = 1;
    while (top < n)
        top <<= 1;
    return top;
}

/* How many virtual ranks v's subtree holds (v itself included). */
static inline int tcu_tree_span(int v, int n)
{
    int top = tcu_tree_top(v, n);
    return top < n - v ? top : n - v;
}

static inline int tcu_tree_parent(int v)
{
    return v - (v & -v);
}

/* Virtual rank of real rank r for `root`, and back. */
static inline int tcu_tree_virt(int r, int root, int n)
{
    return tcu_mod(r - root, n);
}
static inline int tcu_tree_real(int v, int root, int n)
{
    return (v + root) % n;
}

#endif /* TCU_TREE_H */
