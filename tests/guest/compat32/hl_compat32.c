// SPDX-License-Identifier: GPL-2.0
/*
 * hl-compat32: a 32-bit (i386) static program, without libc, that drives
 * device 0 through the upstream uAPI header compiled for 32 bit, so every
 * ioctl goes through the nodes' compat_ioctl. Built by scripts/guest.sh
 * (gcc -m32 -nostdlib) and run by the guest test
 * `a_32_bit_process_reaches_info_and_memory_ioctls_on_both_nodes` (INFO,
 * MEMORY ALLOC/MAP/UNMAP/FREE, CB CREATE/INFO/DESTROY).
 *
 * Exits 0 when every step worked; otherwise with the number of the step
 * that failed, after a line on stdout naming it and its result.
 */
#include <linux/types.h>
#include <drm/habanalabs_accel.h>

enum { SYS_EXIT = 1, SYS_WRITE = 4, SYS_OPEN = 5, SYS_CLOSE = 6, SYS_IOCTL = 54 };
#define O_RDWR 2
#define ENOTTY 25

static long sys3(long n, long a, long b, long c)
{
	long r;

	__asm__ volatile("int $0x80" : "=a"(r) : "a"(n), "b"(a), "c"(b), "d"(c) : "memory");
	return r;
}

static void out(const char *s)
{
	unsigned long n = 0;

	while (s[n])
		n++;
	sys3(SYS_WRITE, 1, (long)s, (long)n);
}

static void out_hex(unsigned long long v)
{
	char b[19];
	int i;

	b[0] = '0';
	b[1] = 'x';
	for (i = 0; i < 16; i++)
		b[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	b[18] = 0;
	out(b);
}

static void check(int step, const char *what, int ok, long long value)
{
	if (ok)
		return;
	out("hl-compat32: step ");
	out_hex(step);
	out(" failed: ");
	out(what);
	out(" = ");
	out_hex((unsigned long long)value);
	out("\n");
	sys3(SYS_EXIT, step, 0, 0);
}

static void *zero(void *p, unsigned long n)
{
	volatile char *c = p;

	while (n--)
		*c++ = 0;
	return p;
}

static long info(int fd, __u32 op, void *buf, __u32 size)
{
	struct hl_info_args a;

	zero(&a, sizeof(a));
	a.return_pointer = (__u64)(unsigned long)buf;
	a.return_size = size;
	a.op = op;
	return sys3(SYS_IOCTL, fd, DRM_IOCTL_HL_INFO, (long)&a);
}

static long mem(int fd, union hl_mem_args *a)
{
	return sys3(SYS_IOCTL, fd, DRM_IOCTL_HL_MEMORY, (long)a);
}

static long cb(int fd, union hl_cb_args *a)
{
	return sys3(SYS_IOCTL, fd, DRM_IOCTL_HL_CB, (long)a);
}

void _start(void)
{
	struct hl_info_hw_ip_info hw;
	struct hl_info_device_status st;
	struct hl_info_dram_usage usage;
	union hl_mem_args m;
	union hl_cb_args c;
	__u64 handle, va, cb_handle;
	long ctl, dev, rc;

	ctl = sys3(SYS_OPEN, (long)"/dev/accel/accel_controlD0", O_RDWR, 0);
	check(1, "open accel_controlD0", ctl >= 0, ctl);
	zero(&hw, sizeof(hw));
	rc = info(ctl, HL_INFO_HW_IP_INFO, &hw, sizeof(hw));
	check(2, "control INFO HW_IP_INFO", rc == 0, rc);
	check(3, "device_id", hw.device_id == 0x1020, hw.device_id);
	/* Anything but INFO stays ENOTTY on the control node. */
	rc = sys3(SYS_IOCTL, ctl, DRM_IOCTL_HL_MEMORY, (long)&m);
	check(4, "control MEMORY", rc == -ENOTTY, rc);

	dev = sys3(SYS_OPEN, (long)"/dev/accel/accel0", O_RDWR, 0);
	check(5, "open accel0", dev >= 0, dev);
	zero(&st, sizeof(st));
	rc = info(dev, HL_INFO_DEVICE_STATUS, &st, sizeof(st));
	check(6, "INFO DEVICE_STATUS", rc == 0, rc);
	check(7, "status", st.status == HL_DEVICE_STATUS_OPERATIONAL, st.status);

	zero(&m, sizeof(m));
	m.in.op = HL_MEM_OP_ALLOC;
	m.in.alloc.mem_size = 1;
	rc = mem(dev, &m);
	check(8, "MEMORY ALLOC", rc == 0, rc);
	handle = m.out.handle;
	check(9, "handle", handle >= 1, (long long)handle);

	zero(&m, sizeof(m));
	m.in.op = HL_MEM_OP_MAP;
	m.in.map_device.handle = handle;
	rc = mem(dev, &m);
	check(10, "MEMORY MAP", rc == 0, rc);
	va = m.out.device_virt_addr;
	check(11, "device va", va != 0, (long long)va);

	zero(&usage, sizeof(usage));
	rc = info(dev, HL_INFO_DRAM_USAGE, &usage, sizeof(usage));
	check(12, "INFO DRAM_USAGE", rc == 0, rc);
	check(13, "ctx_dram_mem", usage.ctx_dram_mem > 0, (long long)usage.ctx_dram_mem);

	zero(&m, sizeof(m));
	m.in.op = HL_MEM_OP_UNMAP;
	m.in.unmap.device_virt_addr = va;
	rc = mem(dev, &m);
	check(14, "MEMORY UNMAP", rc == 0, rc);

	zero(&m, sizeof(m));
	m.in.op = HL_MEM_OP_FREE;
	m.in.free.handle = handle;
	rc = mem(dev, &m);
	check(15, "MEMORY FREE", rc == 0, rc);

	zero(&usage, sizeof(usage));
	rc = info(dev, HL_INFO_DRAM_USAGE, &usage, sizeof(usage));
	check(16, "ctx_dram_mem after FREE", rc == 0 && usage.ctx_dram_mem == 0,
	      (long long)usage.ctx_dram_mem);

	/* A CB mapped into the device's host range, its INFO, and DESTROY. */
	zero(&c, sizeof(c));
	c.in.op = HL_CB_OP_CREATE;
	c.in.cb_size = 5000;
	c.in.flags = HL_CB_FLAGS_MAP;
	rc = cb(dev, &c);
	check(17, "CB CREATE with HL_CB_FLAGS_MAP", rc == 0, rc);
	cb_handle = c.out.cb_handle;
	check(18, "cb handle", cb_handle != 0, (long long)cb_handle);

	zero(&c, sizeof(c));
	c.in.op = HL_CB_OP_INFO;
	c.in.cb_handle = cb_handle;
	c.in.flags = HL_CB_FLAGS_GET_DEVICE_VA;
	rc = cb(dev, &c);
	check(19, "CB INFO device VA", rc == 0 && c.out.device_va != 0, rc);

	zero(&c, sizeof(c));
	c.in.op = HL_CB_OP_DESTROY;
	c.in.cb_handle = cb_handle;
	rc = cb(dev, &c);
	check(20, "CB DESTROY", rc == 0, rc);
	rc = cb(dev, &c);
	check(21, "CB DESTROY twice", rc == -22, rc);

	sys3(SYS_CLOSE, dev, 0, 0);
	sys3(SYS_CLOSE, ctl, 0, 0);
	out("hl-compat32: ok, device ");
	out_hex(hw.device_id);
	out(", mapped at ");
	out_hex(va);
	out("\n");
	sys3(SYS_EXIT, 0, 0, 0);
	for (;;)
		;
}
