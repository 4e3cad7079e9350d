// SPDX-License-Identifier: GPL-2.0
/*
 * The C side of the simulated engines' worker threads (ffi/kthread.rs) and
 * of their run-time cap, which root may change while the module is loaded
 * (a module parameter of the Rust `module!` macro cannot be written through
 * sysfs in 7.3).
 */
#include <linux/cgroup.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/task.h>

#include "engines.h"

static unsigned int cs_max_run_s = 60;
module_param(cs_max_run_s, uint, 0644);
MODULE_PARM_DESC(cs_max_run_s,
		 "Longest a command submission runs on the simulated engines, in seconds, from its first job's start, whatever its timeout (0: no cap); writable at run time");

static unsigned int engine_cpu_pct = 100;
module_param(engine_cpu_pct, uint, 0644);
MODULE_PARM_DESC(engine_cpu_pct,
		 "Host CPU the simulated engines of one context may use together, in percent of one CPU (0: no bound); writable at run time");

u64 hlrs_current_runtime_ns(void)
{
	/* Updated at every tick and context switch: behind by at most a tick. */
	return READ_ONCE(current->se.sum_exec_runtime);
}

unsigned int hlrs_engine_cpu_pct(void)
{
	return READ_ONCE(engine_cpu_pct);
}

unsigned int hlrs_cs_max_run_s(void)
{
	return READ_ONCE(cs_max_run_s);
}

/* KUnit: set the cap (returns the old value) */
unsigned int hlrs_set_cs_max_run_s(unsigned int s)
{
	return xchg(&cs_max_run_s, s);
}

struct task_struct *hlrs_kthread_create(int (*fn)(void *), void *data,
					const char *name, int *err)
{
	struct task_struct *t = kthread_create(fn, data, "%s", name);

	if (IS_ERR(t)) {
		*err = PTR_ERR(t);
		return NULL;
	}
	/* Held until hlrs_kthread_stop_put: the thread may end on its own. */
	get_task_struct(t);
	*err = 0;
	return t;
}

void hlrs_kthread_wake(struct task_struct *t)
{
	wake_up_process(t);
}

int hlrs_kthread_stop_put(struct task_struct *t)
{
	return kthread_stop_put(t);
}

bool hlrs_kthread_is_current(struct task_struct *t)
{
	return t == current;
}

int hlrs_kthread_follow_cgroups(struct task_struct *t)
{
#ifdef CONFIG_CGROUPS
	bool same;

	/* Nothing to move when the caller is where kthreadd put the thread
	 * (the root cgroups): cgroup_attach_task_all waits for an RCU grace
	 * period. Only the pointers are compared. */
	rcu_read_lock();
	same = rcu_dereference(current->cgroups) == rcu_dereference(t->cgroups);
	rcu_read_unlock();
	if (same)
		return 0;
	return cgroup_attach_task_all(current, t);
#else
	return 0;
#endif
}
