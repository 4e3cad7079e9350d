//! What every section of `hlrs bench` measures with: a figure printed as
//! one `@@BENCH <id> <value> <unit>` line, batches timed against the null
//! ioctl, the median and best of a set of batches. Imports no other bench
//! module.

use hlrs::Device;
use std::io;
use std::time::Instant;

/// Batches per measurement (odd: the median is one batch).
pub(crate) const BATCHES: usize = 7;

/// Print one figure.
pub(crate) fn emit(id: &str, value: f64, unit: &str) {
    println!("@@BENCH {id} {value:.1} {unit}");
}

/// Nanoseconds per call of each batch of `per` calls of `f`.
pub(crate) fn batch(per: u32, f: &mut dyn FnMut() -> io::Result<()>) -> io::Result<f64> {
    let t = Instant::now();
    for _ in 0..per {
        f()?;
    }
    Ok(t.elapsed().as_nanos() as f64 / f64::from(per))
}

/// Median and best of a set of batch times.
pub(crate) fn median_best(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

/// Time `f` against the null ioctl on `dev`: [`BATCHES`] batches of each,
/// interleaved. Emits `<id>.median`, `<id>.best` and the baseline's median as
/// `<id>.baseline`.
pub(crate) fn against_null(
    dev: &Device,
    id: &str,
    per: u32,
    mut f: impl FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let (mut base, mut op) = (Vec::new(), Vec::new());
    // One warm-up call of each (first-use allocations, page faults).
    f()?;
    dev.device_status()?;
    for _ in 0..BATCHES {
        base.push(batch(per, &mut || dev.device_status().map(drop))?);
        op.push(batch(per, &mut f)?);
    }
    let ((bm, _), (om, ob)) = (median_best(base), median_best(op));
    emit(&format!("{id}.median"), om, "ns");
    emit(&format!("{id}.best"), ob, "ns");
    emit(&format!("{id}.baseline"), bm, "ns");
    Ok(())
}
