//! `hlrs stress`: a bounded random mix of memory operations with a fixed seed,
//! each result checked against a model of what the driver must answer.

use hlrs::{errno, uapi::*, Device};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// What one worker did.
#[derive(Default, Debug, Clone)]
pub struct Tally {
    /// Operations issued.
    pub ops: u64,
    /// Results that differed from the model.
    pub mismatches: u64,
    /// ALLOC / FREE / MAP / UNMAP / INFO / refused-as-expected counts.
    pub alloc: u64,
    /// FREE count.
    pub free: u64,
    /// MAP count.
    pub map: u64,
    /// UNMAP count.
    pub unmap: u64,
    /// INFO count.
    pub info: u64,
    /// Operations the driver refused, as the model expected.
    pub refused: u64,
}

/// xorshift64*: a tiny deterministic generator.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Run `ops` random operations on device `index`; `progress` is called with
/// the number done so far every 1%.
pub fn run(index: u32, ops: u64, seed: u64, progress: &mut dyn FnMut(u64)) -> io::Result<Tally> {
    let dev = Device::open_compute(index)?;
    let hw = dev.hw_ip_info()?;
    let page = hw.dram_page_size;
    let total_pages = hw.dram_size / page;
    let mut rng = Rng::new(seed ^ u64::from(index).wrapping_mul(0x9E37_79B9));
    let mut t = Tally::default();
    // handle -> (pages, live mapping VAs)
    let mut mem: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
    let mut used_pages = 0u64;
    let step = (ops / 100).max(1);
    for i in 0..ops {
        t.ops += 1;
        let check = |ok: bool, t: &mut Tally| {
            if !ok {
                t.mismatches += 1;
            }
        };
        match rng.below(10) {
            0..=2 => {
                let pages = rng.below(4) + 1;
                let flags = if rng.below(2) == 0 {
                    HL_MEM_CONTIGUOUS
                } else {
                    0
                };
                let r = dev.alloc(pages * page - rng.below(page), flags);
                t.alloc += 1;
                if used_pages + pages > total_pages {
                    // Contiguous allocations may fail earlier (fragmentation); never succeed past the pool.
                    check(r.is_err(), &mut t);
                    if r.is_err() {
                        t.refused += 1;
                    }
                } else {
                    match r {
                        Ok(h) => {
                            check(h >= 1 && !mem.contains_key(&h), &mut t);
                            mem.insert(h, (pages, Vec::new()));
                            used_pages += pages;
                        }
                        Err(e) => {
                            check(flags == HL_MEM_CONTIGUOUS && errno(&e) == 12, &mut t);
                            t.refused += 1;
                        }
                    }
                }
            }
            3 | 4 => {
                let Some((&h, (pages, maps))) =
                    mem.iter().nth(rng.below(mem.len() as u64 + 1) as usize)
                else {
                    // FREE of a handle that does not exist.
                    check(
                        dev.free(0xFFFF_0000).map_err(|e| errno(&e)) == Err(22),
                        &mut t,
                    );
                    t.refused += 1;
                    continue;
                };
                let (pages, mapped) = (*pages, !maps.is_empty());
                let r = dev.free(h);
                t.free += 1;
                if mapped {
                    check(r.map_err(|e| errno(&e)) == Err(22), &mut t);
                    t.refused += 1;
                } else {
                    check(r.is_ok(), &mut t);
                    mem.remove(&h);
                    used_pages -= pages;
                }
            }
            5 | 6 => {
                let pick = rng.below(mem.len() as u64 + 1) as usize;
                if let Some((&h, (pages, maps))) = mem.iter_mut().nth(pick) {
                    t.map += 1;
                    match dev.map(h, 0, 0) {
                        Ok(va) => {
                            let end = va + *pages * page;
                            check(
                                va >= hw.dram_base_address
                                    && va % page == hw.dram_base_address % page,
                                &mut t,
                            );
                            let _ = end;
                            maps.push(va);
                        }
                        Err(e) => check(errno(&e) == 12, &mut t),
                    }
                }
            }
            7 | 8 => {
                let victim = mem
                    .iter_mut()
                    .find(|(_, (_, m))| !m.is_empty())
                    .and_then(|(_, (_, m))| m.pop());
                t.unmap += 1;
                match victim {
                    Some(va) => check(dev.unmap(va).is_ok(), &mut t),
                    None => {
                        check(
                            dev.unmap(hw.dram_base_address + 1).map_err(|e| errno(&e)) == Err(22),
                            &mut t,
                        );
                        t.refused += 1;
                    }
                }
            }
            _ => {
                t.info += 1;
                let u = dev.dram_usage()?;
                check(u.ctx_dram_mem == used_pages * page, &mut t);
            }
        }
        if (i + 1) % step == 0 {
            progress(i + 1);
        }
    }
    // Clean up through the driver and check usage is idle.
    for (h, (_, maps)) in mem {
        for va in maps {
            check_io(dev.unmap(va), &mut t);
        }
        check_io(dev.free(h), &mut t);
    }
    if dev.dram_usage()?.ctx_dram_mem != 0 {
        t.mismatches += 1;
    }
    Ok(t)
}

fn check_io(r: io::Result<()>, t: &mut Tally) {
    if r.is_err() {
        t.mismatches += 1;
    }
}

/// Null INFO ioctls per second on the control node of `index` (DEVICE_STATUS).
pub fn null_ioctl_rate(index: u32, n: u32) -> io::Result<f64> {
    Ok(1e9 / Device::open_control(index)?.null_ioctl_ns(n)?.max(1.0))
}

/// A one-line progress bar on standard error.
pub fn progress_bar(done: u64, total: u64) {
    let pct = done * 100 / total.max(1);
    let filled = (pct / 4) as usize;
    let mut err = io::stderr();
    let _ = write!(
        err,
        "\r  [{}{}] {:>3}% {} ops",
        "#".repeat(filled),
        ".".repeat(25 - filled.min(25)),
        pct,
        done
    );
    if done >= total {
        let _ = writeln!(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..100 {
            assert_eq!(a.next(), b.next());
        }
        assert!((0..1000).all(|_| a.below(7) < 7));
    }
}
