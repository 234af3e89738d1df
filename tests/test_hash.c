/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/util/hash.h: the hash against FNV-1a's published test vectors, and the growing table against a plain
 * array of what was inserted (every entry found in its chain, none lost across growth, unlink, free). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "hash.h"

/* From the FNV reference (isthe.com/chongo/tech/comp/fnv, test vectors of FNV-1a 64). */
START_TEST(test_vectors)
{
    ck_assert_uint_eq(tc_hash_bytes("", 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(tc_hash_bytes("a", 1), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(tc_hash_bytes("foobar", 6), 0x85944171f73967e8ull);
    ck_assert_uint_eq(tc_hash_more(tc_hash_bytes("foo", 3), "bar", 3), tc_hash_bytes("foobar", 6));
}
END_TEST

typedef struct item {
    tc_hlink_t link;
    int key;
} item_t;

static item_t *find(const tc_htable_t *t, int key)
{
    uint64_t h = tc_hash_bytes(&key, sizeof(key));
    for (tc_hlink_t *l = *tc_htable_chain(t, h); l; l = l->next)
        if (l->hash == h && ((item_t *)l)->key == key)
            return (item_t *)l;
    return NULL;
}

static void count_free(tc_hlink_t *l, void *arg)
{
    ++*(int *)arg;
    free(l);
}

START_TEST(test_table)
{
    enum { N = 5000 };
    tc_htable_t t;
    ck_assert_int_eq(tc_htable_init(&t, 4), 0);
    for (int k = 0; k < N; k++) {
        item_t *it = malloc(sizeof(*it));
        ck_assert_ptr_nonnull(it);
        it->key = k;
        it->link.hash = tc_hash_bytes(&k, sizeof(k));
        tc_htable_insert(&t, &it->link);
    }
    ck_assert_uint_eq(t.count, N);
    ck_assert_uint_ge(t.nbuckets, N / 2); /* it grew */
    for (int k = 0; k < N; k++)
        ck_assert_msg(find(&t, k) && find(&t, k)->key == k, "key %d lost", k);
    ck_assert_ptr_null(find(&t, N));
    /* unlink the odd keys through their chains */
    for (int k = 1; k < N; k += 2) {
        uint64_t h = tc_hash_bytes(&k, sizeof(k));
        tc_hlink_t **p = tc_htable_chain(&t, h);
        while (*p && ((item_t *)*p)->key != k)
            p = &(*p)->next;
        ck_assert_ptr_nonnull(*p);
        free(tc_htable_unlink(&t, p));
    }
    ck_assert_uint_eq(t.count, N / 2);
    for (int k = 0; k < N; k++)
        ck_assert_msg((find(&t, k) != NULL) == (k % 2 == 0), "key %d after unlinking the odd ones", k);
    int freed = 0;
    tc_htable_free(&t, count_free, &freed);
    ck_assert_int_eq(freed, N / 2);
    ck_assert_uint_eq(t.count, 0);
    tc_htable_free(&t, NULL, NULL); /* twice is harmless */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("hash");
    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_table);
    suite_add_tcase(s, tc);
    return check_run(s);
}
