//! Step 30: decode with the weight streamed through shared memory,
//! `C = A B^T` with few rows of A (B a weight stored `n x k`), as step
//! 28, but with the bytes a block has in flight set by its stages, not by
//! its registers.
//!
//! Step 28's warps load the weight into registers a round ahead of their
//! FMAs: what an SM has in flight is a round of each resident warp, and
//! registers bound both (docs/measurements.md, thirty-eighth session, has
//! its counts). A memory-bound kernel runs at `bytes in flight / latency`
//! (Little's law), so a decode call of a few rows is short of the DRAM
//! peak by what its warps cannot hold. And at more than 8 rows step 28
//! runs a row of blocks per 8 rows of A, each warp of each reading its
//! block's rows of A (from L1 and L2) beside the weight's.
//!
//! What changes from step 28:
//! - **A ring of [`STAGES`] tiles in shared memory, filled by `cp.async`**
//!   (`device::async_copy`): `STAGES - 1` slices of [`BK`] = 128 of K
//!   are in flight while the block computes on the oldest, whatever the
//!   registers hold; a thread issues 16-byte copies and goes on.
//! - **A staged once per block**, beside B: all of the block's `MR` rows
//!   (8 or 16: one row of blocks up to `MR` rows of A), each row's
//!   slice read from L2 by one warp instead of by every warp.
//! - The same dot products: warp `w` owns rows `w NB .. w NB + NB` of the
//!   block's [`BR`] rows of B, lane `l` the float4 at `4 l` of each
//!   128-wide slice (its shared-memory reads conflict-free: a warp's
//!   128-bit read is 512 contiguous bytes), each of the `MR x NB` sums
//!   added across lanes at the end with step 16's butterfly
//!   ([`warp_sum`]), deterministic, and lane 0 stores.
//!
//! Edges: rows of A past `m` are neither staged nor summed (uniform
//! tests); rows of B past `n` and K past its end are staged as zeros
//! (`cp.async`'s zero fill), whose products change no sum. Rows of A or
//! B not on 16 bytes take 4-byte copies instead of 16-byte ones. Blocks
//! are numbered down the grid's columns ([`tile_down_columns`]), as
//! step 28's. Split-K and batches come from the entry (`gemm_kernel!`).
//!
//! Prediction (H100, f32): 2 x 4096 x 14336 at 2.8-3.0 TB/s (80-90 % of
//! the DRAM peak, 0.080-0.085 ms); 21 x 4096 x 14336 on a 32-row
//! instance, one pass over the weight with A from shared memory, about
//! twice step 28's speed. Measured (step 28 beside it): `bench --suite
//! --shapes ...`, in docs/measurements.md (thirty-eighth session); the
//! 32-row instance lost (bound by its issue rate) and is not in the tree.

use crate::device::async_copy::{commit_group, wait_group};
use crate::device::warp::{WARP, lane, warp_idx, warp_sum};
use crate::device::{SharedTile, fma, sync_threads, thread_idx_x};
use crate::elem::Elems;
use crate::gemm::{Gemm, tile_down_columns};
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::unroll;

/// Threads per block: 8 warps.
pub const THREADS: usize = 256;
/// Warps per block.
const WARPS: usize = THREADS / WARP;
/// Rows of B (columns of C) per warp.
pub const NB: usize = 4;
/// Rows of B (columns of C) per block.
pub const BR: usize = WARPS * NB;
/// K per stage: a float4 per lane of a warp.
pub const BK: usize = WARP * 4;
/// Stages of the ring: `STAGES - 1` in flight while one is computed on.
pub const STAGES: usize = 4;
/// 16-byte chunks per row of a stage.
const CHUNKS: usize = BK / 4;

/// Most rows of A an instance stages.
const MAX_MR: usize = 16;

/// The ring for `MR` rows of A: `Bs[STAGES * BR][BK]` (stage `s`'s row
/// `r` at row `s BR + r`), then `As[STAGES * MR][BK]` (the type's rows are
/// the most an instance uses; the launch provides its own instance's).
/// Rows of 512 bytes need no padding: every access is a warp's 512
/// contiguous bytes.
const B_TILE: SharedTile<{ STAGES * BR }, BK> = SharedTile::at(0);
const A_TILE: SharedTile<{ STAGES * MAX_MR }, BK> = SharedTile::at(B_TILE.end());
const fn shared_bytes(mr: usize) -> usize {
    STAGES * (BR + mr) * BK * 4
}

const _: () = assert!(BK == 128 && (BR * CHUNKS).is_multiple_of(THREADS));

/// The spec of the instance `name` with `mr` rows of A per block.
const fn spec(name: &'static str, body: fn(Gemm), mr: usize) -> KernelSpec {
    KernelSpec {
        name,
        step: 30,
        module: &modules::MMA,
        elems: Elems::FP32,
        summary: "decode: the weight's rows and the block's rows of A streamed through a 4-stage cp.async ring in shared memory, a warp per 4 rows of B, a shuffle sum per element",
        launch: Launch {
            block_threads: (THREADS as u32, 1),
            block_tile: (mr, BR),
            shared_bytes: shared_bytes(mr),
            register_cap: false,
            persistent: false,
        },
        model_reuse: (1, 1),
        body: emulated!(body),
        operands: Operands::Pointers,
        ops: Ops::NT,
        batches: true,
    }
}

/// One instance: `SPEC` for the host, the body `name` for the emulator,
/// and the PTX entry `name`.
macro_rules! instance {
    ($name:ident, $spec:ident, $mr:literal) => {
        pub const $spec: KernelSpec = spec(stringify!($name), $name, $mr);
        /// The body of the PTX entry of the same name. Inlined into the
        /// entry on the GPU; on the host the emulator calls it through
        /// `SPEC.body`, a function compiled here with this crate's
        /// optimization (inlined into a test crate built at opt-level 0,
        /// a 32-row body's frames overflowed an emulated thread's stack).
        #[cfg_attr(target_arch = "nvptx64", inline(always))]
        pub fn $name(g: Gemm) {
            decode_staged::<$mr>(g)
        }
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(decode_staged_8x32, SPEC_8X32, 8);
    instance!(decode_staged_16x32, SPEC_16X32, 16);
}
pub use instances::*;

/// Every instance, fewest rows of A first.
pub const SPECS: &[KernelSpec] = &[SPEC_8X32, SPEC_16X32];

/// `C[row][col] = sum_k A[row][k] * B[col][k]` for the block's `MR` rows
/// and [`BR`] columns. Rows of A and B on 16 bytes (`rows16`) are staged
/// by 16-byte copies, others by 4-byte ones (a uniform branch per copy:
/// one body for both).
#[inline(always)]
fn decode_staged<const MR: usize>(g: Gemm) {
    let (m, n, k) = g.dims32();
    let (tile_row, tile_col) = tile_down_columns();
    let (row0, col0) = ((tile_row * MR) as u32, (tile_col * BR) as u32);
    let (t, lane, warp) = (thread_idx_x(), lane(), warp_idx());
    let vec = g.rows16();
    const { assert!(MR <= MAX_MR && (MR * CHUNKS).is_multiple_of(THREADS)) };
    let (b_tile, a_tile) = (B_TILE, A_TILE);
    // Uniform across the block: rows of A inside the call.
    let row_in = |i: usize| row0 + (i as u32) < m;
    let col_in = |j: usize| col0 + ((warp * NB + j) as u32) < n;

    // Stages the slice of K starting at `kt * BK` into stage `s`: chunk
    // `e = t + THREADS q` is row `e / CHUNKS` (a warp per row: 512
    // contiguous bytes), floats `4 (e % CHUNKS) ..` of it.
    let stage = |kt: u32, s: usize| {
        let k0 = kt * BK as u32;
        // The floats of a chunk at `c` inside K: 0 past its end.
        let valid = |c: u32| k.saturating_sub(c).min(4) as usize;
        unroll!(BR * CHUNKS / THREADS; 4, |q| {
            let e = t + THREADS * q;
            let (r, ch) = (e / CHUNKS, e % CHUNKS);
            let (col, c) = (col0 + r as u32, k0 + (4 * ch) as u32);
            let v = if col < n { valid(c) } else { 0 };
            // SAFETY: col < n and c < k where v > 0 (b_index's contract;
            // nothing is read otherwise); stage row s BR + r < STAGES BR
            // and the chunk's 4 words inside the row; written by this
            // thread alone, read only after the wait and barrier that
            // retire it, and rewritten only after the barrier that ends
            // its stage's reads (async_copy rules 1-3). With `vec`, the
            // index is a multiple of 4 (c is, and ldb: rows16).
            unsafe {
                let index = if v > 0 { g.b_index(col, c) } else { 0 };
                copy(b_tile, s * BR + r, 4 * ch, g.b, index, v, vec);
            }
        });
        unroll!(MR * CHUNKS / THREADS; 4, |q| {
            let e = t + THREADS * q;
            let (r, ch) = (e / CHUNKS, e % CHUNKS);
            // Rows of A past `m` are never read: no copy.
            if row_in(r) {
                let c = k0 + (4 * ch) as u32;
                let v = valid(c);
                // SAFETY: as for B: row0 + r < m, c < k where v > 0; stage
                // row s MR + r < STAGES MR, inside this launch's ring.
                unsafe {
                    let index = if v > 0 { g.a_index(row0 + r as u32, c) } else { 0 };
                    copy(a_tile, s * MR + r, 4 * ch, g.a, index, v, vec);
                }
            }
        });
    };

    let mut acc = [[0.0f32; NB]; MR];
    let k_tiles = k.div_ceil(BK as u32);
    // Prologue: slices 0 .. STAGES - 2 in flight, a group each (empty
    // groups past the end keep every thread's count the same).
    unroll!(STAGES - 1; 4, |s| {
        if (s as u32) < k_tiles {
            stage(s as u32, s);
        }
        commit_group();
    });
    wait_group::<{ STAGES as u32 - 2 }>();
    sync_threads();

    let (mut read, mut write) = (0usize, STAGES - 1);
    let c = 4 * lane;
    for kt in 0..k_tiles {
        // Stage `write` held slice kt - 1, which every thread finished
        // reading before the barrier that ended the last trip.
        if kt + (STAGES as u32) - 1 < k_tiles {
            stage(kt + STAGES as u32 - 1, write);
        }
        commit_group();
        write = if write + 1 == STAGES { 0 } else { write + 1 };
        let mut b = [[0.0f32; 4]; NB];
        unroll!(NB; 4, |j| {
            // SAFETY: row read * BR + warp * NB + j < STAGES * BR, c + 4 <=
            // BK, a multiple of 4; landed (the wait and barrier below, or
            // the prologue's) and not rewritten until the next barrier.
            b[j] = unsafe { b_tile.load4(read * BR + warp * NB + j, c) };
        });
        unroll!(MR; 32, |i| {
            if row_in(i) {
                // SAFETY: as for B: row read * MR + i < STAGES * MR, staged
                // (row i is inside A).
                let a = unsafe { a_tile.load4(read * MR + i, c) };
                unroll!(NB; 4, |j| {
                    unroll!(4; 4, |e| { acc[i][j] = fma(a[e], b[j][e], acc[i][j]) });
                });
            }
        });
        // Slice kt + 1 is the oldest group but STAGES - 2: wait for it,
        // then one barrier makes every thread's copies visible and ends
        // all reads of slice kt.
        wait_group::<{ STAGES as u32 - 2 }>();
        sync_threads();
        read = if read + 1 == STAGES { 0 } else { read + 1 };
    }
    // Every group is retired before the kernel ends (the last are empty).
    wait_group::<0>();

    let col_w = col0 + (warp * NB) as u32;
    unroll!(MR; 32, |i| {
        unroll!(NB; 4, |j| {
            if row_in(i) && col_in(j) {
                // Every lane of the warp is here: the tests are uniform.
                let total = warp_sum(acc[i][j]);
                let (row, col) = (row0 + i as u32, col_w + j as u32);
                if lane == 0 {
                    // SAFETY: row < m and col < n; lane 0 of this warp
                    // alone writes C[row][col].
                    unsafe { g.store_c(g.c_index(row, col), total) };
                }
            }
        });
    });
    if g.ep.flags != 0 && lane == 0 {
        // The fused epilogue once over the warp's `MR x NB` elements (a
        // rolled loop, not a copy per element), by the lane that stored
        // them.
        // SAFETY: the rectangle (clipped to C) is this warp's alone, every
        // element stored by this thread above (a group of one).
        unsafe { g.fuse_region((row0 as usize, col_w as usize), (MR, NB), 0, 1) };
    }
}

/// Starts copying the `valid` floats at `src[index..]` into
/// `tile[row][col..col + 4]`, zeros after them: one 16-byte copy with
/// `vec`, four 4-byte ones otherwise.
///
/// # Safety
/// As [`SharedTile::copy4_async`]'s; with `vec`, `index` is a multiple of
/// 4 and `src` 16-byte aligned.
#[inline(always)]
unsafe fn copy<const ROWS: usize>(
    tile: SharedTile<ROWS, BK>,
    row: usize,
    col: usize,
    src: crate::device::GlobalIn,
    index: usize,
    valid: usize,
    vec: bool,
) {
    if vec {
        // SAFETY: forwarded (the caller's contract).
        unsafe { tile.copy4_async(row, col, src, index, valid) };
    } else {
        unroll!(4; 4, |e| {
            // SAFETY: forwarded; element e is read only where e < valid.
            unsafe { tile.copy1_async(row, col + e, src, index + e, e < valid) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring fits beside another block on an SM (227 KB); every stage
    /// row is 16-byte aligned (the copies' destinations).
    #[test]
    fn the_ring_fits_an_sm() {
        assert_eq!(SPEC_8X32.launch.shared_bytes, 80 * 1024);
        const { assert!(2 * SPEC_16X32.launch.shared_bytes <= 227 * 1024) };
        assert!(B_TILE.end().is_multiple_of(4) && BK.is_multiple_of(4));
        assert_eq!(A_TILE.end() * 4, shared_bytes(MAX_MR));
    }

    /// Each instance's spec launches the tile its body computes, rows of
    /// A first, all with B transposed.
    #[test]
    fn every_instance_launches_its_tile() {
        for (spec, mr) in SPECS.iter().zip([8, 16]) {
            assert_eq!(spec.launch.block_tile, (mr, BR), "{}", spec.name);
            assert_eq!(spec.ops, Ops::NT, "{}", spec.name);
            assert_eq!(spec.name, format!("decode_staged_{mr}x{BR}"));
        }
    }
}
