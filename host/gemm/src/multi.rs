//! Several GPUs of one process: a product cut over devices (issue 25).
//!
//! A call is cut one of three ways ([`Split`]), each device computing its
//! part with its own [`Sgemm`] handle on its own stream:
//!
//! - [`Split::Columns`]: device `d` computes the columns `cols_d` of C,
//!   `C[:, cols_d] = alpha op(A) op(B)[:, cols_d] + beta C[:, cols_d]`,
//!   from the whole of A and its shard of B (a tensor-parallel linear
//!   layer whose weight is cut by output columns);
//! - [`Split::Rows`]: device `d` computes the rows `rows_d` of C from its
//!   shard of A and the whole of B;
//! - [`Split::K`]: device `d` computes the partial product over its slice
//!   `depth_d` of K, `alpha op(A)[:, depth_d] op(B)[depth_d, :]`, device 0
//!   adding `beta C`; C is their sum (a tensor-parallel layer cut along
//!   its input features: the caller's all-reduce, or [`sum_partials`]
//!   for host buffers, adds them, in device order for the same bits on
//!   every run).
//!
//! [`split`] makes the plan: one [`Part`] per device that has work, with
//! the call that device makes on its shards. Shards are matrices of their
//! own, packed (leading dimension their row length, or column length for
//! a column-major call), so that each device holds only its part of an
//! operand; a whole operand keeps the caller's leading dimension. Shard
//! boundaries fall on multiples of [`SHARD_ALIGN`], so every device's
//! tiles are full but its last. [`Part::a_of`], [`Part::b_of`],
//! [`Part::c_of`] cut a part's buffers out of host copies of the whole
//! operands, and [`Part::place`] puts a computed shard of C back.
//!
//! [`MultiGemm`] runs a split call on buffers already resident on each
//! device (one per device, in device order). Every typed error of the
//! one-device library applies per device, wrapped with the device's index
//! ([`GemmError::OnDevice`]): a shard too small for its part, a kernel a
//! device cannot run.
//!
//! Not yet here (issue 25 continues): NCCL (`cudarc::nccl`) for the
//! library's own reduction of a K split and for an all-gather of A
//! overlapped with the product; operands scattered from one device; the
//! bench's `--devices`.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use crate::blas::{Choice, GemmConfig, GemmElement, GemmError, Layout, Op, Operand, Sgemm};
use crate::error::HostError;

/// How a call is cut over the devices (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// C's columns, and B's with them; A whole on every device.
    Columns,
    /// C's rows, and A's with them; B whole on every device.
    Rows,
    /// K: A's columns and B's rows (of `op(A)` and `op(B)`); every
    /// device a partial C of the whole shape.
    K,
}

/// Shards are cut in multiples of this many rows, columns or values of
/// K (the last shard takes what is left): the largest tile side of the
/// library's kernels, so no device computes a ragged tile but its last.
pub const SHARD_ALIGN: usize = 128;

/// `len` cut into at most `parts` contiguous ranges, each a multiple of
/// [`SHARD_ALIGN`] but the last, as even as that allows (the first ones
/// take one unit more); fewer ranges when `len` has fewer units than
/// `parts`. Empty for `parts` or `len` zero.
pub fn shards(len: usize, parts: usize) -> Vec<Range<usize>> {
    if parts == 0 || len == 0 {
        return Vec::new();
    }
    let units = len.div_ceil(SHARD_ALIGN);
    let parts = parts.min(units);
    let (each, more) = (units / parts, units % parts);
    let mut start = 0;
    (0..parts)
        .map(|p| {
            let units = each + usize::from(p < more);
            let end = (start + units * SHARD_ALIGN).min(len);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// One device's part of a split call ([`split`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// The device (index into the handles of a [`MultiGemm`]).
    pub device: usize,
    /// How the call was cut.
    pub how: Split,
    /// The rows and columns of the caller's C this part computes (all of
    /// them for [`Split::K`], whose parts add up), and its values of K.
    pub rows: Range<usize>,
    pub cols: Range<usize>,
    pub depth: Range<usize>,
    /// The call the device makes: on its shards (packed), or on the whole
    /// operand with the caller's leading dimension.
    pub cfg: GemmConfig,
    /// The caller's call.
    whole: GemmConfig,
}

/// The rows and columns of a matrix as stored: `op(X)` is `rows x cols`
/// for `Op::N`, its transpose stored for `Op::T`.
fn stored(op: Op, rows: usize, cols: usize) -> (usize, usize) {
    match op {
        Op::N => (rows, cols),
        Op::T => (cols, rows),
    }
}

/// The plan of `cfg` cut `how` over `devices` devices: one [`Part`] per
/// device with work, in device order (a device whose shard would be empty,
/// when a dimension has fewer [`SHARD_ALIGN`] units than there are
/// devices, gets none). The call is checked first as one device would
/// check it ([`crate::blas::plan`]).
pub fn split(cfg: &GemmConfig, devices: usize, how: Split) -> Result<Vec<Part>, GemmError> {
    if devices == 0 {
        return Err(GemmError::NoDevices);
    }
    crate::blas::plan(cfg, cfg.buffer_lens())?;
    if cfg.batch > 1 {
        return Err(GemmError::SplitBatch { batch: cfg.batch });
    }
    let (m, n, k) = (cfg.m, cfg.n, cfg.k);
    let ranges = match how {
        Split::Columns => shards(n, devices),
        Split::Rows => shards(m, devices),
        Split::K => shards(k, devices),
    };
    Ok(ranges
        .into_iter()
        .enumerate()
        .map(|(device, range)| {
            let len = range.len();
            let mut part = cfg.clone();
            let (rows, cols, depth) = match how {
                // A shard's leading dimension is its packed one (the
                // part's own dense `ld`); whole operands keep the caller's.
                Split::Columns => {
                    part.n = len;
                    (part.ldb, part.ldc) = (part.dense_ld(Operand::B), part.dense_ld(Operand::C));
                    (0..m, range, 0..k)
                }
                Split::Rows => {
                    part.m = len;
                    (part.lda, part.ldc) = (part.dense_ld(Operand::A), part.dense_ld(Operand::C));
                    (range, 0..n, 0..k)
                }
                Split::K => {
                    part.k = len;
                    (part.lda, part.ldb) = (part.dense_ld(Operand::A), part.dense_ld(Operand::B));
                    if device > 0 {
                        part.beta = 0.0;
                    }
                    (0..m, 0..n, range)
                }
            };
            Part {
                device,
                how,
                rows,
                cols,
                depth,
                cfg: part,
                whole: cfg.clone(),
            }
        })
        .collect())
}

/// The `rows x cols` block at `(r0, c0)` of a matrix stored in `layout`
/// with leading dimension `ld`, packed.
fn block<T: Copy>(
    x: &[T],
    layout: Layout,
    ld: usize,
    (r0, c0): (usize, usize),
    (rows, cols): (usize, usize),
) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    match layout {
        Layout::RowMajor => {
            (0..rows).for_each(|i| out.extend_from_slice(&x[(r0 + i) * ld + c0..][..cols]))
        }
        Layout::ColMajor => {
            (0..cols).for_each(|j| out.extend_from_slice(&x[(c0 + j) * ld + r0..][..rows]))
        }
    }
    out
}

/// `GemmError::BufferTooSmall` unless `len >= needs`.
fn holds(arg: &'static str, len: usize, needs: usize) -> Result<(), GemmError> {
    if len < needs {
        return Err(GemmError::BufferTooSmall { arg, len, needs });
    }
    Ok(())
}

impl Part {
    /// The device's A, cut from the caller's whole A (as stored): its
    /// shard, packed, or (columns) the whole of it. Refused if `a` is
    /// shorter than the whole call reads.
    pub fn a_of<T: Copy>(&self, a: &[T]) -> Result<Vec<T>, GemmError> {
        let w = &self.whole;
        holds("a", a.len(), w.buffer_lens().0)?;
        Ok(match self.how {
            Split::Columns => a.to_vec(),
            Split::Rows => {
                let (r, c) = stored(w.op_a, self.rows.len(), w.k);
                let at = stored(w.op_a, self.rows.start, 0);
                block(a, w.layout, w.lda, at, (r, c))
            }
            Split::K => {
                let (r, c) = stored(w.op_a, w.m, self.depth.len());
                let at = stored(w.op_a, 0, self.depth.start);
                block(a, w.layout, w.lda, at, (r, c))
            }
        })
    }

    /// The device's B, cut from the caller's whole B (as stored); refused
    /// if `b` is shorter than the whole call reads.
    pub fn b_of<T: Copy>(&self, b: &[T]) -> Result<Vec<T>, GemmError> {
        let w = &self.whole;
        holds("b", b.len(), w.buffer_lens().1)?;
        Ok(match self.how {
            Split::Rows => b.to_vec(),
            Split::Columns => {
                let (r, c) = stored(w.op_b, w.k, self.cols.len());
                let at = stored(w.op_b, 0, self.cols.start);
                block(b, w.layout, w.ldb, at, (r, c))
            }
            Split::K => {
                let (r, c) = stored(w.op_b, self.depth.len(), w.n);
                let at = stored(w.op_b, self.depth.start, 0);
                block(b, w.layout, w.ldb, at, (r, c))
            }
        })
    }

    /// The device's C before the call, from the caller's C: its shard,
    /// packed; for a K split, the whole of C on device 0 (which adds
    /// `beta C`) and `zero` elsewhere (not read: beta is 0 there). Refused
    /// if `c` is shorter than the whole call writes.
    pub fn c_of<T: Copy>(&self, c: &[T], zero: T) -> Result<Vec<T>, GemmError> {
        let w = &self.whole;
        holds("c", c.len(), w.buffer_lens().2)?;
        Ok(match self.how {
            Split::K if self.device == 0 => c.to_vec(),
            Split::K => vec![zero; c.len()],
            _ => block(
                c,
                w.layout,
                w.ldc,
                (self.rows.start, self.cols.start),
                (self.rows.len(), self.cols.len()),
            ),
        })
    }

    /// Writes the device's computed C shard `shard` (as [`Part::c_of`]
    /// laid it out) into the caller's C. Refused for a K split (add its
    /// partials with [`sum_partials`]) and for a `shard` or `c` too short.
    pub fn place<T: Copy>(&self, shard: &[T], c: &mut [T]) -> Result<(), GemmError> {
        if self.how == Split::K {
            return Err(GemmError::PartialNotPlaced);
        }
        let w = &self.whole;
        holds("c", c.len(), w.buffer_lens().2)?;
        holds("shard", shard.len(), self.cfg.buffer_lens().2)?;
        let (rows, cols, ld) = (self.rows.len(), self.cols.len(), self.cfg.ldc);
        for i in 0..rows {
            for j in 0..cols {
                let (from, to) = match w.layout {
                    Layout::RowMajor => (
                        i * ld + j,
                        (self.rows.start + i) * w.ldc + self.cols.start + j,
                    ),
                    Layout::ColMajor => (
                        j * ld + i,
                        (self.cols.start + j) * w.ldc + self.rows.start + i,
                    ),
                };
                c[to] = shard[from];
            }
        }
        Ok(())
    }
}

/// C of a K split from the devices' partial C's (`partials[d]`, device
/// `d`'s, as [`Part::c_of`] laid them out), added in device order, so the
/// same partials give the same bits on every run. Refused when they
/// differ in length.
pub fn sum_partials(partials: &[Vec<f32>]) -> Result<Vec<f32>, GemmError> {
    let mut c = partials.first().cloned().unwrap_or_default();
    for (device, p) in partials.iter().enumerate().skip(1) {
        if p.len() != c.len() {
            return Err(GemmError::PartialLengths {
                device,
                len: p.len(),
                first: c.len(),
            });
        }
        c.iter_mut().zip(p).for_each(|(c, p)| *c += p);
    }
    Ok(c)
}

/// One [`Sgemm`] handle per device, each on its own stream: a product
/// cut over the devices ([`split`]) on operands already resident on them.
pub struct MultiGemm {
    handles: Vec<Sgemm>,
}

impl MultiGemm {
    /// A handle per stream, in order: device `d` of a split call is
    /// `streams[d]`'s GPU. Two streams of one GPU make two devices of
    /// it (which is how the multi-device path runs on one GPU).
    pub fn new(streams: Vec<Arc<CudaStream>>) -> Result<Self, GemmError> {
        if streams.is_empty() {
            return Err(GemmError::NoDevices);
        }
        let handles = (streams.into_iter().enumerate())
            .map(|(device, s)| Sgemm::new(s).map_err(|e| e.on_device(device)))
            .collect::<Result<_, _>>()?;
        Ok(Self { handles })
    }

    /// The devices.
    pub fn devices(&self) -> usize {
        self.handles.len()
    }

    /// Device `d`'s handle.
    pub fn handle(&self, d: usize) -> Option<&Sgemm> {
        self.handles.get(d)
    }

    /// Enqueues `cfg` cut `how` over the devices, each part on its
    /// device's stream, and returns the parts with what computed each.
    /// `a[d]`, `b[d]`, `c[d]` are device `d`'s buffers, laid out as
    /// [`Part::a_of`], [`Part::b_of`], [`Part::c_of`] say (one per device,
    /// even for a device the plan gives no part). For [`Split::K`], `c[d]`
    /// receives device `d`'s partial C (zeros on a device without a part):
    /// C is their sum. Every part is checked before any is enqueued, so a
    /// refused call changes nothing. Nothing waits for the GPUs.
    pub fn gemm<TA, TB, TC, A, B, C>(
        &self,
        cfg: &GemmConfig,
        how: Split,
        a: &[A],
        b: &[B],
        c: &mut [C],
    ) -> Result<Vec<(Part, Choice)>, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
    {
        let devices = self.devices();
        for (what, given) in [("A", a.len()), ("B", b.len()), ("C", c.len())] {
            if given != devices {
                return Err(GemmError::ShardCount {
                    what,
                    given,
                    devices,
                });
            }
        }
        let parts = split(cfg, devices, how)?;
        // Every part checked (its buffers, a kernel its device runs) before
        // any is enqueued: a refused call changes no device's C.
        let storage = crate::blas::storage_of::<TA, TB, TC>();
        for part in &parts {
            let d = part.device;
            let lens = (a[d].len(), b[d].len(), c[d].len());
            self.handles[d]
                .choose_for(&part.cfg, lens, storage)
                .map_err(|e| e.on_device(d))?;
        }
        // A K split's devices without a part (K shorter than a unit per
        // device) hold zeros, so that an all-reduce over every device adds
        // nothing of theirs.
        if how == Split::K {
            for (d, c) in c.iter_mut().enumerate().skip(parts.len()) {
                crate::gpu::memset_on(self.handles[d].stream(), c, 0).map_err(|source| {
                    let doing = "zeroing a partial C".to_string();
                    GemmError::from(HostError::Cuda { doing, source }).on_device(d)
                })?;
            }
        }
        let mut done = Vec::with_capacity(parts.len());
        for part in parts {
            let d = part.device;
            let choice = (self.handles[d].gemm(&part.cfg, &a[d], &b[d], &mut c[d]))
                .map_err(|e| e.on_device(d))?;
            done.push((part, choice));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shards cover the length once, in order, in whole units but the
    /// last, as even as units allow.
    #[test]
    fn shards_cover_the_length_in_whole_units() {
        for (len, parts) in [
            (1, 1),
            (1, 4),
            (128, 2),
            (129, 2),
            (1000, 3),
            (16384, 4),
            (300, 8),
        ] {
            let s = shards(len, parts);
            assert!(!s.is_empty() && s.len() <= parts, "{len} / {parts}: {s:?}");
            assert_eq!(s[0].start, 0);
            assert_eq!(s.last().unwrap().end, len);
            for w in s.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!(w[0].len() % SHARD_ALIGN, 0, "{len} / {parts}: {s:?}");
                assert!(w[0].len() >= w[1].len());
            }
        }
        assert_eq!(shards(1000, 3), vec![0..384, 384..768, 768..1000]);
        assert_eq!(shards(300, 8), vec![0..128, 128..256, 256..300]);
        assert_eq!(shards(16384, 2), vec![0..8192, 8192..16384]);
        assert!(shards(0, 2).is_empty() && shards(5, 0).is_empty());
    }

    /// Zero devices, a batch and a bad call are refused with their own
    /// errors.
    #[test]
    fn split_refuses_what_it_cannot_cut() {
        let cfg = GemmConfig::new(64, 64, 64);
        assert!(matches!(
            split(&cfg, 0, Split::Rows),
            Err(GemmError::NoDevices)
        ));
        let batched = cfg.clone().batched(2, 64 * 64, 64 * 64, 64 * 64);
        assert!(matches!(
            split(&batched, 2, Split::K),
            Err(GemmError::SplitBatch { batch: 2 })
        ));
        let bad = GemmConfig::new(0, 64, 64);
        assert!(matches!(
            split(&bad, 2, Split::Columns),
            Err(GemmError::ZeroDimension { .. })
        ));
    }
}
