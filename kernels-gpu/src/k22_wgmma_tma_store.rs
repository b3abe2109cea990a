//! Step 22: C written by TMA. In step 20 the consumers store their
//! accumulators to global memory themselves, 128 KB of f32 per 128 x 256
//! tile, and the tensor cores wait until the last store has issued. A K
//! sweep at m = n = 4096 (docs/measurements.md, eleventh session) shows
//! that cost: step 20's time grows with K as cuBLAS's does, but carries
//! a larger cost per tile that K does not change.
//!
//! What changes from step 20 (its block, with `TMA_C`):
//! - **Each warp stages its 16 rows in shared memory and TMA writes
//!   them.** A box is 16 rows by 128 bytes of C (32 f32 or 64 16-bit
//!   values), in the 128-byte swizzle TMA undoes on the way out, so a
//!   warp's 64-bit writes spread over the banks. Two boxes per warp take
//!   turns: while the copy engine reads one, the warp fills the other
//!   (`cp.async.bulk.wait_group.read 1` before reuse). The consumers go
//!   on to the next tile's `wgmma`s as soon as the last box is handed
//!   over; the writes to global memory drain behind them.
//! - **The boxes are written in a rolled loop**, over the tile's four
//!   64-column slices (one box of a 16-bit C, two of f32), one copy of
//!   it per epilogue (plain, or fused with each activation), chosen once
//!   per tile. Written with a copy per box and the activation chosen per
//!   element (the compiler made that choice a jump table), the kernel's
//!   code was 175-185 KB, and a fused epilogue ran through most of it
//!   once per tile, from L2 into the instruction cache. The accumulators
//!   stay in registers: each trip reads the first 32 (constant indices)
//!   and moves the next slice's to the front.
//! - **Edge tiles need no code of their own**: TMA writes only the part of
//!   a box inside C.
//! - **Where TMA cannot store C** (beta not 0: a store cannot blend with
//!   C's old values; C's start or rows not on 16 bytes) the threads store
//!   it as in step 20 ([`crate::launch::c_by_tma`], asked by host and
//!   kernel alike: the host makes C's tensor map exactly then).
//!
//! Shared memory: step 20's 192 KB of stages, then 32 KB of boxes (two
//! of 2 KB per consumer warp), 1024-byte aligned for the swizzle.
//!
//! Prediction (H200, n = 4096, beta = 0): most of that cost per tile
//! hidden, about 1.00x cuBLAS BF16 with an f32 C; more with a 16-bit C,
//! whose stores step 20 makes in half-sector pieces. The measurement
//! lives in docs/bench.json and the README's bench table (`cargo xtask
//! bench`). GPU only, like steps 12-20.

#[cfg(target_arch = "nvptx64")]
use crate::device::barrier::sync_warp;
#[cfg(target_arch = "nvptx64")]
use crate::device::warp::shuffle_idx;
#[cfg(target_arch = "nvptx64")]
use crate::device::SharedTile;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::{TensorMaps, bulk_commit, bulk_wait_read};
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::fence_proxy_async;
use crate::elem::{Bf16, Element, F16, Math};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, Output};
#[cfg(target_arch = "nvptx64")]
use crate::k19_wgmma_16bit::BK;
use crate::k19_wgmma_16bit::Params;
#[cfg(target_arch = "nvptx64")]
use crate::k20_wgmma_persistent::block;
use crate::launch::{KernelSpec, Ops};
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// Words of one staging box: 16 rows of 128 bytes.
pub(crate) const BOX_WORDS: usize = 16 * 32;
/// Words of the staging boxes of the eight consumer warps, two each.
pub(crate) const STAGING_WORDS: usize = 8 * 2 * BOX_WORDS;

/// One instance: `$spec` for the host; for the GPU the body `$name` on
/// A and B of type `$t` (as stored) and C of type `$c`, and its PTX entry
/// in the `wgmma` module.
macro_rules! instance {
    ($name:ident, $spec:ident, $t:ident, $c:ident, $math:expr, $stages:literal) => {
        pub const $spec: KernelSpec = Params::new($stages).spec_of(
            stringify!($name),
            (<$t as Element>::ELEM, <$t as Element>::ELEM, <$c as Element>::ELEM),
            $math,
            22,
            "step 20 with C written by TMA: each warp stages 16 rows in shared memory, the copy engine stores them while the next tile runs",
            (true, Ops::NN, true),
        );
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$t, $t, $c>, maps: TensorMaps) {
            block::<$t, $c, $stages, { Params::new($stages).stage_words() }, BK, 0, 1, true>(g, maps, None)
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps, elems($t, $t, $c));
        }
    };
}

// C in f32 and C in the input type (`_c16`), A and B as they are.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_bf16_tma_store_128x256x64_s4, SPEC_BF16_128X256X64_S4, Bf16, f32, Math::Bf16, 4);
    instance!(wgmma_f16_tma_store_128x256x64_s4, SPEC_F16_128X256X64_S4, F16, f32, Math::F16, 4);
    instance!(wgmma_bf16_tma_store_128x256x64_s4_c16, SPEC_BF16_128X256X64_S4_C16, Bf16, Bf16, Math::Bf16, 4);
    instance!(wgmma_f16_tma_store_128x256x64_s4_c16, SPEC_F16_128X256X64_S4_C16, F16, F16, Math::F16, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[
    SPEC_BF16_128X256X64_S4,
    SPEC_F16_128X256X64_S4,
    SPEC_BF16_128X256X64_S4_C16,
    SPEC_F16_128X256X64_S4_C16,
];

/// A staging box: 16 rows of 32 words (128 bytes).
#[cfg(target_arch = "nvptx64")]
type StagingBox = SharedTile<16, 32>;

/// The byte of a swizzled 128-byte-row box at which byte `byte` of row
/// `row` lies: TMA's 128-byte swizzle XORs the 16-byte chunk's index with
/// the row's index mod 8 (the box is 1024-byte aligned).
#[inline(always)]
pub const fn swizzled(row: usize, byte: usize) -> usize {
    row * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16
}

/// The epilogue by TMA (beta = 0, [`crate::launch::c_by_tma`]): thread
/// `tid` of the two consumer warpgroups hands its `ACC` accumulators of
/// the BM x (2 `ACC`) tile at `(row0, col0)` (BM x BN; 128 x 128 in step
/// 26) to the copy engine. `acc[4j + 2h + e]`
/// is C[row0 + 64 wg + 16 w + g + 8 h][col0 + 8 j + 2 t + e] (step 19's
/// [`crate::k19_wgmma_16bit::store_tile`] says why).
///
/// Each warp writes its 16 rows one box of 128 bytes per row at a time
/// into one of its two boxes at `staging`, alternately; lane 0 first waits
/// until the engine has read that box's previous contents, and after the
/// warp's writes and fences issues the box's store, one bulk group each.
/// A fused epilogue is applied to the values in registers before they
/// are written ([`Gemm::fuse_values`]; row and column operands read once
/// per tile, the columns spread over the lanes), so C is rounded once;
/// with `AHEAD` a 16-bit C's column operands are read a slice ahead (a
/// caller whose kernel has not the registers for them passes false).
/// The stores are not waited for here: the next call's waits and the
/// block's last `bulk_wait` do that.
///
/// # Safety
/// `staging` is the first of [`STAGING_WORDS`] words of shared memory,
/// 1024-byte aligned, that only this function touches while the block
/// runs it; `maps.c()` describes C (made by the host, since
/// `c_by_tma` holds); the tile's elements of C are this block's alone.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn store_tile_tma<A: Element, B: Element, C: Output, const ACC: usize, const AHEAD: bool>(
    g: Gemm<A, B, C>,
    acc: &[f32; ACC],
    row0: usize,
    col0: usize,
    tid: usize,
    staging: usize,
    maps: TensorMaps,
) {
    use crate::epilogue::{Activation as Act, EpilogueParams};
    // The epilogue is chosen once per tile, so that each copy of the loop
    // over the boxes is straight-line code (uniform across the launch).
    let act = g.ep.flags & EpilogueParams::ACTIVATION;
    macro_rules! boxes {
        ($fused:literal, $act:expr) => {
            // SAFETY: forwarded (the contract).
            unsafe { store_boxes::<A, B, C, ACC, AHEAD, $fused, { $act as u32 }>(g, acc, row0, col0, tid, staging, maps) }
        };
    }
    if g.ep.flags == 0 {
        boxes!(false, Act::None);
    } else if act == Act::Relu as u32 {
        boxes!(true, Act::Relu);
    } else if act == Act::GeluTanh as u32 {
        boxes!(true, Act::GeluTanh);
    } else if act == Act::GeluErf as u32 {
        boxes!(true, Act::GeluErf);
    } else if act == Act::Silu as u32 {
        boxes!(true, Act::Silu);
    } else {
        boxes!(true, Act::None);
    }
}

/// [`store_tile_tma`] for one epilogue: `FUSED` (a bias, scales or an
/// activation) with the activation `ACT`.
///
/// # Safety
/// As [`store_tile_tma`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn store_boxes<
    A: Element,
    B: Element,
    C: Output,
    const ACC: usize,
    const AHEAD: bool,
    const FUSED: bool,
    const ACT: u32,
>(
    g: Gemm<A, B, C>,
    acc: &[f32; ACC],
    row0: usize,
    col0: usize,
    tid: usize,
    staging: usize,
    maps: TensorMaps,
) {
    use crate::epilogue::EpilogueParams;
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let first_row = row0 + 64 * wg + 16 * warp;
    let (group, pair) = (lane / 4, 2 * (lane % 4));
    let bytes = C::ELEM.bytes();
    // Columns of C per box row, and boxes per warp's 16 rows.
    let cols = 128 / bytes;
    let boxes_base = staging + (tid / 32) * 2 * BOX_WORDS;
    // The fused epilogue's operands of the lane's two rows (per-row
    // vectors; identities otherwise), read once per tile.
    let mut row_ops = [(1.0f32, 0.0f32); 2];
    // A 16-bit C reads the column operands a slice ahead, the slice's
    // loads in flight together: lane `l` holds column `col0 + 64 s + 32 q
    // + l` of slice `s` in `col_ops[q]`, and the slice takes its columns
    // from their lanes by shuffles. (Read where they were used, the loads
    // waited one after another, register pressure serializing them: the
    // measurement is in docs/measurements.md, twenty-ninth session.) An
    // f32 C, with twice the boxes per slice, has not the registers (it
    // spills) and reads them where they are used; so does a caller whose
    // kernel spills with them (`AHEAD` false: step 26's wide tile).
    let ahead = bytes == 2 && AHEAD;
    let column_scale = g.ep.flags & (EpilogueParams::HAS_SCALE | EpilogueParams::SCALE_PER_COLUMN)
        == EpilogueParams::HAS_SCALE | EpilogueParams::SCALE_PER_COLUMN;
    let slice_ops = |s: usize| -> [(f32, f32); 2] {
        let mut ops = [(1.0f32, 0.0f32); 2];
        if FUSED {
            unroll!(2; 2, |q| { ops[q] = g.operands_along(true, (first_row, col0 + 64 * s + 32 * q + lane)) });
        }
        ops
    };
    let mut next_ops = slice_ops(0);
    if FUSED {
        unroll!(2; 2, |h| { row_ops[h] = g.operands_along(false, (first_row + group + 8 * h, col0)) });
    }
    // A rolled loop over the tile's 64-column slices (one box of a
    // 16-bit C, two of f32): its body is in the kernel once per epilogue
    // (a copy per box made the code 175-185 KB, run once per tile through
    // the instruction cache). The accumulators stay in registers: the
    // body reads `a`'s first 32 values only (constant indices), and each
    // trip moves the next slice's to the front.
    const { assert!(ACC % 32 == 0 && ACC <= 128) };
    let boxes = 64 / cols;
    let mut a = *acc;
    let mut s = 0;
    while s < ACC / 32 {
        // The slice's values, in halves of 4 column octets: `v[q][4 jq +
        // 2 h + e]` is C[first_row + group + 8 h][col0 + 64 s + 8 (4 q +
        // jq) + pair + e] (`a[16 q + 4 jq + 2 h + e]`), computed (and,
        // with a fused epilogue, finished in registers) before its boxes
        // are free. (Computed box by box instead, the f32 kernels spill.)
        let col_ops = next_ops;
        if s + 1 < ACC / 32 {
            next_ops = slice_ops(s + 1);
        }
        let mut v = [[0.0f32; 16]; 2];
        unroll!(2; 2, |q| {
            unroll!(16; 16, |i| { v[q][i] = g.alpha * a[16 * q + i] });
            if FUSED {
                // Column `col0 + 64 s + 32 q + 8 (c / 2) + pair + c % 2`
                // of the half: from the lane holding it in `col_ops[q]`,
                // or read.
                let mut ops = [(1.0f32, 0.0f32); 8];
                unroll!(8; 8, |c| {
                    let at = 8 * (c / 2) + pair + c % 2;
                    if ahead {
                        // Uniform branches: every lane shuffles, or none.
                        if column_scale {
                            ops[c].0 = shuffle_idx(col_ops[q].0, at as u32);
                        }
                        ops[c].1 = shuffle_idx(col_ops[q].1, at as u32);
                    } else {
                        let col = col0 + 64 * s + 8 * (4 * q + c / 2) + pair + c % 2;
                        ops[c] = g.operands_along(true, (first_row, col));
                    }
                });
                v[q] = g.fuse_values::<ACT, 16>(v[q], |i| {
                    Gemm::<A, B, C>::combined(row_ops[i / 2 % 2], ops[i / 4 * 2 + i % 2])
                });
            }
        });
        unroll!(2; 2, |bb| {
            if bb < boxes {
                let b = s * boxes + bb;
                let box_word = boxes_base + (b % 2) * BOX_WORDS;
                let tile = StagingBox::at(box_word);
                if lane == 0 {
                    // This box's store of two boxes ago has been read.
                    bulk_wait_read::<1>();
                }
                sync_warp();
                unroll!(8; 8, |jj| {
                    if jj < cols / 8 {
                        // The octet's place in the slice.
                        let o = bb * (cols / 8) + jj;
                        unroll!(2; 2, |h| {
                            let row = group + 8 * h;
                            let at = 4 * (o % 4) + 2 * h;
                            let pv = [v[o / 4][at], v[o / 4][at + 1]];
                            // The pair's word in the row, after the swizzle.
                            let col = swizzled(row, (8 * jj + pair) * bytes) % 128 / 4;
                            // SAFETY: inside this warp's box (row < 16,
                            // byte below 128), aligned to the pair's size;
                            // the engine read the box's old contents (the
                            // wait).
                            unsafe {
                                if bytes == 4 {
                                    tile.store2(row, col, pv);
                                } else {
                                    let lo = C::from_f32(pv[0]).bits();
                                    let hi = C::from_f32(pv[1]).bits();
                                    tile.store(row, col, f32::from_bits(lo | hi << 16));
                                }
                            }
                        });
                    }
                });
                fence_proxy_async();
                sync_warp();
                if lane == 0 {
                    // SAFETY: the box is complete and fenced by every
                    // writer (rule 4), untouched until a later wait (rule
                    // 5); its rows of C are this warp's (rule 6); C's map
                    // is the host's (the contract).
                    unsafe { maps.c().store_2d(box_word, (col0 + b * cols) as u32, first_row as u32) };
                    bulk_commit();
                }
            }
        });
        // The next slice's values to the front.
        unroll!(ACC / 16; 8, |o| {
            unroll!(16; 16, |x| {
                let i = 16 * o + x;
                if i + 32 < ACC {
                    a[i] = a[i + 32];
                }
            });
        });
        s += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The swizzle sends the 8 rows of a column of 16-byte chunks to 8
    /// different chunks, and stays inside the box.
    #[test]
    fn the_swizzle_spreads_a_column_over_the_chunks() {
        for byte in (0..128).step_by(16) {
            let mut seen = [false; 8];
            for row in 0..8 {
                let at = swizzled(row, byte);
                assert_eq!(at / 128, row);
                seen[at % 128 / 16] = true;
            }
            assert!(seen.iter().all(|&s| s), "byte {byte}");
        }
        assert!(swizzled(15, 127) < BOX_WORDS * 4);
        assert_eq!(swizzled(0, 20), 20);
        assert_eq!(swizzled(1, 4), 128 + 16 + 4);
    }

    /// The boxes the spec asks the host for are the ones the kernel
    /// stores: 16 rows by 128 bytes of C.
    #[test]
    fn the_spec_has_c_boxes_of_128_bytes() {
        use crate::launch::Operands;
        for spec in SPECS {
            let Operands::TensorMaps(boxes) = spec.operands else { panic!("{}", spec.name) };
            let (rows, cols) = boxes.c.expect(spec.name);
            assert_eq!((rows, cols as usize * spec.elems.c.bytes()), (16, 128), "{}", spec.name);
            assert!(spec.launch.shared_bytes <= 227 * 1024);
        }
    }
}
