// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for kernel facilities that are static inline and not exposed to
 * Rust through `bindings` or `rust/helpers` in 7.3.
 */
#include <linux/mm.h>

u64 hlrs_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}
