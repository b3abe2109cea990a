//! Step 21: BF16 and FP16 on any tensor-core GPU since Ampere. Step 11's
//! block (warp tiles of `mma.sync`, a `cp.async` pipeline, swizzled
//! tiles) with A and B stored in 16 bits, generic over the type, the
//! layouts of A and B and the type of C: the portable 16-bit kernel, for
//! Ampere, Ada and Hopper alike, and the one 16-bit kernel the CPU
//! emulator runs.
//!
//! What changes from step 11:
//! - **The math**: `mma.sync.m16n8k16` of BF16 or FP16 (f32 accumulators)
//!   does 4,096 FLOP per instruction, twice TF32's `m16n8k8`, from
//!   registers that each hold two neighbours along K
//!   ([`crate::device::mma`], second table). No conversion: the stored
//!   bits are the operands.
//! - **Both operands through `ldmatrix`**, one `ldmatrix.x4` per 16 x 16
//!   piece of A (an m16 tile) or of B (two n8 tiles). A row of 8 16-bit
//!   values is one 16-byte `ldmatrix` row: an operand stored K-major (A
//!   as it is, or B transposed) is read as is; one stored M- or N-major
//!   (B as it is, or A transposed) with `ldmatrix.trans`, which hands out
//!   the transpose (step 11 loaded B with scalar loads: 32-bit values have
//!   no `.trans`). So all four layouts of A and B (`Ops`) are one body,
//!   each operand read as the caller stores it.
//! - **BK = 64**: 64 16-bit values are 128 bytes, so a K-major tile's row
//!   is 8 chunks of 16 bytes, as step 11's A tile was; an M- or N-major
//!   tile's rows are BM or BN values, 16 or 32 chunks.
//! - **One swizzle for every tile**: chunk `c` of row `r` is stored at
//!   chunk `c ^ (r % 8)` of its group of 8. `ldmatrix` reads 8 rows that
//!   are consecutive in the tile (along the stored rows, whichever
//!   operand and layout: see [`load_x4`]) at one chunk: the XOR spreads
//!   them over the 8 chunks of a 128-byte line, all 32 banks. `cp.async`
//!   writes: consecutive threads fill consecutive chunks of a row,
//!   permuted within groups of 8: conflict-free too. No padding.
//! - **C in f32 or in the input type** (`gemm::Output`), as steps 19-20.
//!
//! Why it should be faster than step 11 (prediction before measuring,
//! H200, n = 4096): the same instruction stream carries twice the FLOP
//! and half the bytes, and B's fragments are 1 `ldmatrix` per 2 n8 tiles
//! instead of 4 scalar loads. `mma.sync` leaves most of Hopper's 16-bit
//! tensor throughput to `wgmma` (it issues from one warp at a time and
//! waits on its registers), so about 0.45-0.55x cuBLAS BF16, 320-380
//! TFLOP/s (on Ampere, where `mma.sync` is the tensor cores' only path,
//! the share should be larger; not measured here). The measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`); registers per instance:
//! `cargo test -p tests --test ptx -- --nocapture`.
//!
//! Parameters: BM x BN block tile, BK = 64, WM x WN warp tile (WM and WN
//! multiples of 16), STAGES shared stages; threads = 32 * (BM / WM) * (BN
//! / WN); shared memory = STAGES * (BM + BN) * BK * 2 bytes.

use crate::device::async_copy::{commit_group, wait_group};
use crate::device::mma::mma_m16n8k16;
use crate::device::{GlobalIn, SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::elem::{Bf16, Elem, Element, Elems, F16, Math};
use crate::gemm::{Gemm, Output, store_mma_tiles};
use crate::launch::{Body, KernelSpec, Launch, Op, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{inline_always, unroll};

/// Step along K: 64 16-bit values (a 128-byte row of a K-major tile),
/// four `m16n8k16` steps.
pub const BK: usize = 64;
/// Shared memory an SM can give one block (H100 / H200: 227 KB; an A100
/// has 163 KB, which the instances below fit).
const MAX_SHARED_BYTES: usize = 163 * 1024;
/// Bytes of one stored element.
const ELEM_BYTES: usize = 2;
/// 16-byte chunks of one tile each thread copies per stage, at most.
const MAX_CHUNKS: usize = 16;

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
struct Params {
    bm: usize,
    bn: usize,
    wm: usize,
    wn: usize,
    stages: usize,
    ops: Ops,
}

impl Params {
    const fn threads(self) -> usize {
        (self.bm / self.wm) * (self.bn / self.wn) * 32
    }
    /// A's tile in shared memory: (rows, 16-bit values per row). K-major
    /// (`[BM][BK]`) for A as it is, M-major (`[BK][BM]`) for A transposed.
    const fn a_tile(self) -> (usize, usize) {
        match self.ops.a {
            Op::N => (self.bm, BK),
            Op::T => (BK, self.bm),
        }
    }
    /// B's tile: N-major (`[BK][BN]`) for B as it is, K-major (`[BN][BK]`)
    /// for B transposed.
    const fn b_tile(self) -> (usize, usize) {
        match self.ops.b {
            Op::N => (BK, self.bn),
            Op::T => (self.bn, BK),
        }
    }
    /// Words (two values each) of A's and of B's part of a stage.
    const fn a_words(self) -> usize {
        self.bm * BK / 2
    }
    const fn b_words(self) -> usize {
        self.bn * BK / 2
    }
    const fn stage_words(self) -> usize {
        self.a_words() + self.b_words()
    }
    const fn shared_bytes(self) -> usize {
        self.stages * self.stage_words() * 4
    }
    /// Panics (at compile time, where it is called in a `const`) unless
    /// the tiles divide evenly, every tile's rows are whole groups of 8
    /// chunks (the swizzle), and the copies cover the tiles exactly.
    const fn check(self) {
        assert!(self.wm.is_multiple_of(16) && self.wn.is_multiple_of(16));
        assert!(self.wm / 16 <= 4 && self.wn / 8 <= 8);
        assert!(self.bm.is_multiple_of(self.wm) && self.bn.is_multiple_of(self.wn));
        let t = self.threads();
        assert!(t <= 1024);
        let tiles = [self.a_tile(), self.b_tile()];
        let mut i = 0;
        while i < 2 {
            let (rows, cols) = tiles[i];
            let chunks_per_row = cols * ELEM_BYTES / 16;
            assert!(chunks_per_row.is_multiple_of(8));
            // Whole rows per pass, so a thread's chunk column is fixed.
            assert!(t.is_multiple_of(chunks_per_row));
            let chunks = rows * chunks_per_row / t;
            assert!(chunks * t == rows * chunks_per_row);
            assert!(chunks >= 1 && chunks <= MAX_CHUNKS);
            i += 1;
        }
        assert!(self.stages >= 2 && self.stages <= 6);
        assert!(self.shared_bytes() <= MAX_SHARED_BYTES);
    }
    const fn spec(
        self,
        name: &'static str,
        ab: Elem,
        c: Elem,
        body: Body,
        module: &'static modules::PtxModule,
        batches: bool,
    ) -> KernelSpec {
        self.check();
        assert!(ab.bytes() == ELEM_BYTES);
        let math = match ab {
            Elem::Bf16 => Math::Bf16,
            _ => Math::F16,
        };
        KernelSpec {
            name,
            step: 21,
            module,
            elems: Elems::new(ab, ab, c, math),
            summary: "16-bit tensor cores (mma.sync m16n8k16), ldmatrix(.trans) for A and B as stored, cp.async pipeline",
            launch: Launch {
                block_threads: (self.threads() as u32, 1),
                block_tile: (self.bm, self.bn),
                shared_bytes: self.shared_bytes(),
                register_cap: false,
                persistent: false,
            },
            model_reuse: (self.bm, self.bn),
            body,
            operands: Operands::Pointers,
            ops: self.ops,
            batches,
        }
    }
}

/// One instance: `SPEC` for the host, the body `name` (on the host typed
/// as the emulator's launches are, f32 views of its buffers), and the PTX
/// entry `name` with A and B of type `$t` and C of type `$c`.
macro_rules! instance {
    ($module:ident = $cfg:literal, $kind:ident, $name:ident, $spec:ident, $t:ident, $c:ty, $ops:ident, $bm:literal, $bn:literal, $wm:literal, $wn:literal, $s:literal) => {
        #[cfg(not(target_arch = "nvptx64"))]
        pub const $spec: KernelSpec = Params { bm: $bm, bn: $bn, wm: $wm, wn: $wn, stages: $s, ops: Ops::$ops }
            .spec(stringify!($name), <$t as Element>::ELEM, <$c as Element>::ELEM, emulated!($name),
                &modules::$module, Kind::$kind.batches());
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$t, $t, $c>) {
            mma16::<$t, $c, $bm, $bn, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, { ($bm / $wm) * ($bn / $wn) * 32 }, { $s - 2 }, { Ops::$ops.a as u8 }, { Ops::$ops.b as u8 }, NONE>(g)
        }
        /// The body of the PTX entry of the same name, on the emulator's
        /// buffers viewed as its stored types.
        #[cfg(not(target_arch = "nvptx64"))]
        pub fn $name(g: Gemm) {
            mma16::<$t, $c, $bm, $bn, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, { ($bm / $wm) * ($bn / $wn) * 32 }, { $s - 2 }, { Ops::$ops.a as u8 }, { Ops::$ops.b as u8 }, NONE>(g.retyped())
        }
        // The entry goes into its own module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = $cfg))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, $kind, elems($t, $t, $c));
        }
    };
}

/// How an instance's entry takes products (`gemm_kernel!`'s kinds): the
/// fastest NN instances one at a time, the others one body for one
/// product or a batch, so that each entry is three copies of the body
/// (the driver compiles the PTX of a module when it is first loaded:
/// fewer copies, less waiting).
#[allow(non_camel_case_types, dead_code)]
enum Kind {
    one_product,
    strided,
}

impl Kind {
    const fn batches(self) -> bool {
        matches!(self, Kind::strided)
    }
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(MMA16 = "mma16", one_product, mma16_bf16_128x256x64_w64x64_s3, SPEC_BF16_128X256X64_W64X64_S3, Bf16, f32, NN, 128, 256, 64, 64, 3);
    instance!(MMA16 = "mma16", one_product, mma16_f16_128x256x64_w64x64_s3, SPEC_F16_128X256X64_W64X64_S3, F16, f32, NN, 128, 256, 64, 64, 3);
    instance!(MMA16 = "mma16", strided, mma16_bf16_128x128x64_w64x64_s4, SPEC_BF16_128X128X64_W64X64_S4, Bf16, f32, NN, 128, 128, 64, 64, 4);
    instance!(MMA16 = "mma16", strided, mma16_f16_128x128x64_w64x64_s4, SPEC_F16_128X128X64_W64X64_S4, F16, f32, NN, 128, 128, 64, 64, 4);
    // C in the input type.
    instance!(MMA16 = "mma16", strided, mma16_bf16_128x128x64_w64x64_s4_c16, SPEC_BF16_128X128X64_W64X64_S4_C16, Bf16, Bf16, NN, 128, 128, 64, 64, 4);
    instance!(MMA16 = "mma16", strided, mma16_f16_128x128x64_w64x64_s4_c16, SPEC_F16_128X128X64_W64X64_S4_C16, F16, F16, NN, 128, 128, 64, 64, 4);
    // A or B transposed (the library's transposed calls), C in f32 or in the input type.
    instance!(MMA16_TN = "mma16_tn", strided, mma16_bf16_128x128x64_w64x32_s4_tn, SPEC_BF16_128X128X64_W64X32_S4_TN, Bf16, f32, TN, 128, 128, 64, 32, 4);
    instance!(MMA16_TN = "mma16_tn", strided, mma16_bf16_128x128x64_w64x32_s4_tn_c16, SPEC_BF16_128X128X64_W64X32_S4_TN_C16, Bf16, Bf16, TN, 128, 128, 64, 32, 4);
    instance!(MMA16_TN = "mma16_tn", strided, mma16_f16_128x128x64_w64x32_s4_tn, SPEC_F16_128X128X64_W64X32_S4_TN, F16, f32, TN, 128, 128, 64, 32, 4);
    instance!(MMA16_TN = "mma16_tn", strided, mma16_f16_128x128x64_w64x32_s4_tn_c16, SPEC_F16_128X128X64_W64X32_S4_TN_C16, F16, F16, TN, 128, 128, 64, 32, 4);
    instance!(MMA16_NT = "mma16_nt", strided, mma16_bf16_128x128x64_w64x32_s4_nt, SPEC_BF16_128X128X64_W64X32_S4_NT, Bf16, f32, NT, 128, 128, 64, 32, 4);
    instance!(MMA16_NT = "mma16_nt", strided, mma16_bf16_128x128x64_w64x32_s4_nt_c16, SPEC_BF16_128X128X64_W64X32_S4_NT_C16, Bf16, Bf16, NT, 128, 128, 64, 32, 4);
    instance!(MMA16_NT = "mma16_nt", strided, mma16_f16_128x128x64_w64x32_s4_nt, SPEC_F16_128X128X64_W64X32_S4_NT, F16, f32, NT, 128, 128, 64, 32, 4);
    instance!(MMA16_NT = "mma16_nt", strided, mma16_f16_128x128x64_w64x32_s4_nt_c16, SPEC_F16_128X128X64_W64X32_S4_NT_C16, F16, F16, NT, 128, 128, 64, 32, 4);
    instance!(MMA16_TT = "mma16_tt", strided, mma16_bf16_128x128x64_w64x32_s4_tt, SPEC_BF16_128X128X64_W64X32_S4_TT, Bf16, f32, TT, 128, 128, 64, 32, 4);
    instance!(MMA16_TT = "mma16_tt", strided, mma16_bf16_128x128x64_w64x32_s4_tt_c16, SPEC_BF16_128X128X64_W64X32_S4_TT_C16, Bf16, Bf16, TT, 128, 128, 64, 32, 4);
    instance!(MMA16_TT = "mma16_tt", strided, mma16_f16_128x128x64_w64x32_s4_tt, SPEC_F16_128X128X64_W64X32_S4_TT, F16, f32, TT, 128, 128, 64, 32, 4);
    instance!(MMA16_TT = "mma16_tt", strided, mma16_f16_128x128x64_w64x32_s4_tt_c16, SPEC_F16_128X128X64_W64X32_S4_TT_C16, F16, F16, TT, 128, 128, 64, 32, 4);
}
pub use instances::*;

/// Every instance that reads A and B as they are.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPECS: &[KernelSpec] = &[
    SPEC_BF16_128X256X64_W64X64_S3,
    SPEC_F16_128X256X64_W64X64_S3,
    SPEC_BF16_128X128X64_W64X64_S4,
    SPEC_F16_128X128X64_W64X64_S4,
    SPEC_BF16_128X128X64_W64X64_S4_C16,
    SPEC_F16_128X128X64_W64X64_S4_C16,
];

/// Every instance that reads A or B transposed (`registry::TRANSPOSED`).
#[cfg(not(target_arch = "nvptx64"))]
pub const TRANSPOSED: &[KernelSpec] = &[
    SPEC_BF16_128X128X64_W64X32_S4_TN,
    SPEC_BF16_128X128X64_W64X32_S4_TN_C16,
    SPEC_F16_128X128X64_W64X32_S4_TN,
    SPEC_F16_128X128X64_W64X32_S4_TN_C16,
    SPEC_BF16_128X128X64_W64X32_S4_NT,
    SPEC_BF16_128X128X64_W64X32_S4_NT_C16,
    SPEC_F16_128X128X64_W64X32_S4_NT,
    SPEC_F16_128X128X64_W64X32_S4_NT_C16,
    SPEC_BF16_128X128X64_W64X32_S4_TT,
    SPEC_BF16_128X128X64_W64X32_S4_TT_C16,
    SPEC_F16_128X128X64_W64X32_S4_TT,
    SPEC_F16_128X128X64_W64X32_S4_TT_C16,
];

/// Values of `T` in one 16-byte chunk: 8 of a 16-bit type, 16 of an
/// 8-bit one (step 27 reads its FP8 tiles with these helpers).
pub(crate) const fn per_chunk<T>() -> usize {
    16 / size_of::<T>()
}

/// Where column `col` (a multiple of `v`, the values of a 16-byte chunk:
/// a chunk's first value) of row `row` of a tile with `cols` values per
/// row is stored, as a word offset in the tile: its chunk moves to
/// `(col / v) ^ (row % 8)` within its group of 8 chunks.
#[inline(always)]
pub(crate) const fn swizzle(v: usize, row: usize, col: usize, cols: usize) -> usize {
    (row * cols + ((col / v) ^ (row % 8)) * v) / (v / 4)
}

/// The 16-byte chunk at `word` of shared memory (a multiple of 4: the
/// swizzle moves whole chunks), as a 1 x 4 tile of words: what one
/// `cp.async`, one 128-bit store or one lane's `ldmatrix` row touches.
/// The swizzled layouts are computed here, so the tiles are addressed
/// chunk by chunk.
#[inline(always)]
pub(crate) const fn chunk(word: usize) -> SharedTile<1, 4> {
    SharedTile::at(word)
}

/// What [`body`] breaks: nothing for the kernels; the others are the
/// `mutants` feature's test-only variants (constants, so the kernels' PTX
/// has no trace of them).
const NONE: u8 = 0;
/// A's fragment registers 1 and 2 swapped (rows g + 8 and K 8-15).
const SWAPPED_FRAGMENT: u8 = 1;
/// B read with plain `ldmatrix`, not `.trans`: its fragments transposed.
const UNTRANSPOSED_B: u8 = 2;

/// `Op` as the const generic parameters carry it.
const N: u8 = Op::N as u8;

/// Broken variants of [`mma16_bf16_128x128x64_w64x64_s4`], for the CPU
/// emulator's tests only (feature `mutants`; never in the PTX).
#[cfg(all(feature = "mutants", not(target_arch = "nvptx64")))]
pub mod mutants {
    use super::*;

    /// A's fragment in the wrong register order.
    pub fn swapped_fragment(g: Gemm) {
        mma16::<Bf16, f32, 128, 128, 64, 64, 4, 4, 8, 128, 2, N, N, SWAPPED_FRAGMENT>(g.retyped())
    }

    /// B's 8 x 8 matrices read without `.trans`.
    pub fn untransposed_b(g: Gemm) {
        mma16::<Bf16, f32, 128, 128, 64, 64, 4, 4, 8, 128, 2, N, N, UNTRANSPOSED_B>(g.retyped())
    }
}

/// The parameter set of an instance, from its const generic parameters.
const fn params<const BM: usize, const BN: usize, const WM: usize, const WN: usize, const STAGES: usize>(
    ta: u8,
    tb: u8,
) -> Params {
    const fn op(t: u8) -> Op {
        if t == N { Op::N } else { Op::T }
    }
    Params {
        bm: BM,
        bn: BN,
        wm: WM,
        wn: WN,
        stages: STAGES,
        ops: Ops { a: op(ta), b: op(tb) },
    }
}

/// Picks the body for the block. 16-byte copies need every row of A and
/// of B to start 16-byte aligned (`Gemm::rows16`, uniform over the grid);
/// copies need no checks in a block inside C when K is a multiple of BK
/// (uniform over the block). Every other block checks each copy.
#[inline(always)]
fn mma16<
    T: Element,
    C: Output,
    const BM: usize,
    const BN: usize,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
    const MI: usize,
    const NI: usize,
    const THREADS: usize,
    const WAIT: u32,
    const TA: u8,
    const TB: u8,
    const MUTATION: u8,
>(
    g: Gemm<T, T, C>,
) {
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
    if g.rows16() {
        if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) {
            body::<T, C, BM, BN, WM, WN, STAGES, MI, NI, THREADS, WAIT, TA, TB, true, false, MUTATION>(g, row0, col0)
        } else {
            body::<T, C, BM, BN, WM, WN, STAGES, MI, NI, THREADS, WAIT, TA, TB, true, true, MUTATION>(g, row0, col0)
        }
    } else {
        body::<T, C, BM, BN, WM, WN, STAGES, MI, NI, THREADS, WAIT, TA, TB, false, true, MUTATION>(g, row0, col0)
    }
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0, col0), (BM, BN), THREADS) };
}

/// One operand's tile of one stage as the block copies it: a `rows x
/// cols` window of a row-major matrix (`ld` values between rows, `height
/// x width` in all) starting at `(row, col)`, stored swizzled at word
/// `base` of shared memory.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub base: usize,
    pub row: usize,
    pub col: usize,
    pub height: usize,
    pub width: usize,
    pub ld: usize,
}

/// Starts this thread's copies of one tile (`ROWS x COLS` values of `T`,
/// 16- or 8-bit, `THREADS` threads copying whole rows of 16-byte chunks
/// per pass) from `src` into the window `w`, zero-filled outside the
/// matrix. ALIGNED: `cp.async` of 16 bytes (rows 16-byte aligned); else
/// loads and stores of one value at a time. GUARD: check each chunk
/// against the matrix (without, the caller guarantees the window lies
/// inside it).
///
/// # Safety
/// The launch provides shared memory up to `w.base + ROWS * COLS * size
/// of T / 4` words; no thread reads or writes them until the barrier
/// after the `wait_group` that retires these copies; `src` holds the
/// `height x width` matrix with rows `ld` apart; with ALIGNED its rows
/// start 16-byte aligned, and `w.col` is a multiple of a chunk's values.
#[inline(always)]
pub(crate) unsafe fn copy_tile<
    T: Element,
    const ROWS: usize,
    const COLS: usize,
    const THREADS: usize,
    const ALIGNED: bool,
    const GUARD: bool,
>(
    src: GlobalIn<T>,
    w: Window,
) {
    const { assert!(matches!(size_of::<T>(), 1 | 2)) };
    let v = const { per_chunk::<T>() };
    // Values per 32-bit word.
    let per_word = const { 4 / size_of::<T>() };
    let per_row = COLS / v;
    let tid = thread_idx_x();
    // This thread's chunks: rows r0 + i * pass, values c..c + v.
    let (r0, c) = (tid / per_row, tid % per_row * v);
    let pass = THREADS / per_row;
    let first = (w.row + r0) * w.ld + w.col + c;
    let stride = (pass * w.ld) as u32;
    let valid = w.width.saturating_sub(w.col + c).min(v);
    unroll!(ROWS * COLS * size_of::<T>() / 16 / THREADS; 16, |i| {
        let r = r0 + i * pass;
        let idx = first + (i as u32 * stride) as usize;
        let word = swizzle(v, r, c, COLS);
        let inside = w.row + r < w.height;
        if ALIGNED {
            let n = if !GUARD { v } else if inside { valid } else { 0 };
            // SAFETY: word + 4 <= ROWS * COLS / per_word (r < ROWS, the
            // chunk stays in its row), a multiple of 4 (chunks are 4 words
            // and tiles start on chunks); the n values read are inside
            // the matrix (the window or the checks), 16-byte aligned (rows
            // aligned, w.col + c a multiple of v); the stage is untouched
            // until its wait and barrier (caller).
            unsafe { chunk(w.base + word).copy16_async(0, 0, src, idx, n) };
        } else {
            let mut words = [0.0f32; 4];
            unroll!(16 / size_of::<T>(); 16, |j| {
                let x = if inside && j < valid {
                    // SAFETY: row w.row + r < height, column w.col + c + j
                    // < width: inside the matrix.
                    unsafe { src.read(idx + j) }.bits()
                } else {
                    0
                };
                let (at, shift) = (j / per_word, 32 / per_word * (j % per_word));
                words[at] = f32::from_bits(words[at].to_bits() | (x << shift));
            });
            // SAFETY: as above for the shared words; the stage is
            // untouched by other threads until the barrier that ends
            // this tile's copies (caller).
            unsafe { chunk(w.base + word).store4(0, 0, words) };
        }
    });
}

/// `ldmatrix.x4` of a 16-row piece of an operand's tile (`COLS` values of
/// `T` per row) for this lane: outer rows `o .. o + 16` (M for A, N for B)
/// and two chunks of K from `k` (`k .. k + 16` of a 16-bit type, `k .. k
/// + 32` of an 8-bit one: one k-step of `mma`), as the fragment registers
/// of one m16 tile of A (`A_ORDER`: matrices (o 0-7, chunk 0), (o 8-15,
/// chunk 0), (o 0-7, chunk 1), (o 8-15, chunk 1)) or of two n8 tiles of B
/// (matrices (o 0-7, chunk 0), (o 0-7, chunk 1), (o 8-15, chunk 0), (o
/// 8-15, chunk 1)). Lane `L` names row `L % 8` of matrix `L / 8`; the
/// matrix's rows are the tile's stored rows: outer rows when the tile is
/// K-major (`ldmatrix`), K rows when it is M- or N-major
/// (`ldmatrix.trans`, 16-bit types only).
///
/// # Safety
/// Every lane of the warp calls it together; the piece lies inside the
/// tile at word `base`, whose stage has landed and is visible, and no
/// thread writes it before the next barrier.
#[inline(always)]
pub(crate) unsafe fn load_x4<T, const COLS: usize, const K_MAJOR: bool, const A_ORDER: bool>(
    base: usize,
    o: usize,
    k: usize,
    lane: usize,
) -> [u32; 4] {
    const { assert!(K_MAJOR || size_of::<T>() == 2, "ldmatrix.trans moves 16-bit values") };
    let v = const { per_chunk::<T>() };
    let (matrix, r) = (lane / 8, lane % 8);
    // A K-major tile: 8 rows apart along M or N, a chunk apart along K.
    // An M- or N-major one (16-bit): 8 rows apart along K, 8 values
    // (a chunk) apart along M or N.
    let (o_off, k_off) = if A_ORDER {
        (8 * (matrix % 2), v * (matrix / 2))
    } else {
        (8 * (matrix / 2), v * (matrix % 2))
    };
    if K_MAJOR {
        let row = o + o_off + r;
        // SAFETY: the row's 16 bytes at this chunk lie in the tile, 16-byte
        // aligned (chunks are); the warp is converged (caller).
        unsafe { chunk(base + swizzle(v, row, k + k_off, COLS)).load_matrix_x4(0, 0) }
            .map(f32::to_bits)
    } else {
        let row = k + k_off + r;
        // SAFETY: as above.
        unsafe { chunk(base + swizzle(v, row, o + o_off, COLS)).load_matrix_x4_trans(0, 0) }
    }
}

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`: warps of WM x WN, MI = WM / 16 m16 tiles by NI = WN / 8
/// n8 tiles each; TA / TB: A / B transposed (`Op as u8`); ALIGNED: 16-byte
/// copies (else one value at a time); GUARD: check each copy against the
/// matrices (without, an interior block and K % BK == 0).
#[inline(always)]
fn body<
    T: Element,
    C: Output,
    const BM: usize,
    const BN: usize,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
    const MI: usize,
    const NI: usize,
    const THREADS: usize,
    const WAIT: u32,
    const TA: u8,
    const TB: u8,
    const ALIGNED: bool,
    const GUARD: bool,
    const MUTATION: u8,
>(
    g: Gemm<T, T, C>,
    row0: usize,
    col0: usize,
) {
    const {
        params::<BM, BN, WM, WN, STAGES>(TA, TB).check();
        assert!(MI * 16 == WM && NI * 8 == WN && WAIT as usize + 2 == STAGES);
        assert!(THREADS == params::<BM, BN, WM, WN, STAGES>(TA, TB).threads());
    };
    let p = params::<BM, BN, WM, WN, STAGES>(TA, TB);
    let (a_n, b_n) = (TA == N, TB == N);
    let tid = thread_idx_x();
    let (a_base, b_base) = (
        inline_always!(|s: usize| s * p.stage_words()),
        inline_always!(|s: usize| s * p.stage_words() + p.a_words()),
    );

    // Starts the copies of tile `kt` of K into stage `s`. The caller
    // guarantees no thread reads or writes stage `s` until the barrier
    // after the `wait_group` that retires them.
    let load_tile = inline_always!(|kt: usize, s: usize| {
        let k0 = kt * BK;
        // A (m x k) as it is, or its transpose stored (k x m).
        let a = if a_n {
            Window { base: a_base(s), row: row0, col: k0, height: g.m, width: g.k, ld: g.lda }
        } else {
            Window { base: a_base(s), row: k0, col: row0, height: g.k, width: g.m, ld: g.lda }
        };
        // B (k x n) as it is, or its transpose stored (n x k).
        let b = if b_n {
            Window { base: b_base(s), row: k0, col: col0, height: g.k, width: g.n, ld: g.ldb }
        } else {
            Window { base: b_base(s), row: col0, col: k0, height: g.n, width: g.k, ld: g.ldb }
        };
        // SAFETY: each window is its stage's tile (stage_words apart, A's
        // then B's), untouched until the wait and barrier (caller); the
        // matrices are g's; ALIGNED only with rows16 (mma16), and the
        // windows' columns are multiples of BK, BM or BN (of 8).
        unsafe {
            if a_n {
                copy_tile::<T, BM, BK, THREADS, ALIGNED, GUARD>(g.a, a);
            } else {
                copy_tile::<T, BK, BM, THREADS, ALIGNED, GUARD>(g.a, a);
            }
            if b_n {
                copy_tile::<T, BK, BN, THREADS, ALIGNED, GUARD>(g.b, b);
            } else {
                copy_tile::<T, BN, BK, THREADS, ALIGNED, GUARD>(g.b, b);
            }
        }
    });

    let (warp, lane) = (tid / 32, tid % 32);
    let warp_row = warp / (BN / WN) * WM;
    let warp_col = warp % (BN / WN) * WN;

    // Fragments of k-step `step` (16 values of K) of stage `s`: `a[mi]`
    // for the warp's m16 tiles, `b[ni]` for its n8 tiles. Callers
    // guarantee the stage has landed and is visible (wait and barrier) and
    // that no thread writes it before the next barrier.
    let fragments = inline_always!(|s: usize, step: usize| {
        let k = 16 * step;
        let mut a = [[0u32; 4]; MI];
        let mut b = [[0u32; 2]; NI];
        unroll!(MI; 4, |mi| {
            let o = warp_row + 16 * mi;
            // SAFETY: every lane is here (no lane-dependent branch); rows o
            // .. o + 16 < BM and K k .. k + 16 <= BK lie in A's tile; the
            // stage is not written (caller).
            let raw = unsafe {
                if a_n {
                    load_x4::<T, BK, true, true>(a_base(s), o, k, lane)
                } else {
                    load_x4::<T, BM, false, true>(a_base(s), o, k, lane)
                }
            };
            a[mi] = if MUTATION == SWAPPED_FRAGMENT { [raw[0], raw[2], raw[1], raw[3]] } else { raw };
        });
        unroll!(NI / 2; 4, |pair| {
            let o = warp_col + 16 * pair;
            // SAFETY: as for A: columns o .. o + 16 < BN.
            let raw = unsafe {
                if !b_n {
                    load_x4::<T, BK, true, false>(b_base(s), o, k, lane)
                } else if MUTATION == UNTRANSPOSED_B {
                    // The mutant: B's N-major tile read without `.trans`.
                    let (matrix, r) = (lane / 8, lane % 8);
                    let row = k + 8 * (matrix % 2) + r;
                    chunk(b_base(s) + swizzle(8, row, o + 8 * (matrix / 2), BN))
                        .load_matrix_x4(0, 0)
                        .map(f32::to_bits)
                } else {
                    load_x4::<T, BN, false, false>(b_base(s), o, k, lane)
                }
            };
            b[2 * pair] = [raw[0], raw[1]];
            b[2 * pair + 1] = [raw[2], raw[3]];
        });
        (a, b)
    });

    let mut acc = [[[0.0f32; 4]; NI]; MI];
    let k_tiles = g.k.div_ceil(BK);

    // Prologue: tiles 0 .. STAGES - 2 in flight, one group each (empty
    // groups past the end keep the count uniform); then tile 0 landed and
    // visible.
    unroll!(STAGES - 1; 8, |s| {
        if s < k_tiles {
            load_tile(s, s);
        }
        commit_group();
    });
    wait_group::<WAIT>();
    sync_threads();

    let mut read_stage = 0;
    let mut write_stage = STAGES - 1;
    for kt in 0..k_tiles {
        // Stage `write_stage` held tile kt - 1, which every thread
        // finished reading before the barrier that ended it.
        if kt + STAGES - 1 < k_tiles {
            load_tile(kt + STAGES - 1, write_stage);
        }
        commit_group();
        write_stage = if write_stage + 1 == STAGES { 0 } else { write_stage + 1 };
        unroll!(BK / 16; 4, |step| {
            let (a, b) = fragments(read_stage, step);
            unroll!(MI; 4, |mi| {
                unroll!(NI; 8, |ni| {
                    mma_m16n8k16::<T>(&mut acc[mi][ni], a[mi], b[ni]);
                });
            });
        });
        // Tile kt + 1 is the oldest group but STAGES - 2: wait for it, then
        // one barrier makes every thread's copies visible and ends all
        // reads of tile kt.
        wait_group::<WAIT>();
        sync_threads();
        read_stage = if read_stage + 1 == STAGES { 0 } else { read_stage + 1 };
    }
    // Every group is retired before the kernel ends (the last ones are empty).
    wait_group::<0>();

    // SAFETY: each lane of each warp owns its elements of the block's
    // tile of C (blocks own their tiles); C's span is the host's check.
    unsafe { store_mma_tiles(g, &acc, (row0 + warp_row, col0 + warp_col), lane) };
}
