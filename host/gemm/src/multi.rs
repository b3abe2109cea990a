//! Several GPUs of one process: a product cut over devices (issue 25).
//!
//! A call is cut one of four ways ([`Split`]), each device computing its
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
//!   every run);
//! - [`Split::Grid`]: C in `rows x cols` panels, device `i * cols + j`
//!   computing panel `(i, j)` from its shard of A's rows and of B's
//!   columns, so that every operand is cut: what runs a product larger
//!   than one GPU's memory ([`fitting`] picks the cut whose largest part
//!   holds the fewest bytes, [`footprint`] says how many).
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
//! With the `nccl` feature, [`MultiGemm::with_nccl`] adds an NCCL
//! communicator per device (cudarc's `nccl`), for the two calls that move
//! data between devices: a K split reduced on the devices, every device
//! ending with C, the same bits on every run ([`Reduction`] plans it,
//! `MultiGemm::gemm_reduced` runs it), and an all-gather of A overlapped
//! with the product ([`Gather`], `MultiGemm::gather_gemm`). The plans are
//! plain data that the emulator tests follow step by step
//! (tests/tests/multi.rs); NCCL and the streams run them on GPUs.
//!
//! Operands on one device reach the others through `MultiGemm::scatter`
//! (each shard packed by a 2D copy and sent through NCCL), and
//! `MultiGemm::collect` brings the shards of C back ([`Share`] and
//! [`Lines`] say what each device holds and where it lies).
//!
//! Not yet here (issue 25 continues): products larger than all the
//! devices' memory together (panels streamed from the host).

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use crate::blas::{
    Choice, GemmConfig, GemmElement, GemmError, Layout, Op, Operand, PlaneSum, Sgemm,
};
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
    /// C in panels, `rows x cols` of them, one per device (device
    /// `i * cols + j` computes panel `(i, j)`): A's rows and B's columns
    /// with them, so that each device holds a shard of every operand
    /// (what lets a product larger than one GPU's memory run: [`fitting`]).
    Grid { rows: usize, cols: usize },
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

/// A device's share of a call: the device, and its rows, columns and
/// depth of the call.
type Cut = (usize, Range<usize>, Range<usize>, Range<usize>);

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
    // Each device's rows, columns and depth of the call.
    let cuts: Vec<Cut> = match how {
        Split::Columns => (shards(n, devices).into_iter().enumerate())
            .map(|(d, r)| (d, 0..m, r, 0..k))
            .collect(),
        Split::Rows => (shards(m, devices).into_iter().enumerate())
            .map(|(d, r)| (d, r, 0..n, 0..k))
            .collect(),
        Split::K => (shards(k, devices).into_iter().enumerate())
            .map(|(d, r)| (d, 0..m, 0..n, r))
            .collect(),
        Split::Grid { rows, cols } => {
            if rows.checked_mul(cols) != Some(devices) {
                return Err(GemmError::GridShape {
                    rows,
                    cols,
                    devices,
                });
            }
            let across = shards(n, cols);
            (shards(m, rows).into_iter().enumerate())
                .flat_map(|(i, r)| {
                    let across = across.iter().enumerate();
                    across.map(move |(j, c)| (i * cols + j, r.clone(), c.clone(), 0..k))
                })
                .collect()
        }
    };
    let (a_cut, b_cut) = (how.cuts_a(), how.cuts_b());
    Ok(cuts
        .into_iter()
        .map(|(device, rows, cols, depth)| {
            let mut part = cfg.clone();
            (part.m, part.n, part.k) = (rows.len(), cols.len(), depth.len());
            // A shard's leading dimension is its packed one (the part's
            // own dense `ld`); whole operands keep the caller's.
            if a_cut {
                part.lda = part.dense_ld(Operand::A);
            }
            if b_cut {
                part.ldb = part.dense_ld(Operand::B);
            }
            if how == Split::K {
                if device > 0 {
                    part.beta = 0.0;
                }
            } else if a_cut || b_cut {
                part.ldc = part.dense_ld(Operand::C);
            }
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

impl Split {
    /// Each device holds a shard of A (not all of it).
    fn cuts_a(self) -> bool {
        !matches!(self, Split::Columns)
    }

    /// Each device holds a shard of B.
    fn cuts_b(self) -> bool {
        !matches!(self, Split::Rows)
    }

    /// The ways to cut a call over `devices` devices: by columns, rows
    /// and K, then every grid of panels `rows x cols = devices` with
    /// both sides above 1.
    pub fn all_for(devices: usize) -> Vec<Split> {
        let grids = (2..devices)
            .filter(|&r| devices.is_multiple_of(r) && devices / r > 1)
            .map(|rows| Split::Grid {
                rows,
                cols: devices / rows,
            });
        [Split::Columns, Split::Rows, Split::K]
            .into_iter()
            .chain(grids)
            .collect()
    }
}

/// Bytes the largest part of `cfg` cut `how` over `devices` devices holds
/// on its device: its A, B and C (elements of `bytes.0`, `bytes.1`,
/// `bytes.2` bytes), as [`split`] cuts them (a K split's parts each a
/// whole C; the scratch of [`Reduction`] is not counted).
pub fn footprint(
    cfg: &GemmConfig,
    devices: usize,
    how: Split,
    bytes: (usize, usize, usize),
) -> Result<usize, GemmError> {
    let parts = split(cfg, devices, how)?;
    let held = |p: &Part| {
        let (a, b, c) = p.cfg.buffer_lens();
        a * bytes.0 + b * bytes.1 + c * bytes.2
    };
    Ok(parts.iter().map(held).max().unwrap_or(0))
}

/// The cut of `cfg` over `devices` devices whose largest part holds the
/// fewest bytes ([`footprint`]; ties go to the earlier of
/// [`Split::all_for`]), with those bytes, if they fit in `memory` bytes
/// per device; `GemmError::TooLargeForDevices` if no cut fits.
pub fn fitting(
    cfg: &GemmConfig,
    devices: usize,
    memory: usize,
    bytes: (usize, usize, usize),
) -> Result<(Split, usize), GemmError> {
    let mut best: Option<(Split, usize)> = None;
    for how in Split::all_for(devices) {
        let held = footprint(cfg, devices, how, bytes)?;
        if best.is_none_or(|(_, b)| held < b) {
            best = Some((how, held));
        }
    }
    match best {
        Some((how, held)) if held <= memory => Ok((how, held)),
        Some((_, needs)) => Err(GemmError::TooLargeForDevices {
            needs,
            memory,
            devices,
        }),
        None => Err(GemmError::NoDevices),
    }
}

/// Where a shard lies in a whole operand as stored: `lines` lines (rows
/// of a row-major matrix, columns of a column-major one) of `line`
/// values, `pitch` values apart, the first at value `start`. The shard
/// is these lines packed, one after the other (its own pitch `line`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lines {
    pub start: usize,
    pub pitch: usize,
    pub lines: usize,
    pub line: usize,
}

impl Lines {
    /// The `rows x cols` block at `(r0, c0)` of a matrix stored in
    /// `layout` with leading dimension `ld`.
    fn of(
        layout: Layout,
        ld: usize,
        (r0, c0): (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Self {
        let (start, lines, line) = match layout {
            Layout::RowMajor => (r0 * ld + c0, rows, cols),
            Layout::ColMajor => (c0 * ld + r0, cols, rows),
        };
        Self {
            start,
            pitch: ld,
            lines,
            line,
        }
    }

    /// Values of the packed shard.
    pub fn len(&self) -> usize {
        self.lines * self.line
    }

    /// No values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value after the last one the lines take in the whole operand.
    pub fn end(&self) -> usize {
        match self.lines {
            0 => self.start,
            lines => self.start + (lines - 1) * self.pitch + self.line,
        }
    }

    /// The shard, packed, out of the whole `x` (long enough: checked by
    /// the caller).
    fn cut<T: Copy>(&self, x: &[T]) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        for l in 0..self.lines {
            out.extend_from_slice(&x[self.start + l * self.pitch..][..self.line]);
        }
        out
    }

    /// Writes the packed `shard` into its place in the whole `x`.
    fn put<T: Copy>(&self, shard: &[T], x: &mut [T]) {
        for l in 0..self.lines {
            let to = self.start + l * self.pitch;
            x[to..to + self.line].copy_from_slice(&shard[l * self.line..][..self.line]);
        }
    }
}

/// What a device holds of one of the caller's operands for its part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// The whole operand, with the caller's leading dimension.
    Whole,
    /// A shard, packed.
    Lines(Lines),
    /// As many zeros as the whole operand (a K split's C beyond device
    /// 0, which the call does not read: beta is 0 there).
    Zeros,
}

/// `GemmError::BufferTooSmall` unless `len >= needs`.
fn holds(arg: &'static str, len: usize, needs: usize) -> Result<(), GemmError> {
    if len < needs {
        return Err(GemmError::BufferTooSmall { arg, len, needs });
    }
    Ok(())
}

impl Part {
    /// What the device holds of A.
    pub fn a_share(&self) -> Share {
        let w = &self.whole;
        let (rows, depth) = match self.how {
            Split::Columns => return Share::Whole,
            Split::Rows | Split::Grid { .. } => (&self.rows, 0..w.k),
            Split::K => (&(0..w.m), self.depth.clone()),
        };
        let at = stored(w.op_a, rows.start, depth.start);
        let size = stored(w.op_a, rows.len(), depth.len());
        Share::Lines(Lines::of(w.layout, w.lda, at, size))
    }

    /// What the device holds of B.
    pub fn b_share(&self) -> Share {
        let w = &self.whole;
        let (depth, cols) = match self.how {
            Split::Rows => return Share::Whole,
            Split::Columns | Split::Grid { .. } => (0..w.k, &self.cols),
            Split::K => (self.depth.clone(), &(0..w.n)),
        };
        let at = stored(w.op_b, depth.start, cols.start);
        let size = stored(w.op_b, depth.len(), cols.len());
        Share::Lines(Lines::of(w.layout, w.ldb, at, size))
    }

    /// What the device holds of C before the call: for a K split, the
    /// whole of C on device 0 (which adds `beta C`) and zeros elsewhere.
    pub fn c_share(&self) -> Share {
        let w = &self.whole;
        match self.how {
            Split::K if self.device == 0 => Share::Whole,
            Split::K => Share::Zeros,
            _ => Share::Lines(Lines::of(
                w.layout,
                w.ldc,
                (self.rows.start, self.cols.start),
                (self.rows.len(), self.cols.len()),
            )),
        }
    }

    /// The device's buffer of `share` out of the caller's whole `x`.
    fn cut<T: Copy>(share: Share, x: &[T], zero: T) -> Vec<T> {
        match share {
            Share::Whole => x.to_vec(),
            Share::Lines(lines) => lines.cut(x),
            Share::Zeros => vec![zero; x.len()],
        }
    }

    /// The device's A, cut from the caller's whole A (as stored): its
    /// shard, packed, or (columns) the whole of it. Refused if `a` is
    /// shorter than the whole call reads.
    pub fn a_of<T: Copy>(&self, a: &[T]) -> Result<Vec<T>, GemmError> {
        holds("a", a.len(), self.whole.buffer_lens().0)?;
        Ok(match self.a_share() {
            Share::Lines(lines) => lines.cut(a),
            _ => a.to_vec(),
        })
    }

    /// The device's B, cut from the caller's whole B (as stored); refused
    /// if `b` is shorter than the whole call reads.
    pub fn b_of<T: Copy>(&self, b: &[T]) -> Result<Vec<T>, GemmError> {
        holds("b", b.len(), self.whole.buffer_lens().1)?;
        Ok(match self.b_share() {
            Share::Lines(lines) => lines.cut(b),
            _ => b.to_vec(),
        })
    }

    /// The device's C before the call, from the caller's C: its shard,
    /// packed; for a K split, the whole of C on device 0 and `zero`
    /// elsewhere ([`Part::c_share`]). Refused if `c` is shorter than the
    /// whole call writes.
    pub fn c_of<T: Copy>(&self, c: &[T], zero: T) -> Result<Vec<T>, GemmError> {
        holds("c", c.len(), self.whole.buffer_lens().2)?;
        Ok(Self::cut(self.c_share(), c, zero))
    }

    /// Writes the device's computed C shard `shard` (as [`Part::c_of`]
    /// laid it out) into the caller's C. Refused for a K split (add its
    /// partials with [`sum_partials`]) and for a `shard` or `c` too short.
    pub fn place<T: Copy>(&self, shard: &[T], c: &mut [T]) -> Result<(), GemmError> {
        let Share::Lines(lines) = self.c_share() else {
            return Err(GemmError::PartialNotPlaced);
        };
        holds("c", c.len(), self.whole.buffer_lens().2.max(lines.end()))?;
        holds("shard", shard.len(), lines.len())?;
        lines.put(shard, c);
        Ok(())
    }

    /// The caller's call.
    pub fn whole(&self) -> &GemmConfig {
        &self.whole
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

/// How a K split's partial C's become C on every device, the same bits
/// on every run for a given device count: a reduce-scatter, then an
/// all-gather, both moving data only (NCCL send, receive and broadcast,
/// which add nothing), with every sum made by the library's own
/// `reduce_slices` in device order.
///
/// C as stored is `rows` rows of `len` values (m rows of n for a
/// row-major call, n columns of m for a column-major one). Each device
/// computes its partial product, alpha 1 and beta 0, into a dense plane
/// of C's shape (zeros on a device the split gives no part). Then:
///
/// 1. device `e` receives rows `owned[e]` of every device's plane, one
///    slot per device, in device order ([`Reduction::transfers`]);
/// 2. it adds its slots, slot 0 first, over its own plane's rows
///    `owned[e]` ([`Reduction::owned_sum`]): the sum of every partial;
/// 3. each device's summed rows are broadcast to the others, into their
///    planes, which then all hold the whole sum;
/// 4. every device computes `C = alpha * sum + beta * C` on its own C
///    ([`Reduction::final_sum`]).
///
/// Each device receives `(devices - 1) / devices` of a plane in steps 1
/// and 3 each, what a ring all-reduce moves, and holds a plane and its
/// slots as scratch ([`Reduction::slots`]: `devices` times its rows, about
/// one plane when the rows divide evenly). Every element of C is the same sum, made in the same order,
/// on every device and every run.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// C as stored: rows of `len` values.
    pub rows: usize,
    pub len: usize,
    /// The rows each device adds up (`owned[d]`, empty for a device past
    /// the rows' [`shards`]).
    pub owned: Vec<Range<usize>>,
    /// The caller's call.
    whole: GemmConfig,
}

/// One move of step 1 of a [`Reduction`]: values `src` of device
/// `from`'s plane into values `dst` of device `to`'s slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub from: usize,
    pub to: usize,
    pub src: Range<usize>,
    pub dst: Range<usize>,
}

impl Reduction {
    /// The reduction of `cfg`'s K split over `devices` devices (`cfg`
    /// checked by [`split`]).
    pub fn of(cfg: &GemmConfig, devices: usize) -> Self {
        let (rows, len) = match cfg.layout {
            Layout::RowMajor => (cfg.m, cfg.n),
            Layout::ColMajor => (cfg.n, cfg.m),
        };
        let mut owned = shards(rows, devices);
        owned.resize(devices, rows..rows);
        Self {
            rows,
            len,
            owned,
            whole: cfg.clone(),
        }
    }

    /// The devices.
    pub fn devices(&self) -> usize {
        self.owned.len()
    }

    /// Values in a plane (C's shape, dense).
    pub fn plane(&self) -> usize {
        self.rows * self.len
    }

    /// The values of a dense plane that rows `rows` take.
    pub fn span(&self, rows: &Range<usize>) -> Range<usize> {
        rows.start * self.len..rows.end * self.len
    }

    /// Values in device `d`'s slots: one per device, of its rows.
    pub fn slots(&self, d: usize) -> usize {
        self.devices() * self.span(&self.owned[d]).len()
    }

    /// The call `part` makes for its partial: alpha 1, beta 0, into a
    /// dense plane.
    pub fn partial(&self, part: &Part) -> GemmConfig {
        let mut cfg = part.cfg.clone().scalars(1.0, 0.0);
        cfg.ldc = cfg.dense_ld(Operand::C);
        cfg
    }

    /// Step 1's moves, every device's rows to their owner, in device
    /// order of senders for each owner (empty moves left out).
    pub fn transfers(&self) -> Vec<Transfer> {
        let mut moves = Vec::new();
        for (to, rows) in self.owned.iter().enumerate() {
            let src = self.span(rows);
            for from in 0..self.devices() {
                if !src.is_empty() {
                    let at = from * src.len();
                    moves.push(Transfer {
                        from,
                        to,
                        src: src.clone(),
                        dst: at..at + src.len(),
                    });
                }
            }
        }
        moves
    }

    /// Step 2 on device `d`: its slots added, slot 0 first, into the
    /// rows `owned[d]` of its plane (values [`Reduction::span`] of them);
    /// `None` for a device that owns no rows.
    pub fn owned_sum(&self, d: usize) -> Option<PlaneSum> {
        let rows = self.owned[d].len();
        (rows > 0).then_some(PlaneSum {
            rows,
            cols: self.len,
            ldc: self.len,
            alpha: 1.0,
            beta: 0.0,
            slices: self.devices(),
        })
    }

    /// Step 4: `C = alpha * sum + beta * C` from the summed plane into the
    /// caller's C (its leading dimension).
    pub fn final_sum(&self) -> PlaneSum {
        PlaneSum {
            rows: self.rows,
            cols: self.len,
            ldc: self.whole.ldc,
            alpha: self.whole.alpha,
            beta: self.whole.beta,
            slices: 1,
        }
    }
}

/// An all-gather of A overlapped with the product: A is cut by rows over
/// the devices (device `j` holds the rows `chunks[j]` of `op(A)`), B and
/// C by columns as [`Split::Columns`] cuts them. Each device gathers the
/// other devices' rows of A into its whole copy of A, chunk by chunk (a
/// broadcast from each chunk's owner, in device order, on a second
/// stream), and multiplies each chunk as it arrives, its own first: C's
/// rows `chunks[j]` of its columns are `op(A)[chunks[j], :] op(B)[:, cols]`.
///
/// A chunk of op(A)'s rows is one stretch of memory when those rows are
/// A's rows as stored: a row-major call with `op_a = N`, or a
/// column-major one with `op_a = T` (the layouts a tensor-parallel
/// layer's activations have); other layouts are refused
/// ([`GemmError::GatherLayout`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Gather {
    /// Each device's columns of C and the call over all rows (as
    /// [`split`] by [`Split::Columns`] gives them).
    pub parts: Vec<Part>,
    /// The rows of op(A) each device holds (`chunks[j]` on device `j`;
    /// fewer chunks than devices when m has fewer [`SHARD_ALIGN`] units).
    pub chunks: Vec<Range<usize>>,
    devices: usize,
}

impl Gather {
    /// The plan of `cfg` over `devices` devices, `cfg` checked as
    /// [`split`] checks it.
    pub fn of(cfg: &GemmConfig, devices: usize) -> Result<Self, GemmError> {
        let parts = split(cfg, devices, Split::Columns)?;
        let rows_stored = matches!(
            (cfg.layout, cfg.op_a),
            (Layout::RowMajor, Op::N) | (Layout::ColMajor, Op::T)
        );
        if !rows_stored {
            return Err(GemmError::GatherLayout {
                layout: cfg.layout,
                op_a: cfg.op_a,
            });
        }
        Ok(Self {
            parts,
            chunks: shards(cfg.m, devices),
            devices,
        })
    }

    /// The values of A that chunk `j` spans (the caller's leading
    /// dimension: padding between its rows included).
    pub fn a_span(&self, j: usize) -> Range<usize> {
        let (rows, w) = (&self.chunks[j], &self.parts[0].whole);
        rows.start * w.lda..(rows.end - 1) * w.lda + w.k
    }

    /// The order device `d` multiplies the chunks in: its own first (no
    /// wait), then the others as their broadcasts arrive.
    pub fn order(&self, d: usize) -> Vec<usize> {
        let own = (d < self.chunks.len()).then_some(d);
        own.into_iter()
            .chain((0..self.chunks.len()).filter(|&j| Some(j) != own))
            .collect()
    }

    /// The call `part` makes on chunk `j`: the part's call over the
    /// chunk's rows, with the offsets (elements) at which its A (the
    /// whole A) and its C (the part's C) start.
    pub fn chunk_call(&self, part: &Part, j: usize) -> (GemmConfig, usize, usize) {
        let rows = &self.chunks[j];
        let mut cfg = part.cfg.clone();
        cfg.m = rows.len();
        let c_at = match cfg.layout {
            Layout::RowMajor => rows.start * cfg.ldc,
            Layout::ColMajor => rows.start,
        };
        (cfg, rows.start * part.cfg.lda, c_at)
    }

    /// The devices.
    pub fn devices(&self) -> usize {
        self.devices
    }
}

/// One [`Sgemm`] handle per device, each on its own stream: a product
/// cut over the devices ([`split`]) on operands already resident on them.
pub struct MultiGemm {
    handles: Vec<Sgemm>,
    /// The devices' NCCL communicators ([`MultiGemm::with_nccl`]).
    #[cfg(feature = "nccl")]
    comms: Option<nccl::Comms>,
}

#[cfg(feature = "nccl")]
mod nccl;
#[cfg(feature = "nccl")]
mod scatter;
#[cfg(feature = "nccl")]
pub use scatter::Scattered;

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
        Ok(Self {
            handles,
            #[cfg(feature = "nccl")]
            comms: None,
        })
    }

    /// `GemmError::WrongDevice` unless `stream` (a buffer's) is on device
    /// `d`'s GPU.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    fn check_on(&self, d: usize, arg: &'static str, stream: &CudaStream) -> Result<(), GemmError> {
        let (on, expected) = (
            stream.context().ordinal(),
            self.handles[d].stream().context().ordinal(),
        );
        if on != expected {
            return Err(GemmError::WrongDevice { arg, on, expected }.on_device(d));
        }
        Ok(())
    }

    /// `ShardCount` unless A, B and C come one per device.
    fn check_counts(&self, a: usize, b: usize, c: usize) -> Result<(), GemmError> {
        let devices = self.devices();
        for (what, given) in [("A", a), ("B", b), ("C", c)] {
            if given != devices {
                return Err(GemmError::ShardCount {
                    what,
                    given,
                    devices,
                });
            }
        }
        Ok(())
    }

    /// The devices.
    pub fn devices(&self) -> usize {
        self.handles.len()
    }

    /// Device `d`'s handle.
    pub fn handle(&self, d: usize) -> Option<&Sgemm> {
        self.handles.get(d)
    }

    /// Bytes a part may take on every device: the least free memory of
    /// the devices, less a sixteenth (at least 256 MiB) for the driver,
    /// split-K's workspace and padded copies; streams of one GPU share
    /// its free memory.
    pub fn memory_per_device(&self) -> Result<usize, GemmError> {
        let mut least = usize::MAX;
        let ordinals: Vec<usize> = (self.handles.iter())
            .map(|h| h.stream().context().ordinal())
            .collect();
        for (d, h) in self.handles.iter().enumerate() {
            let (free, _) = (h.stream().context().mem_get_info()).map_err(|source| {
                let doing = "reading free memory".to_string();
                GemmError::from(HostError::Cuda { doing, source }).on_device(d)
            })?;
            // Streams of one GPU share its memory.
            let sharing = ordinals.iter().filter(|&&o| o == ordinals[d]).count();
            least = least.min(free / sharing);
        }
        Ok(least.saturating_sub((least / 16).max(256 << 20)))
    }

    /// Runs `cfg` on host operands too large for one GPU: cut over the
    /// devices by [`fitting`] (the cut whose largest part holds the
    /// fewest bytes, within [`MultiGemm::memory_per_device`]), each part's
    /// buffers copied to its device, the product run, and C's shards
    /// placed (or a K split's partials added in device order) in `c`.
    /// Returns the cut and each part with what computed it. Waits for the
    /// devices. `GemmError::TooLargeForDevices` when no cut fits.
    pub fn gemm_host<TA, TB>(
        &self,
        cfg: &GemmConfig,
        a: &[TA],
        b: &[TB],
        c: &mut [f32],
    ) -> Result<(Split, Vec<(Part, Choice)>), GemmError>
    where
        TA: GemmElement + cudarc::driver::DeviceRepr + Copy,
        TB: GemmElement + cudarc::driver::DeviceRepr + Copy,
    {
        let (la, lb, lc) = cfg.buffer_lens();
        for (arg, len, needs) in [("a", a.len(), la), ("b", b.len(), lb), ("c", c.len(), lc)] {
            if len < needs {
                return Err(GemmError::BufferTooSmall { arg, len, needs });
            }
        }
        let bytes = (size_of::<TA>(), size_of::<TB>(), size_of::<f32>());
        let (how, _) = fitting(cfg, self.devices(), self.memory_per_device()?, bytes)?;
        let parts = split(cfg, self.devices(), how)?;
        let cuda = |d: usize, doing: &str| {
            let doing = doing.to_string();
            move |source| GemmError::from(HostError::Cuda { doing, source }).on_device(d)
        };
        let (mut da, mut db, mut dc) = (Vec::new(), Vec::new(), Vec::new());
        for (d, h) in self.handles.iter().enumerate() {
            let s = h.stream();
            match parts.iter().find(|p| p.device == d) {
                // -0 where a K split's device holds zeros: x + -0 is x for
                // every x, so the padding of C keeps its bits in the sum.
                Some(p) => {
                    // A whole operand goes as it is, not through a copy.
                    let up_a = match p.a_share() {
                        Share::Lines(l) => s.clone_htod(&l.cut(a)),
                        _ => s.clone_htod(&a[..la]),
                    };
                    let up_b = match p.b_share() {
                        Share::Lines(l) => s.clone_htod(&l.cut(b)),
                        _ => s.clone_htod(&b[..lb]),
                    };
                    da.push(up_a.map_err(cuda(d, "copying A"))?);
                    db.push(up_b.map_err(cuda(d, "copying B"))?);
                    dc.push(
                        s.clone_htod(&p.c_of(c, -0.0)?)
                            .map_err(cuda(d, "copying C"))?,
                    );
                }
                // A device without a part: buffers the call does not read.
                None => {
                    da.push(s.clone_htod(&a[..1]).map_err(cuda(d, "copying A"))?);
                    db.push(s.clone_htod(&b[..1]).map_err(cuda(d, "copying B"))?);
                    dc.push(s.clone_htod(&c[..1]).map_err(cuda(d, "copying C"))?);
                }
            }
        }
        let done = self.gemm(cfg, how, &da, &db, &mut dc)?;
        let mut partials = Vec::new();
        for (part, _) in &done {
            let d = part.device;
            let shard =
                (self.handles[d].stream().clone_dtoh(&dc[d])).map_err(cuda(d, "copying C back"))?;
            match how {
                Split::K => partials.push(shard),
                _ => part.place(&shard, c)?,
            }
        }
        if how == Split::K {
            let sum = sum_partials(&partials)?;
            c[..sum.len()].copy_from_slice(&sum);
        }
        Ok((how, done))
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
        self.check_counts(a.len(), b.len(), c.len())?;
        let parts = split(cfg, self.devices(), how)?;
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

    /// A block's lines in both layouts: where they start, how far apart,
    /// how many and how long.
    #[test]
    fn lines_of_a_block() {
        let row = Lines::of(Layout::RowMajor, 10, (1, 2), (2, 3));
        assert_eq!((row.start, row.pitch, row.lines, row.line), (12, 10, 2, 3));
        assert_eq!((row.len(), row.end()), (6, 25));
        let col = Lines::of(Layout::ColMajor, 10, (1, 2), (2, 3));
        assert_eq!((col.start, col.pitch, col.lines, col.line), (21, 10, 3, 2));
        let x: Vec<u32> = (0..50).collect();
        assert_eq!(col.cut(&x), [21, 22, 31, 32, 41, 42]);
        assert_eq!(col.end(), 43);
        let mut back = vec![0u32; 50];
        row.put(&row.cut(&x), &mut back);
        assert_eq!(back[12..15], [12, 13, 14]);
        assert_eq!(back[22..25], [22, 23, 24]);
        assert_eq!(back.iter().filter(|&&v| v != 0).count(), 6);
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
