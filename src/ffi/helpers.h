/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for kernel facilities that are static inline and not exposed to
 * Rust through `bindings` or `rust/helpers` in 7.3. The Rust side declares
 * the same prototypes in the `extern "C"` block of `src/ffi/pin.rs`; keep the
 * two in step.
 */
#ifndef HLRS_FFI_HELPERS_H
#define HLRS_FFI_HELPERS_H

#include <linux/types.h>

struct page;
struct scatterlist;

/* get_page(page), put_page(page) */
void hlrs_get_page(struct page *page);
void hlrs_put_page(struct page *page);
/* page_count(page) */
int hlrs_page_count(struct page *page);
/* sg_page(sg) */
struct page *hlrs_sg_page(struct scatterlist *sg);

/* page_to_phys(page) */
u64 hlrs_page_to_phys(struct page *page);
/* pfn_to_page(pfn) */
struct page *hlrs_pfn_to_page(unsigned long pfn);
/* totalram_pages(): pages of RAM the kernel manages */
unsigned long hlrs_totalram_pages(void);
/* fatal_signal_pending(current) */
bool hlrs_fatal_signal_pending(void);
/* access_ok(addr, size) for the current task */
bool hlrs_access_ok(unsigned long addr, unsigned long size);
/* virt_to_pfn(addr) of directly mapped kernel memory */
unsigned long hlrs_virt_to_pfn(const void *addr);
struct device;
/* dma_get_max_seg_size(dev) */
unsigned int hlrs_dma_max_seg_size(struct device *dev);
/* sg_next(sg); sg_dma_address/len(sg) set and read */
struct scatterlist *hlrs_sg_next(struct scatterlist *sg);
void hlrs_sg_set_dma(struct scatterlist *sg, dma_addr_t addr, unsigned int len);
dma_addr_t hlrs_sg_dma(struct scatterlist *sg, unsigned int *len);
/* pci_p2pdma_distance(provider, client, true) */
struct pci_dev;
int hlrs_pci_p2pdma_distance(struct pci_dev *provider, struct device *client);
/* dma_mapping_error(dev, addr) */
int hlrs_dma_mapping_error(struct device *dev, dma_addr_t addr);

/* cond_resched() */
void hlrs_cond_resched(void);

/* the memory cgroup of simulated DRAM's host memory (ffi/memcg.rs) */
struct mem_cgroup;
struct mem_cgroup *hlrs_memcg_of_current(void);
void hlrs_memcg_put(struct mem_cgroup *memcg);
struct mem_cgroup *hlrs_set_active_memcg(struct mem_cgroup *memcg);

#endif /* HLRS_FFI_HELPERS_H */
