//! Not a ladder step: quantizing f32, BF16 or FP16 matrices to FP8 (issue
//! 21), so that a program holding 16-bit tensors gets to an FP8 product
//! in two calls. Each block of values gets a scale, the factor that
//! dequantizes it (`value ~ stored * scale`, what cuBLASLt's scale
//! pointers and DeepGEMM's scale tensors hold):
//!
//! - `scale = amax / MAX`, where `amax` is the block's largest magnitude
//!   and `MAX` the FP8 type's largest finite value ([`Fp8::MAX`]: 448 for
//!   E4M3, 57344 for E5M2), so that the block's largest value lands on
//!   the type's largest; 1 for a block of zeros;
//! - each value is stored as `x / scale` rounded to nearest, ties to
//!   even, saturating (`cvt.rn.satfinite`, `device::math::to_e4m3_bits`),
//!   the division IEEE's (`div.rn.f32`), so the GPU and the emulator
//!   write the same bits;
//! - a block holding an infinity or a NaN gets a non-finite scale (the
//!   maximum keeps NaN: `device::warp::warp_max_bits`), and its products
//!   are NaN: garbage in, NaN out, never a silent finite value.
//!
//! The blocks ([`Quantize`]): one per tensor (three launches: each 128 x
//! 128 tile's amax, [`QuantStep::Amax`]; their maximum, the scale,
//! [`QuantStep::Scale`]; the values, [`QuantStep::Tensor`]), or per
//! block in one launch: 1 x 128 along K for A ([`QuantStep::Rows`]) and
//! 128 x 128 for B^T ([`QuantStep::Tiles`]), DeepSeek-V3's scales, laid
//! out as step 26 and cuBLASLt read them (`elem::Scaling::a_scales`,
//! `b_scales`). Nothing is atomic and every maximum is of integers, so
//! the results do not depend on the order blocks run in: deterministic.
//!
//! Where data lives: a block of 256 threads (8 warps) takes 128 columns
//! of [`QuantStep::block_rows`] rows; each lane reads columns `lane`,
//! `lane + 32`, `lane + 64` and `lane + 96` of its warp's rows (each
//! read instruction of a warp is 32 consecutive elements: coalesced), so
//! that the block's amax needs one warp maximum (`shfl.sync`) and, where
//! a scale spans several warps, eight words of shared memory and one
//! barrier. The values are read twice, the second time from L1 or L2.
//! A memory-bound pass (the source read twice, the second time mostly
//! from L1 or L2, and a byte written per value): `cargo run --release -p
//! host --example fp8 M N K` times it; the measurements live in
//! docs/measurements.md (sixteenth session).

use crate::device::warp::{WARP, lane, warp_idx, warp_max_bits};
use crate::device::{
    GlobalIn, GlobalOut, SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x,
};
use crate::elem::{Elem, Element, Fp8, SCALE_BLOCK};

/// Threads of a block: 8 warps in x.
pub const THREADS: usize = 256;
/// Warps of a block.
pub const WARPS: usize = THREADS / WARP;
/// Columns a block takes: one K block of scales.
pub const COLS: usize = SCALE_BLOCK;
/// Columns each lane takes in each of its rows, [`WARP`] apart.
const PER_LANE: usize = COLS / WARP;
/// Shared memory of a block: one word per warp, for the block's amax.
pub const SHARED_BYTES: usize = WARPS * 4;

/// The parameters every quantizer entry takes after its three pointers
/// (`#[repr(C)]`, passed by value as `GemmParams` is).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuantParams {
    /// The source's rows and columns (of the partial amaxes for
    /// [`QuantStep::Scale`]: `rows` of them in one row).
    pub rows: u32,
    pub cols: u32,
    /// Elements between the source's rows.
    pub ld: u32,
    /// Elements between the FP8 output's rows.
    pub ld_out: u32,
    /// Where the scale of block `(i, j)` is written (`i` the block's rows
    /// / its height, `j` its columns / 128): `i * row_stride + j *
    /// col_stride`.
    pub row_stride: u32,
    pub col_stride: u32,
}

/// How a matrix is cut into blocks that share a scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quantize {
    /// One scale for the whole matrix (cuBLASLt's per-tensor scales, step
    /// 25 and step 26's `_promoted` instances).
    Tensor,
    /// One scale per row per 128 columns: A's block scales (`rows = m`,
    /// `cols = k`), stored K block by K block, `Scaling::a_scales`.
    Rows,
    /// One scale per 128 x 128 block: B^T's block scales (`rows = n`,
    /// `cols = k`), `Scaling::b_scales`.
    Tiles,
}

impl Quantize {
    /// Every way.
    pub const ALL: [Quantize; 3] = [Quantize::Tensor, Quantize::Rows, Quantize::Tiles];

    /// How many f32 scales a `rows x cols` matrix gets.
    pub const fn scales(self, rows: usize, cols: usize) -> usize {
        match self {
            Quantize::Tensor => 1,
            Quantize::Rows => crate::elem::Scaling::a_scales(rows, cols),
            Quantize::Tiles => crate::elem::Scaling::b_scales(cols, rows),
        }
    }

    /// `(row_stride, col_stride)` of the scales ([`QuantParams`]).
    pub const fn strides(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            Quantize::Tensor => (0, 0),
            Quantize::Rows => (1, crate::elem::Scaling::a_scales_stride(rows)),
            Quantize::Tiles => (crate::elem::Scaling::b_scales_stride(cols), 1),
        }
    }

    /// The launches, in order.
    pub const fn steps(self) -> &'static [QuantStep] {
        match self {
            Quantize::Tensor => &[QuantStep::Amax, QuantStep::Scale, QuantStep::Tensor],
            Quantize::Rows => &[QuantStep::Rows],
            Quantize::Tiles => &[QuantStep::Tiles],
        }
    }

    /// `tensor`, `rows`, `tiles`.
    pub const fn name(self) -> &'static str {
        match self {
            Quantize::Tensor => "tensor",
            Quantize::Rows => "rows",
            Quantize::Tiles => "tiles",
        }
    }
}

/// One launch of a quantization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantStep {
    /// Scales per row per 128 columns, and the values ([`quantize_blocks`]
    /// with `ROWS` 1).
    Rows,
    /// Scales per 128 x 128 block, and the values (`ROWS` 128).
    Tiles,
    /// Per tensor, 1 of 3: each 128 x 128 tile's amax, into a workspace
    /// of [`QuantStep::partials`] floats.
    Amax,
    /// Per tensor, 2 of 3: the largest of those, as the tensor's scale
    /// ([`scale_of_partials`]; one block).
    Scale,
    /// Per tensor, 3 of 3: the values, divided by that scale
    /// ([`quantize_tensor`]).
    Tensor,
}

impl QuantStep {
    /// Rows of the source one block takes: 8 (a row per warp) for
    /// [`QuantStep::Rows`], 128 for the others.
    pub const fn block_rows(self) -> usize {
        match self {
            QuantStep::Rows => WARPS,
            _ => SCALE_BLOCK,
        }
    }

    /// The grid `(x, y)` for a `rows x cols` source: a block per 128
    /// columns and [`Self::block_rows`] rows; one block for
    /// [`QuantStep::Scale`].
    pub const fn grid(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            QuantStep::Scale => (1, 1),
            _ => (cols.div_ceil(COLS), rows.div_ceil(self.block_rows())),
        }
    }

    /// The workspace floats of a per-tensor quantization: one per 128 x
    /// 128 tile.
    pub const fn partials(rows: usize, cols: usize) -> usize {
        let (x, y) = QuantStep::Amax.grid(rows, cols);
        x * y
    }

    /// The entry's name stem.
    pub const fn name(self) -> &'static str {
        match self {
            QuantStep::Rows => "quant_rows",
            QuantStep::Tiles => "quant_tiles",
            QuantStep::Amax => "quant_amax",
            QuantStep::Scale => "quant_scale",
            QuantStep::Tensor => "quant_tensor",
        }
    }
}

/// A quantizer's PTX entry: which launch, from which stored type to
/// which FP8 type (`Amax` has no FP8 type: it writes f32 amaxes; `Scale`
/// no source type: it reads them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantEntry {
    pub name: &'static str,
    pub step: QuantStep,
    pub src: Elem,
    pub dst: Elem,
}

macro_rules! entries {
    ($([$name:literal, $step:ident, $src:ident, $dst:ident]),+ $(,)?) => {
        /// Every quantizer entry (all in the `fp8` module,
        /// `modules::FP8`).
        pub const ENTRIES: &[QuantEntry] = &[$(QuantEntry {
            name: $name,
            step: QuantStep::$step,
            src: Elem::$src,
            dst: Elem::$dst,
        }),+];
    };
}

entries!(
    ["quant_rows_f32_e4m3", Rows, F32, E4m3],
    ["quant_rows_bf16_e4m3", Rows, Bf16, E4m3],
    ["quant_rows_f16_e4m3", Rows, F16, E4m3],
    ["quant_rows_f32_e5m2", Rows, F32, E5m2],
    ["quant_rows_bf16_e5m2", Rows, Bf16, E5m2],
    ["quant_rows_f16_e5m2", Rows, F16, E5m2],
    ["quant_tiles_f32_e4m3", Tiles, F32, E4m3],
    ["quant_tiles_bf16_e4m3", Tiles, Bf16, E4m3],
    ["quant_tiles_f16_e4m3", Tiles, F16, E4m3],
    ["quant_tiles_f32_e5m2", Tiles, F32, E5m2],
    ["quant_tiles_bf16_e5m2", Tiles, Bf16, E5m2],
    ["quant_tiles_f16_e5m2", Tiles, F16, E5m2],
    ["quant_tensor_f32_e4m3", Tensor, F32, E4m3],
    ["quant_tensor_bf16_e4m3", Tensor, Bf16, E4m3],
    ["quant_tensor_f16_e4m3", Tensor, F16, E4m3],
    ["quant_tensor_f32_e5m2", Tensor, F32, E5m2],
    ["quant_tensor_bf16_e5m2", Tensor, Bf16, E5m2],
    ["quant_tensor_f16_e5m2", Tensor, F16, E5m2],
    ["quant_amax_f32", Amax, F32, F32],
    ["quant_amax_bf16", Amax, Bf16, F32],
    ["quant_amax_f16", Amax, F16, F32],
    ["quant_scale_e4m3", Scale, F32, E4m3],
    ["quant_scale_e5m2", Scale, F32, E5m2],
);

/// The entry of `step` from `src` to the FP8 type `dst` (`dst` is
/// ignored for [`QuantStep::Amax`], `src` for [`QuantStep::Scale`]).
pub fn entry(step: QuantStep, src: Elem, dst: Elem) -> Option<&'static QuantEntry> {
    ENTRIES.iter().find(|e| {
        e.step == step
            && (step == QuantStep::Scale || e.src == src)
            && (step == QuantStep::Amax || e.dst == dst)
    })
}

/// The scale of a block whose largest magnitude is `amax`: `amax / MAX`,
/// or 1 where that is 0 (a block of zeros, or one too small for the
/// quotient); non-finite where `amax` is.
#[inline(always)]
pub fn scale_for<Q: Fp8>(amax: f32) -> f32 {
    let scale = amax / Q::MAX;
    if scale == 0.0 { 1.0 } else { scale }
}

/// The bits of `|x|`: ordered as the magnitudes, NaN above infinity.
#[inline(always)]
fn magnitude(x: f32) -> u32 {
    x.to_bits() & 0x7FFF_FFFF
}

/// Calls `f(r, c)` for each element of the source this thread takes in
/// its block of `block_rows` x [`COLS`] (inside the matrix only; the
/// loops' trip counts are the same in every lane, so the warp's lanes
/// stay together for the shuffles after them).
#[inline(always)]
fn each_element(p: &QuantParams, block_rows: usize, mut f: impl FnMut(usize, usize)) {
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let row0 = block_idx_y() * block_rows + warp_idx();
    let col0 = block_idx_x() * COLS + lane();
    let mut i = 0;
    while i < block_rows / WARPS {
        let r = row0 + i * WARPS;
        let mut j = 0;
        while j < PER_LANE {
            let c = col0 + j * WARP;
            if r < rows && c < cols {
                f(r, c);
            }
            j += 1;
        }
        i += 1;
    }
}

/// The largest magnitude (as bits) of the elements this thread takes,
/// then of its warp's.
#[inline(always)]
fn warp_amax<T: Element>(src: GlobalIn<T>, p: &QuantParams, block_rows: usize) -> u32 {
    let mut m = 0u32;
    each_element(p, block_rows, |r, c| {
        // SAFETY: r < rows and c < cols: inside the source (rows `ld`
        // apart), as the host's launch contract states.
        let x = unsafe { src.read(r * p.ld as usize + c) };
        m = m.max(magnitude(x.to_f32()));
    });
    warp_max_bits(m)
}

/// The largest of every warp's `m` in the block, in every thread: lane 0
/// of each warp writes its word of `shared`, one barrier, every thread
/// reads the eight. Every thread of the block must call it.
#[inline(always)]
fn block_max_bits(m: u32, shared: SharedTile<1, WARPS>) -> u32 {
    if lane() == 0 {
        // SAFETY: word `warp_idx() < WARPS`, written by this warp's lane 0
        // alone; read only after the barrier below.
        unsafe { shared.store(0, warp_idx(), f32::from_bits(m)) };
    }
    sync_threads();
    let mut all = 0u32;
    let mut w = 0;
    while w < WARPS {
        // SAFETY: w < WARPS; nobody writes the tile after the barrier.
        all = all.max(unsafe { shared.load(0, w) }.to_bits());
        w += 1;
    }
    all
}

/// Block scales and the values: the block's amax, its scale (written by
/// one thread at the block's place, [`QuantParams::row_stride`]), then
/// each value divided by it, rounded to `Q`. `ROWS` is a scale block's
/// height: 1 (A's scales: each warp a row and a scale of its own) or 128
/// (B^T's: the block's eight warps share one). With `QUANTIZE` false the
/// block writes its amax instead of a scale and no values: per-tensor
/// scaling's first pass ([`QuantStep::Amax`]).
///
/// Launch: [`THREADS`] threads, [`SHARED_BYTES`], the step's
/// [`QuantStep::grid`].
#[inline(always)]
pub fn quantize_blocks<T: Element, Q: Fp8, const ROWS: usize, const QUANTIZE: bool>(
    src: GlobalIn<T>,
    dst: GlobalOut<Q>,
    scales: GlobalOut<f32>,
    p: &QuantParams,
) {
    const { assert!(ROWS == 1 || ROWS == SCALE_BLOCK) };
    let block_rows = if ROWS == 1 { WARPS } else { ROWS };
    let mut m = warp_amax(src, p, block_rows);
    if ROWS > 1 {
        m = block_max_bits(m, SharedTile::at(0));
    }
    let amax = f32::from_bits(m);
    let scale = scale_for::<Q>(amax);
    // The scale block's row index and who writes its scale: lane 0 of a
    // warp whose row is in the matrix (ROWS 1), or thread 0.
    let (block_row, writes) = if ROWS == 1 {
        let row = block_idx_y() * WARPS + warp_idx();
        (row, lane() == 0 && row < p.rows as usize)
    } else {
        (block_idx_y(), thread_idx_x() == 0)
    };
    if writes {
        let at = block_row * p.row_stride as usize + block_idx_x() * p.col_stride as usize;
        // SAFETY: the host sizes `scales` for every block of the grid at
        // these strides (`Quantize::scales`, or `QuantStep::partials`);
        // one writer per block row (see above).
        unsafe { scales.write(at, if QUANTIZE { scale } else { amax }) };
    }
    if QUANTIZE {
        each_element(p, block_rows, |r, c| {
            // SAFETY: inside the source, as in `warp_amax`.
            let x = unsafe { src.read(r * p.ld as usize + c) }.to_f32();
            // SAFETY: r < rows, c < cols, inside the output (rows
            // `ld_out >= cols` apart); each element is one thread's.
            unsafe { dst.write(r * p.ld_out as usize + c, Q::from_f32(x / scale)) };
        });
    }
}

/// Per-tensor scaling's second pass: the largest of the `p.rows` tile
/// amaxes in `partials`, as `Q`'s scale, written to `scale[0]`. One
/// block of [`THREADS`].
#[inline(always)]
pub fn scale_of_partials<Q: Fp8>(partials: GlobalIn<f32>, scale: GlobalOut<f32>, p: &QuantParams) {
    let mut m = 0u32;
    let mut i = thread_idx_x();
    while i < p.rows as usize {
        // SAFETY: i < rows, the partials' count (the host's contract).
        m = m.max(magnitude(unsafe { partials.read(i) }));
        i += THREADS;
    }
    let m = block_max_bits(warp_max_bits(m), SharedTile::at(0));
    if thread_idx_x() == 0 {
        // SAFETY: `scale` holds one f32; thread 0 alone writes it.
        unsafe { scale.write(0, scale_for::<Q>(f32::from_bits(m))) };
    }
}

/// Per-tensor scaling's last pass: every value divided by `scale[0]`,
/// rounded to `Q`, in [`QuantStep::Tensor`]'s blocks.
#[inline(always)]
pub fn quantize_tensor<T: Element, Q: Fp8>(
    src: GlobalIn<T>,
    dst: GlobalOut<Q>,
    scale: GlobalIn<f32>,
    p: &QuantParams,
) {
    // SAFETY: `scale` holds one f32 (the host's contract).
    let s = unsafe { scale.read(0) };
    each_element(p, QuantStep::Tensor.block_rows(), |r, c| {
        // SAFETY: as in `quantize_blocks`.
        let x = unsafe { src.read(r * p.ld as usize + c) }.to_f32();
        // SAFETY: as in `quantize_blocks`.
        unsafe { dst.write(r * p.ld_out as usize + c, Q::from_f32(x / s)) };
    });
}

/// The PTX entries: `name(src, dst, scales, params)`, one signature for
/// all (the host launches them through one path): `src` the matrix (the
/// tile amaxes for `quant_scale`), `dst` the FP8 output (unused by
/// `quant_amax` and `quant_scale`), `scales` what the step writes (read
/// by `quant_tensor`: the tensor's scale).
#[cfg(all(target_arch = "nvptx64", gemm_module = "fp8"))]
#[rustfmt::skip]
mod entries {
    use super::*;
    use crate::elem::{Bf16, E4m3, E5m2, F16};

    macro_rules! entry {
        ($name:ident, $t:ty, $q:ty, |$src:ident, $dst:ident, $scales:ident, $p:ident| $body:expr) => {
            /// # Safety
            /// `src` holds the `rows x cols` source at `ld`, `dst` the
            /// output at `ld_out`, `scales` every scale the step writes
            /// (`Quantize::scales`, `QuantStep::partials`, or one), none
            /// overlapping; launched with `THREADS` threads,
            /// `SHARED_BYTES` and the step's grid.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                src: *const $t,
                dst: *mut $q,
                scales: *mut f32,
                p: QuantParams,
            ) {
                // SAFETY: the host upholds the entry's contract.
                let ($src, $dst, $scales) = unsafe {
                    (GlobalIn::from_raw(src), GlobalOut::from_raw(dst), GlobalOut::from_raw(scales))
                };
                let $p = &p;
                $body
            }
        };
    }

    macro_rules! per_types {
        ($t:ty, $q:ty, $rows:ident, $tiles:ident, $tensor:ident) => {
            entry!($rows, $t, $q, |s, d, sc, p| quantize_blocks::<$t, $q, 1, true>(s, d, sc, p));
            entry!($tiles, $t, $q, |s, d, sc, p| quantize_blocks::<$t, $q, 128, true>(s, d, sc, p));
            entry!($tensor, $t, $q, |s, d, sc, p| quantize_tensor::<$t, $q>(s, d, sc.as_in(), p));
        };
    }

    per_types!(f32, E4m3, quant_rows_f32_e4m3, quant_tiles_f32_e4m3, quant_tensor_f32_e4m3);
    per_types!(Bf16, E4m3, quant_rows_bf16_e4m3, quant_tiles_bf16_e4m3, quant_tensor_bf16_e4m3);
    per_types!(F16, E4m3, quant_rows_f16_e4m3, quant_tiles_f16_e4m3, quant_tensor_f16_e4m3);
    per_types!(f32, E5m2, quant_rows_f32_e5m2, quant_tiles_f32_e5m2, quant_tensor_f32_e5m2);
    per_types!(Bf16, E5m2, quant_rows_bf16_e5m2, quant_tiles_bf16_e5m2, quant_tensor_bf16_e5m2);
    per_types!(F16, E5m2, quant_rows_f16_e5m2, quant_tiles_f16_e5m2, quant_tensor_f16_e5m2);

    // The amax pass writes f32 amaxes (its FP8 type is a placeholder);
    // the scale pass reads them.
    entry!(quant_amax_f32, f32, E4m3, |s, d, sc, p| quantize_blocks::<f32, E4m3, 128, false>(s, d, sc, p));
    entry!(quant_amax_bf16, Bf16, E4m3, |s, d, sc, p| quantize_blocks::<Bf16, E4m3, 128, false>(s, d, sc, p));
    entry!(quant_amax_f16, F16, E4m3, |s, d, sc, p| quantize_blocks::<F16, E4m3, 128, false>(s, d, sc, p));
    entry!(quant_scale_e4m3, f32, E4m3, |s, _d, sc, p| scale_of_partials::<E4m3>(s, sc, p));
    entry!(quant_scale_e5m2, f32, E5m2, |s, _d, sc, p| scale_of_partials::<E5m2>(s, sc, p));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_declared_in_the_fp8_module_and_found_by_its_types() {
        let module = &crate::modules::FP8;
        assert_eq!(module.utility_entries.len(), ENTRIES.len());
        for e in ENTRIES {
            assert!(module.utility_entries.contains(&e.name), "{}", e.name);
            assert!(e.name.starts_with(e.step.name()), "{}", e.name);
            assert_eq!(entry(e.step, e.src, e.dst), Some(e));
        }
        for q in Quantize::ALL {
            for step in q.steps() {
                for src in [Elem::F32, Elem::Bf16, Elem::F16] {
                    for dst in [Elem::E4m3, Elem::E5m2] {
                        assert!(entry(*step, src, dst).is_some(), "{step:?} {src:?} {dst:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn scales_cover_every_block_at_their_strides() {
        for (rows, cols) in [(1, 1), (37, 300), (128, 128), (129, 257)] {
            for q in [Quantize::Rows, Quantize::Tiles] {
                let (rs, cs) = q.strides(rows, cols);
                let step = q.steps()[0];
                let (gx, gy) = step.grid(rows, cols);
                let block_rows = if q == Quantize::Rows { 1 } else { 128 };
                let last = (rows - 1) / block_rows * rs + (gx - 1) * cs;
                assert!(last < q.scales(rows, cols), "{q:?} {rows} x {cols}");
                assert!(gy * step.block_rows() >= rows);
            }
        }
        assert_eq!(QuantStep::partials(129, 257), 2 * 3);
    }

    #[test]
    fn a_scale_maps_the_amax_to_the_largest_value() {
        use crate::elem::{E4m3, E5m2};
        assert_eq!(scale_for::<E4m3>(448.0), 1.0);
        assert_eq!(scale_for::<E5m2>(57344.0 * 4.0), 4.0);
        assert_eq!(scale_for::<E4m3>(0.0), 1.0);
        assert!(scale_for::<E4m3>(f32::NAN).is_nan());
        assert_eq!(scale_for::<E4m3>(f32::INFINITY), f32::INFINITY);
        assert!(magnitude(f32::NAN) > magnitude(f32::INFINITY));
        assert!(magnitude(-3.0) > magnitude(2.0));
    }
}
