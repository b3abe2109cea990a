//! Step 11: tensor cores. The multiply-adds leave the FMA pipe: each warp
//! owns a WM x WN tile of C as m16n8k8 TF32 `mma.sync` tiles (see
//! [`crate::device::mma`] for who holds what), and the block feeds it from
//! a multi-stage shared-memory pipeline that `cp.async` fills without
//! passing through registers.
//!
//! What changes from step 10:
//! - **The math**: one `mma.sync` does 16 x 8 x 8 multiply-adds (2,048
//!   FLOP) for the whole warp. A and B are rounded to TF32 (10 mantissa
//!   bits, `cvt.rna`) as their fragments are loaded; C accumulates in f32.
//! - **Global to shared**: `cp.async` copies 16-byte chunks straight into
//!   shared memory, `STAGES - 1` tiles of K ahead of the one being
//!   multiplied (one commit group per tile, `wait_group` for the oldest,
//!   one barrier per tile). Rows and columns past the matrix are
//!   zero-filled by the copy itself (its source-size operand), so edge
//!   tiles need no other treatment; a matrix whose rows are not 16-byte
//!   aligned (K or N not a multiple of 4) is copied 4 bytes at a time.
//!   Blocks inside C with K a multiple of BK copy without any checks.
//! - **Fragments**: A's come from `ldmatrix.x4`, one instruction per 16 x 8
//!   tile, whose four 8 x 4 matrices are exactly the mma's A registers.
//!   B is row-major (N contiguous), the wrong way round for `ldmatrix` on
//!   32-bit data, so its fragments are two 32-bit loads per 8 x 8 tile.
//! - **Shared layouts**: A's tile `[BM][BK]` with chunk `c` of row `r`
//!   stored at chunk `c ^ (r % 8)` (a swizzle), B's `[BK][BN + 8]` (padded
//!   rows), both worked out below; the emulator's bank-conflict count
//!   checks them (`cargo test -p tests --test emulator`).
//!
//! Bank conflicts (32 banks of 4 bytes; a row of A's tile is 8 chunks, so
//! every row starts at bank 0):
//! - A: `ldmatrix` reads one 8 x 4 matrix (8 rows x 16 bytes) per pass.
//!   Its rows `r0 .. r0 + 8` (r0 a multiple of 8) at chunk `c` sit at
//!   chunks `c ^ 0 .. c ^ 7`: all 8 chunks, all 32 banks.
//! - B: lane `(g, t)` of a warp reads row `8s + t` (and `8s + t + 4`),
//!   column `n0 + g`: 4 rows x 8 consecutive columns. Rows of BN + 8 floats
//!   (BN a multiple of 32) start 8 banks apart, so the 4 rows take banks
//!   0-7, 8-15, 16-23 and 24-31. (A swizzle would do too, but its XOR would
//!   mix with the warp's column offsets and cost a register per column
//!   group; the pad keeps every address a base plus a constant.)
//! - `cp.async` writes: 8 consecutive lanes fill the 8 chunks of a row of
//!   A (permuted by the XOR) or 8 consecutive chunks of B: conflict-free.
//!
//! Why it should be faster (prediction before measuring, H200, n = 4096):
//! an SM's tensor cores do 2,048 dense TF32 FLOP per clock (8x its FMA
//! pipe's 256), and a 64 x 64 warp tile reads 4 KB of shared memory per 32
//! `mma`, half the SM's shared bandwidth at that rate. `mma.sync` is known
//! to leave part of Hopper's tensor throughput to `wgmma`, so 0.5-0.65x
//! cuBLAS TF32, about 190-240 TFLOP/s, 4-5x the best FP32 kernel.
//!
//! What the measurements said (numbers: docs/measurements.md and the bench
//! table in the README, `cargo xtask bench`; registers per instance:
//! `cargo test -p tests --test ptx -- --nocapture`): the kernel is
//! latency-bound, not bound by bytes or instructions. A 64 x 64 warp tile
//! needs 128 accumulators and ptxas takes all 255 registers, so an SM holds
//! 8 warps (2 per scheduler); explicit double-buffering of the fragments
//! (step 09's trick) then spills, and higher-occupancy tiles (32 x 64, 64 x
//! 32 warp tiles) lose more to their extra shared loads than they gain.
//! `cvt.rna.tf32.f32` is two instructions on sm_90 (a finiteness test and
//! a predicated add); an integer add alone would be one, and faster, but
//! it turns NaNs such as 0x7FFFFFFF into zeros, so the kernel keeps the
//! exact conversion.
//!
//! Parameters: BM x BN block tile, BK = 32 along K, WM x WN warp tile (WM
//! a multiple of 16, WN of 8), STAGES shared stages; threads = 32 * (BM /
//! WM) * (BN / WN); shared memory = STAGES * (BM * BK + BK * (BN + 8)) * 4
//! bytes. The instances are the survivors of a search on the H200 (the
//! log has the losers). `128x256x32_w64x64_s3` (150 TFLOP/s, third of
//! five at n = 4096) was dropped when the epilogue learnt `alpha` and
//! `beta`: at 255 registers ptxas spilled 8 bytes for sm_90, and the fast
//! path must not spill (docs/measurements.md, 2026-12-01).

use crate::device::async_copy::{commit_group, wait_group};
use crate::device::mma::{mma_m16n8k8_tf32, split_tf32, to_tf32};
use crate::device::{SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{inline_always, unroll};

/// Step along K: 32 floats, four m16n8k8 steps; A's swizzle needs rows
/// of at least 8 chunks.
pub const BK: usize = 32;
/// Shared memory an SM can give one block (H100 / H200: 227 KB).
const MAX_SHARED_BYTES: usize = 227 * 1024;
/// 16-byte chunks of A's and of B's tile each thread copies per stage, at most.
const MAX_CHUNKS: usize = 16;

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) bm: usize,
    pub(crate) bn: usize,
    pub(crate) bk: usize,
    pub(crate) wm: usize,
    pub(crate) wn: usize,
    pub(crate) stages: usize,
}

impl Params {
    const fn threads(self) -> usize {
        (self.bm / self.wm) * (self.bn / self.wn) * 32
    }
    /// Chunks of A's tile (`[BM][BK]`) each thread copies per stage.
    const fn a_chunks(self) -> usize {
        self.bm * self.bk / 4 / self.threads()
    }
    /// Chunks of B's tile (`[BK][BN]`) each thread copies per stage.
    const fn b_chunks(self) -> usize {
        self.bk * self.bn / 4 / self.threads()
    }
    const fn stage_words(self) -> usize {
        self.bm * self.bk + self.bk * (self.bn + B_PAD)
    }
    const fn shared_bytes(self) -> usize {
        self.stages * self.stage_words() * 4
    }
    /// Panics (at compile time, where it is called in a `const`) unless
    /// the tiles divide evenly, the copies cover them exactly and the
    /// swizzles apply.
    const fn check(self) {
        assert!(self.bk == BK);
        assert!(self.bn.is_multiple_of(32));
        assert!(self.wm.is_multiple_of(16) && self.wn.is_multiple_of(8));
        assert!(self.wm / 16 <= 4 && self.wn / 8 <= 8);
        assert!(self.bm.is_multiple_of(self.wm) && self.bn.is_multiple_of(self.wn));
        let t = self.threads();
        assert!(t <= 1024);
        assert!(self.a_chunks() * t * 4 == self.bm * self.bk);
        assert!(self.b_chunks() * t * 4 == self.bk * self.bn);
        assert!(self.a_chunks() >= 1 && self.a_chunks() <= MAX_CHUNKS);
        assert!(self.b_chunks() >= 1 && self.b_chunks() <= MAX_CHUNKS);
        assert!(self.stages >= 2 && self.stages <= 6);
        assert!(self.shared_bytes() <= MAX_SHARED_BYTES);
    }
    const fn spec(self, name: &'static str, body: fn(Gemm)) -> KernelSpec {
        self.spec_of(
            name,
            body,
            (11, Elems::TF32),
            "TF32 tensor cores (mma.sync m16n8k8), multi-stage cp.async pipeline, swizzled tiles",
        )
    }
    /// The spec of this parameter set's block as ladder step `step`,
    /// computing in `elems` (step 23: 3xTF32).
    pub(crate) const fn spec_of(
        self,
        name: &'static str,
        body: fn(Gemm),
        (step, elems): (u32, Elems),
        summary: &'static str,
    ) -> KernelSpec {
        self.check();
        KernelSpec {
            name,
            step,
            module: &modules::MMA,
            elems,
            summary,
            launch: Launch {
                block_threads: (self.threads() as u32, 1),
                block_tile: (self.bm, self.bn),
                shared_bytes: self.shared_bytes(),
                register_cap: false,
                persistent: false,
            },
            model_reuse: (self.bm, self.bn),
            body: emulated!(body),
            operands: Operands::Pointers,
            ops: Ops::NN,
            batches: false,
        }
    }
}

/// One instance: `SPEC` for the host, the body `name` for the emulator,
/// and the PTX entry `name`.
macro_rules! instance {
    ($name:ident, $spec:ident, $bm:literal, $bn:literal, $wm:literal, $wn:literal, $s:literal) => {
        pub const $spec: KernelSpec = Params {
            bm: $bm,
            bn: $bn,
            bk: BK,
            wm: $wm,
            wn: $wn,
            stages: $s,
        }
        .spec(stringify!($name), $name);
        /// The body of the PTX entry of the same name (inlined into it).
        #[inline(always)]
        pub fn $name(g: Gemm) {
            mma::<$bm, $bn, BK, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, { $s - 2 }, { $bn + B_PAD }, NONE, false>(g)
        }
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, one_product);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(mma_128x128x32_w64x64_s2, SPEC_128X128X32_W64X64_S2, 128, 128, 64, 64, 2);
    instance!(mma_256x128x32_w64x64_s3, SPEC_256X128X32_W64X64_S3, 256, 128, 64, 64, 3);
    instance!(mma_64x128x32_w32x64_s2, SPEC_64X128X32_W32X64_S2, 64, 128, 32, 64, 2);
    instance!(mma_128x64x32_w64x32_s2, SPEC_128X64X32_W64X32_S2, 128, 64, 64, 32, 2);
}
pub use instances::*;

/// Every instance, for the search.
pub const SPECS: &[KernelSpec] = &[
    SPEC_128X128X32_W64X64_S2,
    SPEC_256X128X32_W64X64_S3,
    SPEC_64X128X32_W32X64_S2,
    SPEC_128X64X32_W64X32_S2,
];

/// Where column `col` of row `row` of A's tile is stored: its 16-byte
/// chunk moves to chunk `(col / 4) ^ (row % 8)` (within the row's group of
/// 8 chunks).
#[inline(always)]
const fn a_swizzle(row: usize, col: usize) -> usize {
    (((col / 4) ^ (row % 8)) * 4) | (col % 4)
}

/// Padding of each row of B's tile, in floats.
pub(crate) const B_PAD: usize = 8;

/// What [`body`] breaks: nothing for the kernels; the others are the
/// `mutants` feature's test-only variants (constants, so the kernels' PTX
/// has no trace of them).
pub(crate) const NONE: u8 = 0;
/// A fragment's registers 1 and 2 swapped (rows g + 8 and columns t + 4).
const SWAPPED_FRAGMENT: u8 = 1;
/// The main loop's `wait_group` left out: tiles are read before they land.
const NO_WAIT: u8 = 2;

/// Broken variants of [`mma_64x128x32_w32x64_s2`], for the CPU emulator's
/// tests only (feature `mutants`; never in the PTX).
#[cfg(all(feature = "mutants", not(target_arch = "nvptx64")))]
pub mod mutants {
    use super::*;

    /// A's fragment in the wrong register order.
    pub fn swapped_fragment(g: Gemm) {
        mma::<64, 128, BK, 32, 64, 2, 2, 8, 0, { 128 + B_PAD }, SWAPPED_FRAGMENT, false>(g)
    }

    /// No `cp.async.wait_group` before the barrier that ends a tile.
    pub fn no_wait(g: Gemm) {
        mma::<64, 128, BK, 32, 64, 2, 2, 8, 0, { 128 + B_PAD }, NO_WAIT, false>(g)
    }
}

/// The parameter set of an instance, from its const generic parameters.
const fn params<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
>() -> Params {
    Params {
        bm: BM,
        bn: BN,
        bk: BK,
        wm: WM,
        wn: WN,
        stages: STAGES,
    }
}

/// Picks the body for the block. 16-byte copies need every row of A and
/// of B to start 16-byte aligned (K and N multiples of 4, uniform over the
/// grid); copies need no checks in a block inside C when K is a multiple
/// of BK (uniform over the block). Every other block checks each copy.
/// `SPLIT`: 3xTF32 (step 23) instead of TF32.
#[inline(always)]
pub(crate) fn mma<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
    const MI: usize,
    const NI: usize,
    const WAIT: u32,
    const B_LD: usize,
    const MUTATION: u8,
    const SPLIT: bool,
>(
    g: Gemm,
) {
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
    if g.vec4() {
        if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) {
            body::<BM, BN, BK, WM, WN, STAGES, MI, NI, WAIT, B_LD, true, false, MUTATION, SPLIT>(g, row0, col0)
        } else {
            body::<BM, BN, BK, WM, WN, STAGES, MI, NI, WAIT, B_LD, true, true, MUTATION, SPLIT>(g, row0, col0)
        }
    } else {
        body::<BM, BN, BK, WM, WN, STAGES, MI, NI, WAIT, B_LD, false, true, MUTATION, SPLIT>(g, row0, col0)
    }
    let threads = params::<BM, BN, BK, WM, WN, STAGES>().threads();
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0, col0), (BM, BN), threads) };
}

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`. MI = WM / 16 and NI = WN / 8 `mma` tiles per warp;
/// WAIT = STAGES - 2 groups may stay in flight when a tile is needed;
/// B_LD = BN + B_PAD; ALIGNED: copy 16 bytes at a time (else 4); GUARD:
/// check each copy against the matrices' bounds (without, the caller
/// guarantees an aligned interior block and K % BK == 0); SPLIT: 3xTF32
/// (each fragment split into TF32 parts, three `mma`s per pair: step 23).
#[inline(always)]
fn body<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
    const MI: usize,
    const NI: usize,
    const WAIT: u32,
    const B_LD: usize,
    const ALIGNED: bool,
    const GUARD: bool,
    const MUTATION: u8,
    const SPLIT: bool,
>(
    g: Gemm,
    row0: usize,
    col0: usize,
) {
    const {
        params::<BM, BN, BK, WM, WN, STAGES>().check();
        assert!(MI * 16 == WM && NI * 8 == WN && WAIT as usize + 2 == STAGES);
        assert!(B_LD == BN + B_PAD);
        // The swizzle of A's copies depends on r % 8: the same for all chunks.
        assert!((params::<BM, BN, BK, WM, WN, STAGES>().threads() / (BK / 4)).is_multiple_of(8));
    };
    let p = params::<BM, BN, BK, WM, WN, STAGES>();
    let threads = p.threads();
    let tid = thread_idx_x();
    // Stage `s`: A's tile `[BM][BK]` (swizzled), then B's `[BK][BN + B_PAD]`.
    let stage = inline_always!(|s: usize| {
        let base = s * p.stage_words();
        (
            SharedTile::<BM, BK>::at(base),
            SharedTile::<BK, B_LD>::at(base + SharedTile::<BM, BK>::WORDS),
        )
    });

    // Copy roles, fixed for the kernel: this thread's chunk i of A's tile
    // is row a_r + i * a_pass, columns a_c..a_c + 4 (all threads together
    // copy a_pass whole rows per pass); of B's, row b_r + i * b_pass,
    // columns b_c..b_c + 4. Consecutive chunks are a_stride (b_stride)
    // floats apart in A (B): at most 2^26, so u32 offsets from a base.
    let (a_r, a_c) = (tid / (BK / 4), tid % (BK / 4) * 4);
    let (b_r, b_c) = (tid / (BN / 4), tid % (BN / 4) * 4);
    let (a_pass, b_pass) = (threads / (BK / 4), threads / (BN / 4));
    let (a_stride, b_stride) = ((a_pass * g.lda) as u32, (b_pass * g.ldb) as u32);
    let a_first = (row0 + a_r) * g.lda + a_c;
    let b_first = b_r * g.ldb + col0 + b_c;
    // Floats of this thread's chunks of B inside N (the same every tile).
    let b_valid = g.n.saturating_sub(col0 + b_c).min(4);

    // Starts the copies of tile `kt` of K into stage `s`, zero-filled
    // outside A and B. The caller guarantees no thread reads or writes
    // stage `s` until the barrier after the `wait_group` that retires them.
    let load_tile = inline_always!(|kt: usize, s: usize| {
        let (a_tile, b_tile) = stage(s);
        let k0 = kt * BK;
        let a_base = a_first + k0;
        let a_valid = g.k.saturating_sub(k0 + a_c).min(4);
        unroll!(params::<BM, BN, BK, WM, WN, STAGES>().a_chunks(); 16, |i| {
            let r = a_r + i * a_pass;
            let a_idx = a_base + (i as u32 * a_stride) as usize;
            // The swizzle moves the chunk within its row (r % 8 is the
            // same for every i: a_pass is a multiple of 8).
            let col = a_swizzle(r, a_c);
            if !GUARD {
                // SAFETY: r < BM, col + 4 <= BK, the word is a multiple of
                // 4; the source (row0 + r, k0 + a_c .. + 4) is inside A
                // (interior block, K % BK == 0) and 16-byte aligned (K % 4 ==
                // 0 == a_c % 4); no thread touches this stage until the
                // barrier after its wait (caller).
                unsafe { a_tile.copy4_async(r, col, g.a, a_idx, 4) };
            } else {
                let inside = row0 + r < g.m;
                if ALIGNED {
                    // SAFETY: as above, with only the a_valid floats inside
                    // A read (none outside C's rows).
                    unsafe { a_tile.copy4_async(r, col, g.a, a_idx, if inside { a_valid } else { 0 }) };
                } else {
                    unroll!(4; 4, |j| {
                        // SAFETY: as above, one float at a time; the source
                        // is read only when it is inside A.
                        unsafe { a_tile.copy1_async(r, col + j, g.a, a_idx + j, inside && j < a_valid) };
                    });
                }
            }
        });
        let b_base = b_first + k0 * g.ldb;
        unroll!(params::<BM, BN, BK, WM, WN, STAGES>().b_chunks(); 16, |i| {
            let r = b_r + i * b_pass;
            let b_idx = b_base + (i as u32 * b_stride) as usize;
            if !GUARD {
                // SAFETY: r < BK, b_c + 4 <= BN; the word is a multiple of
                // 4 (B_LD, b_c and the tile's start are); the source (k0 +
                // r, col0 + b_c .. + 4) is inside B and 16-byte aligned (N %
                // 4 == 0); as for A.
                unsafe { b_tile.copy4_async(r, b_c, g.b, b_idx, 4) };
            } else {
                let inside = k0 + r < g.k;
                if ALIGNED {
                    // SAFETY: as above, with only the b_valid floats inside
                    // B read (none past row K).
                    unsafe { b_tile.copy4_async(r, b_c, g.b, b_idx, if inside { b_valid } else { 0 }) };
                } else {
                    unroll!(4; 4, |j| {
                        // SAFETY: as above, one float at a time.
                        unsafe { b_tile.copy1_async(r, b_c + j, g.b, b_idx + j, inside && j < b_valid) };
                    });
                }
            }
        });
    });

    // This lane's place in its warp's tile and in the mma fragments: g and
    // t of device::mma, and the row and column of A's m16 x k8 tile whose
    // 16 bytes it names for `ldmatrix` (matrices: rows 0-7 / 8-15, k 0-3 /
    // 4-7).
    let (warp, lane) = (tid / 32, tid % 32);
    let (group, quad) = (lane / 4, lane % 4);
    let (ldm_row, ldm_col) = (lane % 8 + 8 * (lane / 8 % 2), 4 * (lane / 16));
    let warp_row = warp / (BN / WN) * WM;
    let warp_col = warp % (BN / WN) * WN;

    // Fragments of k-step `step` of stage `s`, rounded to TF32: `a[mi]`
    // for the warp's mma rows mi, `b[ni]` for its mma columns ni. Callers
    // guarantee the stage's copies have landed and are visible (wait and
    // barrier) and that no thread writes it before the next barrier.
    let fragments = inline_always!(|s: usize, step: usize| {
        let (a_tile, b_tile) = stage(s);
        let k0 = 8 * step;
        let mut a = [[0u32; 4]; MI];
        let mut b = [[0u32; 2]; NI];
        unroll!(MI; 4, |mi| {
            let r = warp_row + mi * 16 + ldm_row;
            // SAFETY: every lane of the warp is here (no lane-dependent
            // branch); r < BM (warp_row + WM <= BM); k0 + ldm_col + 4 <= BK
            // and the swizzle moves whole chunks, so the word is a multiple
            // of 4; the stage is not written (caller).
            let raw = unsafe { a_tile.load_matrix_x4(r, a_swizzle(r, k0 + ldm_col)) };
            let raw = if MUTATION == SWAPPED_FRAGMENT {
                // The mutant's A fragment in the wrong register order.
                [raw[0], raw[2], raw[1], raw[3]]
            } else {
                raw
            };
            a[mi] = raw.map(to_tf32);
        });
        unroll!(NI; 8, |ni| {
            let n = warp_col + ni * 8 + group;
            // SAFETY: k0 + quad + 4 < BK and n < BN; the stage is not
            // written (caller).
            let (b0, b1) = unsafe { (b_tile.load(k0 + quad, n), b_tile.load(k0 + quad + 4, n)) };
            b[ni] = [to_tf32(b0), to_tf32(b1)];
        });
        (a, b)
    });

    let mut acc = [[[0.0f32; 4]; NI]; MI];
    let k_tiles = g.k.div_ceil(BK);

    // Prologue: tiles 0 .. STAGES - 2 in flight, one group each (empty
    // groups past the end keep the count uniform); then tile 0 landed and
    // visible, and its first fragments in registers.
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
        // Fully unrolled: ptxas overlaps a step's fragment loads with the
        // previous step's mma.
        unroll!(BK / 8; 8, |step| {
            if SPLIT {
                // 3xTF32 (step 23): the fragments as in `fragments`, each
                // value split into its two TF32 parts ([`split_tf32`]);
                // then the two small terms first and big * big last
                // (small * small is dropped). Written
                // out here, not as a second closure, so that step 11's
                // code is untouched by it.
                let (a_tile, b_tile) = stage(read_stage);
                let k0 = 8 * step;
                let (mut a_big, mut a_small) = ([[0u32; 4]; MI], [[0u32; 4]; MI]);
                let (mut b_big, mut b_small) = ([[0u32; 2]; NI], [[0u32; 2]; NI]);
                unroll!(MI; 4, |mi| {
                    let r = warp_row + mi * 16 + ldm_row;
                    // SAFETY: as in `fragments` (the same loads).
                    let raw = unsafe { a_tile.load_matrix_x4(r, a_swizzle(r, k0 + ldm_col)) };
                    unroll!(4; 4, |i| {
                        (a_big[mi][i], a_small[mi][i]) = split_tf32(raw[i]);
                    });
                });
                unroll!(NI; 8, |ni| {
                    let n = warp_col + ni * 8 + group;
                    // SAFETY: as in `fragments` (the same loads).
                    let raw = unsafe { [b_tile.load(k0 + quad, n), b_tile.load(k0 + quad + 4, n)] };
                    unroll!(2; 2, |i| {
                        (b_big[ni][i], b_small[ni][i]) = split_tf32(raw[i]);
                    });
                });
                // The three products of a k-step go into a partial sum of
                // their own, added into the accumulators by the FMA pipe:
                // the tensor cores' own additions truncate (step 23's
                // header), and would do so against the whole running sum.
                unroll!(MI; 4, |mi| {
                    unroll!(NI; 8, |ni| {
                        let mut part = [0.0f32; 4];
                        mma_m16n8k8_tf32(&mut part, a_small[mi], b_big[ni]);
                        mma_m16n8k8_tf32(&mut part, a_big[mi], b_small[ni]);
                        mma_m16n8k8_tf32(&mut part, a_big[mi], b_big[ni]);
                        unroll!(4; 4, |i| {
                            acc[mi][ni][i] += part[i];
                        });
                    });
                });
            } else {
                let (a, b) = fragments(read_stage, step);
                unroll!(MI; 4, |mi| {
                    unroll!(NI; 8, |ni| {
                        mma_m16n8k8_tf32(&mut acc[mi][ni], a[mi], b[ni]);
                    });
                });
            }
        });
        // Tile kt + 1 is the oldest group but WAIT: wait for it, then one
        // barrier makes every thread's copies visible and ends all reads
        // of tile kt.
        if MUTATION != NO_WAIT {
            wait_group::<WAIT>();
        }
        sync_threads();
        read_stage = if read_stage + 1 == STAGES { 0 } else { read_stage + 1 };
    }
    // Every group is retired before the kernel ends (the last ones are empty).
    wait_group::<0>();

    // Epilogue: lane (g, t) holds C[g][2t..2t + 2] and C[g + 8][2t..2t + 2]
    // of each mma tile. 64-bit stores where the pair is inside C and
    // aligned (n even), else one float at a time.
    let pairs = g.vec2_c();
    unroll!(MI; 4, |mi| {
        unroll!(NI; 8, |ni| {
            let col = col0 + warp_col + ni * 8 + 2 * quad;
            unroll!(2; 2, |half| {
                let row = row0 + warp_row + mi * 16 + group + 8 * half;
                let pair = [acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1]];
                if row < g.m {
                    if pairs && col + 1 < g.n {
                        // SAFETY: row < m and col + 1 < n; n and col are
                        // even, so the index is; this lane alone owns the pair.
                        unsafe { g.store_c2(row * g.ldc + col, pair) };
                    } else {
                        unroll!(2; 2, |j| {
                            if col + j < g.n {
                                // SAFETY: row < m, col + j < n; one owner.
                                unsafe { g.store_c(row * g.ldc + col + j, pair[j]) };
                            }
                        });
                    }
                }
            });
        });
    });
}
