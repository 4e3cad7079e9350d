/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The engines' worker threads and run-time cap (ffi/engines.c); the Rust
 * side declares the same prototypes in ffi/kthread.rs.
 */
#ifndef HLRS_FFI_ENGINES_H
#define HLRS_FFI_ENGINES_H

#include <linux/types.h>

struct task_struct;

/* the module parameter cs_max_run_s (seconds; 0: no cap) */
unsigned int hlrs_cs_max_run_s(void);
/* current->se.sum_exec_runtime: CPU time the calling thread ran, in ns */
u64 hlrs_current_runtime_ns(void);
/* the module parameter engine_cpu_pct (percent of one CPU; 0: no bound) */
unsigned int hlrs_engine_cpu_pct(void);
/* set cs_max_run_s (KUnit), returning the old value */
unsigned int hlrs_set_cs_max_run_s(unsigned int s);
/* kthread_create(fn, data, "%s", name) plus a task reference; NULL and *err */
struct task_struct *hlrs_kthread_create(int (*fn)(void *), void *data,
					const char *name, int *err);
/* wake_up_process(t) */
void hlrs_kthread_wake(struct task_struct *t);
/* kthread_stop_put(t): stop, wait for the end, drop the reference */
int hlrs_kthread_stop_put(struct task_struct *t);
/* t == current */
bool hlrs_kthread_is_current(struct task_struct *t);
/* cgroup_attach_task_all(current, t), skipped when already alike */
int hlrs_kthread_follow_cgroups(struct task_struct *t);

#endif /* HLRS_FFI_ENGINES_H */
