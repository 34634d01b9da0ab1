// SPDX-License-Identifier: GPL-2.0
/*
 * Trace state variables without a lock across programs. A hit's program
 * works on a private transaction: the first read of a variable takes its
 * value (one atomic read), writes stay in the transaction, and at the end
 * each written variable is published with one atomic operation: a
 * compare-and-exchange against the value the program read (so
 * `$v = $v + K` from many CPUs loses no update), or a plain store when the
 * program wrote the variable without reading it. When the exchange finds
 * that another CPU changed the variable meanwhile, the caller runs the
 * program again (collect.c), from the hit's one step budget, so the retries
 * are bounded too. Readers never wait for writers.
 *
 * Each variable's update is atomic on its own; a program that updates
 * several variables publishes them one at a time (a rerun after a lost race
 * re-reads the ones already published and does not write them again).
 */
#include <linux/atomic.h>
#include <linux/nospec.h>

#include "gdbtrace.h"

static int tx_entry(struct gt_session *s, struct gt_tsv_tx *tx, u32 num, u32 *idx)
{
	u32 i;

	if (num >= GDBTRACE_MAX_TSVS)
		return AX_ERR_BAD_TSV;
	/* NUM comes from bytecode: keep the bitmap test and the later
	 * tsv[num] in bounds under speculation too. */
	num = array_index_nospec(num, GDBTRACE_MAX_TSVS);
	if (!test_bit(num, s->tsv_defined))
		return AX_ERR_BAD_TSV;
	for (i = 0; i < tx->nr; i++)
		if (tx->e[i].num == num)
			goto found;
	/* The verifier admitted at most GT_TSV_TX_MAX distinct variables. */
	if (tx->nr >= GT_TSV_TX_MAX)
		return AX_ERR_BAD_TSV;
	i = tx->nr++;
	tx->e[i].num = num;
	tx->e[i].read = tx->e[i].written = tx->e[i].done = false;
found:
	*idx = i;
	return 0;
}

/* Start an evaluation. FIRST: a new hit's program; otherwise a rerun after a
 * lost race, which keeps only which variables are already published. */
void gt_tsv_begin(struct gt_tsv_tx *tx, bool first)
{
	u32 i, n = 0;

	if (first) {
		tx->nr = 0;
		return;
	}
	for (i = 0; i < tx->nr; i++) {
		if (!tx->e[i].done)
			continue;
		tx->e[n] = tx->e[i];
		tx->e[n].read = tx->e[n].written = false;
		n++;
	}
	tx->nr = n;
}

int gt_tsv_get(struct gt_session *s, struct gt_tsv_tx *tx, u32 num, s64 *value)
{
	u32 i;
	int ret = tx_entry(s, tx, num, &i);

	if (ret)
		return ret;
	if (!tx->e[i].read && !tx->e[i].written) {
		tx->e[i].seen = atomic64_read(&s->tsv[tx->e[i].num]);
		tx->e[i].value = tx->e[i].seen;
		tx->e[i].read = true;
	}
	*value = tx->e[i].value;
	return 0;
}

int gt_tsv_set(struct gt_session *s, struct gt_tsv_tx *tx, u32 num, s64 value)
{
	u32 i;
	int ret = tx_entry(s, tx, num, &i);

	if (ret)
		return ret;
	tx->e[i].value = value;
	tx->e[i].written = true;
	return 0;
}

/* Publish the transaction's writes. False: a variable the program read was
 * changed by another CPU before its update went in; run the program again. */
bool gt_tsv_commit(struct gt_session *s, struct gt_tsv_tx *tx)
{
	u32 i;

	for (i = 0; i < tx->nr; i++) {
		atomic64_t *v = &s->tsv[tx->e[i].num];

		if (!tx->e[i].written || tx->e[i].done)
			continue;
		if (tx->e[i].read) {
			s64 old = tx->e[i].seen;

			if (!atomic64_try_cmpxchg(v, &old, tx->e[i].value))
				return false;
		} else {
			atomic64_set(v, tx->e[i].value);
		}
		tx->e[i].done = true;
	}
	return true;
}
