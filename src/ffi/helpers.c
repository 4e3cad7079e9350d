// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for kernel facilities that are static inline and not exposed to
 * Rust through `bindings` or `rust/helpers` in 7.3 (prototypes: helpers.h).
 */
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>
#include <linux/dma-mapping.h>
#include <linux/scatterlist.h>

#include "helpers.h"

/* dma-buf export (ffi/host_page.rs, ffi/dmabuf.rs) */
void hlrs_get_page(struct page *page)
{
	get_page(page);
}

void hlrs_put_page(struct page *page)
{
	put_page(page);
}

int hlrs_page_count(struct page *page)
{
	return page_count(page);
}

struct page *hlrs_sg_page(struct scatterlist *sg)
{
	return sg_page(sg);
}

u64 hlrs_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

/* the DMA map of the simulated device (ffi/dma_pages.rs) */
struct page *hlrs_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}

unsigned long hlrs_totalram_pages(void)
{
	return totalram_pages();
}

bool hlrs_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

bool hlrs_access_ok(unsigned long addr, unsigned long size)
{
	return access_ok((void __user *)addr, size);
}

unsigned long hlrs_virt_to_pfn(const void *addr)
{
	return PHYS_PFN(__pa(addr));
}

unsigned int hlrs_dma_max_seg_size(struct device *dev)
{
	return dma_get_max_seg_size(dev);
}

/* device memory mapped for a dma-buf importer peer to peer (ffi/dma.rs) */
struct scatterlist *hlrs_sg_next(struct scatterlist *sg)
{
	return sg_next(sg);
}

void hlrs_sg_set_dma(struct scatterlist *sg, dma_addr_t addr, unsigned int len)
{
	sg_dma_address(sg) = addr;
	sg_dma_len(sg) = len;
}

dma_addr_t hlrs_sg_dma(struct scatterlist *sg, unsigned int *len)
{
	*len = sg_dma_len(sg);
	return sg_dma_address(sg);
}

/* the PCI path (ffi/pci.rs): whether `client` reaches `provider` peer to peer */
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>

int hlrs_pci_p2pdma_distance(struct pci_dev *provider, struct device *client)
{
	return pci_p2pdma_distance(provider, client, true);
}

/* streaming DMA mappings of the PCI path (ffi/pci_dma.rs) */
int hlrs_dma_mapping_error(struct device *dev, dma_addr_t addr)
{
	return dma_mapping_error(dev, addr);
}

void hlrs_cond_resched(void)
{
	cond_resched();
}

/* the memory cgroup host memory behind simulated DRAM is charged to (ffi/memcg.rs) */
#include <linux/memcontrol.h>
#include <linux/sched/mm.h>

struct mem_cgroup *hlrs_memcg_of_current(void)
{
	/* NULL without CONFIG_MEMCG or when the controller is disabled. */
	return get_mem_cgroup_from_mm(current->mm);
}

void hlrs_memcg_put(struct mem_cgroup *memcg)
{
	mem_cgroup_put(memcg);
}

struct mem_cgroup *hlrs_set_active_memcg(struct mem_cgroup *memcg)
{
	return set_active_memcg(memcg);
}
