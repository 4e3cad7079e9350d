#!/usr/bin/env python3
"""Generate src/asic/gaudi2_blocks.rs: the table of Gaudi2's user-mappable
HW blocks (the configuration-space windows MAP_BLOCK hands out), with the same
addresses and sizes as upstream's `gaudi2_user_mapped_blocks_init`
(drivers/accel/habanalabs/gaudi2/gaudi2.c:3709-3796) and the same order, so
block ids match upstream's.

The register addresses come from the kernel source the build downloads: a
small userspace C program includes upstream's generated register headers
(include/gaudi2/asic_reg/), computes the table by the rules below and prints
it. Run it again only when the kernel source changes:

    scripts/gen/gaudi2_user_blocks.py "$(cat /var/cache/habanalabs-rs/kernel-src.path)"

Order (ids): the 69 ARC DCCM blocks (the four scheduler ARCs have two DCCM
blocks' worth, 64 KiB), the 8 ACP blocks, NIC UMR doorbell blocks (24 engines
x 15), the 10 decoder command blocks, then the sync manager OBJS and GLBL
blocks of DCOREs 1-3.
"""
import os
import re
import subprocess
import sys
import tempfile

ksrc = sys.argv[1]
hl = os.path.join(ksrc, "drivers/accel/habanalabs")
gaudi2_c = open(os.path.join(hl, "gaudi2/gaudi2.c")).read()
m = re.search(r"gaudi2_arc_dccm_bases\[NUM_ARC_CPUS\] = \{(.*?)\};", gaudi2_c, re.S)
dccm = m.group(1)
m = re.search(r"static void gaudi2_user_mapped_dec_init.*?\{(.*?)\n\}", gaudi2_c, re.S)
decs = re.findall(r"(mm\w+_CMD_BASE)", m.group(1))

prog = r"""
#include <stdio.h>
#include <stdint.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
#include "gaudi2/asic_reg/gaudi2_regs.h"
#include "gaudi2/gaudi2.h"
#include "gaudi2/arc/gaudi2_arc_common_packets.h"
#define HL_BLOCK_SIZE 0x1000
#define NUM_OF_USER_NIC_UMR_BLOCKS 15
#define SM_OBJS_BLOCK_SIZE (mmDCORE0_SYNC_MNGR_OBJS_SM_SEC_0 - mmDCORE0_SYNC_MNGR_OBJS_SOB_OBJ_0)
static const u32 dccm[NUM_ARC_CPUS] = { @DCCM@ };
static const u32 decs[] = { @DECS@ };
static const char *dec_names[] = { @DECNAMES@ };
static int id;
static void blk(u64 addr, u64 size, const char *what) {
    printf("    // %u: %s\n    UserBlock { address: 0x%llx, size: 0x%llx },\n",
           id++, what, (unsigned long long)addr, (unsigned long long)size);
}
int main(void) {
    char name[96];
    printf("pub(crate) const CFG_BASE: u64 = 0x%llx;\n", (unsigned long long)CFG_BASE);
    printf("pub(crate) const USER_BLOCKS: [UserBlock; NUM]\n= [\n");
    for (int i = 0; i < NUM_ARC_CPUS; i++) {
        int sched = i >= CPU_ID_SCHED_ARC0 && i <= CPU_ID_SCHED_ARC3;
        snprintf(name, sizeof(name), "ARC %d DCCM%s", i, sched ? " (scheduler, 2 blocks)" : "");
        blk(dccm[i], sched ? 2 * ARC_DCCM_BLOCK_SIZE : ARC_DCCM_BLOCK_SIZE, name);
    }
    blk(mmARC_FARM_ARC0_ACP_ENG_BASE, HL_BLOCK_SIZE, "ARC farm ARC0 ACP");
    blk(mmARC_FARM_ARC1_ACP_ENG_BASE, HL_BLOCK_SIZE, "ARC farm ARC1 ACP");
    blk(mmARC_FARM_ARC2_ACP_ENG_BASE, HL_BLOCK_SIZE, "ARC farm ARC2 ACP");
    blk(mmARC_FARM_ARC3_ACP_ENG_BASE, HL_BLOCK_SIZE, "ARC farm ARC3 ACP");
    blk(mmDCORE0_MME_QM_ARC_ACP_ENG_BASE, HL_BLOCK_SIZE, "DCORE0 MME QM ARC ACP");
    blk(mmDCORE1_MME_QM_ARC_ACP_ENG_BASE, HL_BLOCK_SIZE, "DCORE1 MME QM ARC ACP");
    blk(mmDCORE2_MME_QM_ARC_ACP_ENG_BASE, HL_BLOCK_SIZE, "DCORE2 MME QM ARC ACP");
    blk(mmDCORE3_MME_QM_ARC_ACP_ENG_BASE, HL_BLOCK_SIZE, "DCORE3 MME QM ARC ACP");
    for (int i = 0; i < NIC_NUMBER_OF_ENGINES * NUM_OF_USER_NIC_UMR_BLOCKS; i++) {
        int nic = i / NUM_OF_USER_NIC_UMR_BLOCKS, umr = i % NUM_OF_USER_NIC_UMR_BLOCKS;
        snprintf(name, sizeof(name), "NIC %d UMR %d doorbell", nic, umr);
        blk(mmNIC0_UMR0_0_UNSECURE_DOORBELL0_BASE +
            (nic / NIC_NUMBER_OF_QM_PER_MACRO) * NIC_OFFSET +
            (nic % NIC_NUMBER_OF_QM_PER_MACRO) * NIC_QM_OFFSET + umr * NIC_UMR_OFFSET,
            HL_BLOCK_SIZE, name);
    }
    for (unsigned i = 0; i < sizeof(decs) / sizeof(decs[0]); i++)
        blk(decs[i], HL_BLOCK_SIZE, dec_names[i]);
    for (int i = 1; i < NUM_OF_DCORES; i++) {
        snprintf(name, sizeof(name), "DCORE%d sync manager OBJS", i);
        blk(mmDCORE0_SYNC_MNGR_OBJS_BASE + i * DCORE_OFFSET, SM_OBJS_BLOCK_SIZE, name);
        snprintf(name, sizeof(name), "DCORE%d sync manager GLBL", i);
        blk(mmDCORE0_SYNC_MNGR_GLBL_BASE + i * DCORE_OFFSET, HL_BLOCK_SIZE, name);
    }
    printf("];\npub(crate) const NUM: usize = %d;\n", id);
    return 0;
}
"""
prog = prog.replace("@DCCM@", dccm).replace("@DECS@", ", ".join(decs))
prog = prog.replace("@DECNAMES@", ", ".join('"%s command"' % d[2:-len("_CMD_BASE")].replace("_", " ") for d in decs))
with tempfile.TemporaryDirectory() as t:
    c, exe = os.path.join(t, "g.c"), os.path.join(t, "g")
    open(c, "w").write(prog)
    subprocess.run(["gcc", "-O0", "-w", "-I", os.path.join(hl, "include"), "-o", exe, c], check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout

lines = out.splitlines()
cfg = lines[0]
num = lines[-1]
body = "\n".join(lines[1:-1]).replace("[UserBlock; NUM]\n= [", "[UserBlock; NUM] = [")
dest = os.path.join(os.path.dirname(__file__), "../../src/asic/gaudi2_blocks.rs")
with open(dest, "w") as f:
    f.write("""// SPDX-License-Identifier: GPL-2.0

//! Gaudi2's user-mappable HW blocks, generated by
//! `scripts/gen/gaudi2_user_blocks.py` from the kernel source's Gaudi2
//! register headers: the same addresses (offsets from [`CFG_BASE`]), sizes
//! and order (block ids) as upstream's `gaudi2_user_mapped_blocks_init`
//! (gaudi2/gaudi2.c:3709-3796). Do not edit by hand.

use super::UserBlock;

/// Base of the configuration space in the device's address map
/// (`CFG_BASE`, include/gaudi2/gaudi2.h:20).
""")
    f.write(cfg + "\n\n")
    f.write("/// Number of user-mappable blocks (`NUM_USER_MAPPED_BLOCKS`, gaudi2P.h:57-60).\n")
    f.write(num + "\n\n")
    f.write("/// The blocks, by id.\n#[rustfmt::skip]\n")
    f.write(body + "\n")
print(f"wrote {os.path.normpath(dest)}: {num}")
