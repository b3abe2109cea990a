//! Not a ladder step: the copy that lets the TMA kernels (steps 12-13)
//! take any problem. TMA describes a matrix by its start, which must be
//! 16-byte aligned, and its row stride, which must be a multiple of 16
//! bytes; when A or B breaks either rule (`lda` or `ldb` not a multiple
//! of 4 for f32, 8 for the 16-bit types, for example K or N odd in a
//! dense product) the host copies A and B as stored into buffers whose
//! rows are padded with zeros to 128-byte multiples, which TMA reads
//! faster than rows only 16 bytes apart (`host/gemm/src/tma.rs`, `Padded`;
//! `launch::COPY_ROW_ALIGN_BYTES`), and the tensor maps describe the
//! copies.
//! The zeros add nothing to C. One entry per element size: [`ENTRY`]
//! ([`pad_rows`], 4-byte elements, one per thread) and [`ENTRY_16`]
//! ([`pad_rows_wide`], 2-byte elements, copying BF16 and FP16 alike: bits
//! are bits; and [`ENTRY_8`], the same for FP8), whose threads write 16
//! bytes each, so that the stores are
//! full-width and the copy runs near DRAM speed (2-byte stores, one per
//! thread, ran at a ninth of it: docs/measurements.md).
//!
//! One thread per element of the padded matrix: consecutive threads take
//! consecutive columns, so the reads of the source rows (which start at
//! any 4-byte boundary) and the writes are coalesced. A memory-bound copy;
//! the driver's own `cuMemcpy2DAsync`, tried first, made the whole launch
//! at n = 4097 about 5 % slower (docs/measurements.md).
//!
//! Step 17 reads B transposed (TF32 `wgmma` reads only K-major tiles from
//! shared memory), so its launches copy B with [`transpose_tf32`] instead,
//! at every shape: B^T, rows padded to multiples of 32 floats, rounded to
//! TF32. Step 24 (3xTF32) reads both operands split into two TF32 parts
//! ([`crate::launch::TmaCopy::SplitTf32`]): [`split_rows_tf32`] writes A's,
//! [`transpose_tf32_into`] with `SPLIT` B^T's.

use crate::device::mma::{split_tf32, to_tf32};
use crate::device::{
    GlobalIn, GlobalOut, SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x,
};
use crate::elem::Element;
use crate::unroll::unroll;

/// Threads per block (x); a block copies part of one row.
pub const THREADS: usize = 256;
/// Rows of blocks at most (CUDA's grid limit in y): the host launches
/// `min(rows, MAX_GRID_ROWS)` of them, and a block walks rows
/// `block_idx_y() + i * MAX_GRID_ROWS`.
pub const MAX_GRID_ROWS: usize = 65_535;
/// The PTX entry of [`pad_rows`] for 4-byte elements (f32), in the module
/// of the TMA kernels.
pub const ENTRY: &str = "pad_rows";
/// The PTX entry of [`pad_rows`] for 2-byte elements (BF16, FP16).
pub const ENTRY_16: &str = "pad_rows_16";
/// [`ENTRY_16`] for two copies in one launch (A's and B's): its entry's
/// parameters `(src, dst, rows, cols, src_ld, ld)` with a second set of
/// the six after them; block z copies the z-th (z = 0, 1), over a grid
/// that covers the larger of the two. One launch instead of two: no gap
/// between them, and each copy's last blocks overlap the other's (step
/// 20 at 777 x 3333 x 1234 both ways: docs/measurements.md, tenth
/// session). Not for f32: [`ENTRY`]'s one-element threads make grids
/// whose blocks are mostly idle for the smaller copy, and the TF32
/// kernels' launches at that shape were slower paired (same place).
pub const PAIR_ENTRY_16: &str = "pad_rows_16_pair";
/// The PTX entry of [`pad_rows_wide`] for 1-byte elements (FP8 E4M3 and
/// E5M2 alike), in the FP8 module, and its two-copy form.
pub const ENTRY_8: &str = "pad_rows_8";
pub const PAIR_ENTRY_8: &str = "pad_rows_8_pair";

/// Elements of the padded matrix each thread of [`ENTRY_16`] writes.
pub const X8: usize = 8;
/// Elements of the padded matrix each thread of [`ENTRY_8`] writes.
pub const X16: usize = 16;

/// The padding entry for elements of `bytes` bytes, if there is one; the
/// entry of two copies in one launch, where there is one
/// ([`PAIR_ENTRY_16`]); and how many consecutive elements of a row each of
/// their threads writes.
pub const fn pad_entry(bytes: usize) -> Option<(&'static str, Option<&'static str>, usize)> {
    match bytes {
        4 => Some((ENTRY, None, 1)),
        2 => Some((ENTRY_16, Some(PAIR_ENTRY_16), X8)),
        1 => Some((ENTRY_8, Some(PAIR_ENTRY_8), X16)),
        _ => None,
    }
}

/// `dst[r][c] = src[r][c]` for `c < cols`, `0` for `cols <= c < ld`, for
/// every row `r < rows`; `src`'s rows are `src_ld` elements apart, `dst`'s
/// `ld`.
pub fn pad_rows<T: Element>(
    src: GlobalIn<T>,
    dst: GlobalOut<T>,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    let c = block_idx_x() * THREADS + thread_idx_x();
    if c >= ld {
        return;
    }
    let mut r = block_idx_y();
    while r < rows {
        let value = if c < cols {
            // SAFETY: r < rows and c < cols: inside src (rows x cols,
            // rows src_ld apart).
            unsafe { src.read(r * src_ld + c) }
        } else {
            T::ZERO
        };
        // SAFETY: r < rows and c < ld: inside dst (rows x ld); one thread
        // per (r, c).
        unsafe { dst.write(r * ld + c, value) };
        r += MAX_GRID_ROWS;
    }
}

/// [`pad_rows`] with each thread writing `W` consecutive elements of a
/// row of `dst` as one 16-byte store: for 2-byte types ([`X8`]), whose
/// one-element stores are a quarter of what the memory system moves per
/// access, and 1-byte ones ([`X16`]). The source is read element by
/// element (its rows start anywhere: that is why it is copied).
///
/// `ld` must be a multiple of `W` (the host's padded rows are 16-byte
/// multiples) and `W` elements of `T` 16 bytes.
pub fn pad_rows_wide<T: Element, const W: usize>(
    src: GlobalIn<T>,
    dst: GlobalOut<T>,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    let c = (block_idx_x() * THREADS + thread_idx_x()) * W;
    if c >= ld {
        return;
    }
    let mut r = block_idx_y();
    while r < rows {
        let mut v = [T::ZERO; W];
        unroll!(W; 16, |j| {
            if c + j < cols {
                // SAFETY: r < rows and c + j < cols: inside src.
                v[j] = unsafe { src.read(r * src_ld + c + j) };
            }
        });
        // SAFETY: r < rows, c + W <= ld (ld and c are multiples of W):
        // inside dst (rows x ld), 16-byte aligned (r * ld + c is a
        // multiple of W elements of 16 / W bytes); one thread per W
        // elements.
        unsafe { dst.write16(r * ld + c, v) };
        r += MAX_GRID_ROWS;
    }
}

/// The PTX entry of [`transpose_tf32`] (in the module of the TMA kernels).
pub const TRANSPOSE_ENTRY: &str = "transpose_tf32";
/// [`transpose_tf32`]'s square tile: `TILE x TILE` elements per block,
/// staged in shared memory with rows of `TILE + 1` words.
pub const TILE: usize = 32;
/// Its threads per block: `TILE` columns by `PASS_ROWS` rows, so each
/// thread moves `TILE / PASS_ROWS` elements, all its loads in flight
/// before the first store. (Tiles of 64, 16 elements per thread, made
/// step 17's launch at n = 4096 slower: docs/measurements.md.)
pub const TRANSPOSE_THREADS: usize = 256;
const PASS_ROWS: usize = TRANSPOSE_THREADS / TILE;
const PASSES: usize = TILE / PASS_ROWS;
/// Its shared memory, in bytes.
pub const TRANSPOSE_SHARED_BYTES: usize = TILE * (TILE + 1) * 4;

/// Step 17's copy of B: `dst[c][r] = tf32(src[r][c])` for `r < rows`,
/// `c < cols`, and `0` for `rows <= r < ld`: a `rows x cols` matrix
/// (rows `src_ld` apart) becomes its transpose, `cols` rows of `ld`
/// floats, each value rounded to TF32 (`cvt.rna`), so that TMA can copy
/// it K-major and the tensor cores read it as they read A.
pub fn transpose_tf32(
    src: GlobalIn,
    dst: GlobalOut,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    transpose_tf32_into::<false>(src, dst, rows, cols, src_ld, ld)
}

/// Step 24's copy of B: [`transpose_tf32`] with each value split into its
/// two TF32 parts ([`split_tf32`]) and `ld` twice the transpose's padded
/// row, laid out as [`crate::launch::TmaCopy::SplitTf32`] says: for `r <
/// ld / 2`, `dst[c][64 (r / 32) + r % 32]` is `big` of `src[r][c]` and 32
/// words later its `small` (zeros for `r >= rows`). `ld` is a multiple of
/// 64.
pub fn transpose_split_tf32(
    src: GlobalIn,
    dst: GlobalOut,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    transpose_tf32_into::<true>(src, dst, rows, cols, src_ld, ld)
}

/// The transposing copies: [`transpose_tf32`], and with `SPLIT`
/// [`transpose_split_tf32`].
///
/// Block `(x, y)` moves the `TILE x TILE` square at source columns `x *
/// TILE` and rows `(y + i * MAX_GRID_ROWS) * TILE`: its threads read
/// source rows (consecutive threads, consecutive columns), stage them in
/// shared memory with one word of padding per row (so that reading a
/// column is conflict-free), and after the barrier write destination
/// rows, again consecutive threads on consecutive words (with `SPLIT`,
/// two runs of 32 words: the square's big parts, then its small ones).
#[inline(always)]
pub fn transpose_tf32_into<const SPLIT: bool>(
    src: GlobalIn,
    dst: GlobalOut,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    let tile = SharedTile::<TILE, { TILE + 1 }>::at(0);
    const { assert!(TRANSPOSE_THREADS.is_multiple_of(TILE) && TILE.is_multiple_of(PASS_ROWS)) };
    let (tx, ty) = (thread_idx_x() % TILE, thread_idx_x() / TILE);
    let c0 = block_idx_x() * TILE;
    let mut r0 = block_idx_y() * TILE;
    // The source rows the destination's rows hold (ld, or half of it).
    let k_len = if SPLIT { ld / 2 } else { ld };
    // The same trip count for the whole block: the barriers inside are
    // reached by every thread.
    while r0 < k_len {
        unroll!(PASSES; 16, |i| {
            let (r, c) = (r0 + ty + i * PASS_ROWS, c0 + tx);
            let v = if r < rows && c < cols {
                // SAFETY: r < rows, c < cols: inside src.
                let x = unsafe { src.read(r * src_ld + c) };
                // The split needs the value as it is; it rounds below.
                if SPLIT { x } else { f32::from_bits(to_tf32(x)) }
            } else {
                0.0
            };
            // SAFETY: row ty + i * PASS_ROWS < TILE, column tx < TILE + 1;
            // each thread its own words; read only after the barrier below.
            unsafe { tile.store(ty + i * PASS_ROWS, tx, v) };
        });
        sync_threads();
        unroll!(PASSES; 16, |i| {
            // Destination row c (a source column), word r (a source row).
            let (c, r) = (c0 + ty + i * PASS_ROWS, r0 + tx);
            if c < cols && r < k_len {
                // SAFETY: written before the barrier above; not rewritten
                // before the barrier below.
                let v = unsafe { tile.load(tx, ty + i * PASS_ROWS) };
                if SPLIT {
                    let (big, small) = split_tf32(v);
                    // r0 is a multiple of 32: chunk r0 / 32 of row c
                    // starts at word 2 * r0.
                    let at = c * ld + 2 * r0 + tx;
                    // SAFETY: c < cols and 2 * r0 + 32 + tx < 2 * k_len =
                    // ld (k_len is a multiple of 32): inside dst (cols x
                    // ld); one thread per (c, r).
                    unsafe {
                        dst.write(at, f32::from_bits(big));
                        dst.write(at + TILE, f32::from_bits(small));
                    }
                } else {
                    // SAFETY: c < cols and r < ld: inside dst (cols x ld);
                    // one thread per (c, r).
                    unsafe { dst.write(c * ld + r, v) };
                }
            }
        });
        // The tile is rewritten in the next round only after every thread
        // has read its words.
        sync_threads();
        r0 += MAX_GRID_ROWS * TILE;
    }
}

/// The PTX entry of [`split_rows_tf32`] (in the module of the TMA kernels).
pub const SPLIT_ENTRY: &str = "split_rows_tf32";
/// The PTX entry of [`transpose_split_tf32`].
pub const TRANSPOSE_SPLIT_ENTRY: &str = "transpose_split_tf32";

/// Step 24's copy of A: a `rows x cols` matrix (rows `src_ld` apart)
/// with each value split into its two TF32 parts ([`split_tf32`]), laid
/// out as [`crate::launch::TmaCopy::SplitTf32`] says: for `c < ld / 2`,
/// `dst[r][64 (c / 32) + c % 32]` is `big` of `src[r][c]` and 32 words
/// later its `small` (zeros for `c >= cols`). `ld` is a multiple of 64.
///
/// One thread per element of the split row's first half, as [`pad_rows`]:
/// a warp reads 32 consecutive source values and writes their 32 big
/// parts and then their 32 small ones, 128 contiguous bytes each.
pub fn split_rows_tf32(
    src: GlobalIn,
    dst: GlobalOut,
    rows: usize,
    cols: usize,
    src_ld: usize,
    ld: usize,
) {
    let c = block_idx_x() * THREADS + thread_idx_x();
    if c >= ld / 2 {
        return;
    }
    let at = 2 * (c - c % TILE) + c % TILE;
    let mut r = block_idx_y();
    while r < rows {
        let value = if c < cols {
            // SAFETY: r < rows and c < cols: inside src.
            unsafe { src.read(r * src_ld + c) }
        } else {
            0.0
        };
        let (big, small) = split_tf32(value);
        // SAFETY: r < rows and at + 32 < 2 * (ld / 2) <= ld (ld / 2 is a
        // multiple of 32): inside dst (rows x ld); one thread per (r, c).
        unsafe {
            dst.write(r * ld + at, f32::from_bits(big));
            dst.write(r * ld + at + TILE, f32::from_bits(small));
        }
        r += MAX_GRID_ROWS;
    }
}

/// The PTX entry of a copy: `name(src, dst, rows, cols, src_ld, ld)`, all
/// the copies' signature, calling the body of the same name (or `body`
/// for elements of type `T`).
#[cfg(target_arch = "nvptx64")]
macro_rules! copy_entry {
    ($(#[$doc:meta])* $name:ident) => {
        copy_entry!(@entry $(#[$doc])* $name, super::$name, f32);
    };
    ($(#[$doc:meta])* $name:ident = $body:ident::<$t:ty, $w:literal>) => {
        copy_entry!(@entry $(#[$doc])* $name, super::$body::<$t, $w>, $t);
    };
    (@entry $(#[$doc:meta])* $name:ident, $body:path, $t:ty) => {
        $(#[$doc])*
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            src: *const $t,
            dst: *mut $t,
            rows: u32,
            cols: u32,
            src_ld: u32,
            ld: u32,
        ) {
            // SAFETY: the host upholds the entry's contract (its docs).
            unsafe { super::run_copy($body, (src, dst), (rows, cols, src_ld, ld)) }
        }
    };
}

/// Runs a copy's body on an entry's raw parameters.
///
/// # Safety
/// `src` and `dst` address the matrices the body's contract asks for, at
/// these sizes.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn run_copy<T: Element>(
    body: fn(GlobalIn<T>, GlobalOut<T>, usize, usize, usize, usize),
    (src, dst): (*const T, *mut T),
    (rows, cols, src_ld, ld): (u32, u32, u32, u32),
) {
    // SAFETY: forwarded from this function's contract.
    let (src, dst) = unsafe { (GlobalIn::from_raw(src), GlobalOut::from_raw(dst)) };
    body(
        src,
        dst,
        rows as usize,
        cols as usize,
        src_ld as usize,
        ld as usize,
    )
}

/// The PTX entry of two copies in one launch: `name(src, dst, rows, cols,
/// src_ld, ld, ...)` with the second copy's six parameters after the
/// first's; block z runs `body` on the z-th.
#[cfg(target_arch = "nvptx64")]
macro_rules! pair_entry {
    ($(#[$doc:meta])* $name:ident = $body:path, $t:ty) => {
        $(#[$doc])*
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            src0: *const $t,
            dst0: *mut $t,
            rows0: u32,
            cols0: u32,
            src_ld0: u32,
            ld0: u32,
            src1: *const $t,
            dst1: *mut $t,
            rows1: u32,
            cols1: u32,
            src_ld1: u32,
            ld1: u32,
        ) {
            let (ptrs, sizes) = if crate::device::block_idx_z() == 0 {
                ((src0, dst0), (rows0, cols0, src_ld0, ld0))
            } else {
                ((src1, dst1), (rows1, cols1, src_ld1, ld1))
            };
            // SAFETY: the host upholds the entry's contract (its docs) for
            // both copies.
            unsafe { super::run_copy($body, ptrs, sizes) }
        }
    };
}

#[cfg(all(target_arch = "nvptx64", gemm_module = "wgmma_fp8"))]
mod entry_fp8 {
    copy_entry!(
        /// PTX entry `pad_rows_8(src, dst, rows, cols, src_ld, ld)`:
        /// `pad_rows_wide` for 1-byte elements (FP8, copied as bits).
        ///
        /// # Safety
        /// As `pad_rows`, counting 1-byte elements, with `ld` a multiple of
        /// `X16` and `ceil(ld / (THREADS * X16))` blocks in x.
        pad_rows_8 = pad_rows_wide::<crate::elem::E4m3, 16>
    );
    pair_entry!(
        /// PTX entry `pad_rows_8_pair`: two `pad_rows_8` copies in one
        /// launch.
        ///
        /// # Safety
        /// As `pad_rows_16_pair`, for `pad_rows_8`.
        pad_rows_8_pair = super::pad_rows_wide::<crate::elem::E4m3, 16>, crate::elem::E4m3
    );
}

#[cfg(all(target_arch = "nvptx64", gemm_module = "wgmma"))]
mod entry {
    copy_entry!(
        /// PTX entry `pad_rows(src, dst, rows, cols, src_ld, ld)`.
        ///
        /// # Safety
        /// `src` addresses a `rows x cols` matrix with rows `src_ld` floats
        /// apart and `dst` `rows * ld` floats (`ld >= cols`), not
        /// overlapping; launched with `THREADS` threads in x,
        /// `ceil(ld / THREADS)` blocks in x and `min(rows, MAX_GRID_ROWS)`
        /// in y.
        pad_rows
    );
    copy_entry!(
        /// PTX entry `pad_rows_16(src, dst, rows, cols, src_ld, ld)`:
        /// `pad_rows_x8` for 2-byte elements (BF16 or FP16, copied as bits).
        ///
        /// # Safety
        /// As `pad_rows`, counting 2-byte elements, with `ld` a multiple of
        /// `X8` and `ceil(ld / (THREADS * X8))` blocks in x.
        pad_rows_16 = pad_rows_wide::<crate::elem::Bf16, 8>
    );
    pair_entry!(
        /// PTX entry `pad_rows_16_pair`: two `pad_rows_16` copies in one
        /// launch.
        ///
        /// # Safety
        /// As `pad_rows_16` for each copy, none overlapping another's
        /// buffers, with the grid of the larger (x: the larger `ld`, y:
        /// the larger row count) and 2 blocks in z.
        pad_rows_16_pair = super::pad_rows_wide::<crate::elem::Bf16, 8>, crate::elem::Bf16
    );
    copy_entry!(
        /// PTX entry `transpose_tf32(src, dst, rows, cols, src_ld, ld)`.
        ///
        /// # Safety
        /// `src` addresses a `rows x cols` matrix with rows `src_ld` floats
        /// apart and `dst` `cols * ld` floats (`ld >= rows`), not
        /// overlapping; launched with `TRANSPOSE_THREADS` threads in x,
        /// `TRANSPOSE_SHARED_BYTES` of shared memory, `ceil(cols / TILE)`
        /// blocks in x and `min(ceil(ld / TILE), MAX_GRID_ROWS)` in y.
        transpose_tf32
    );
    copy_entry!(
        /// PTX entry `transpose_split_tf32(src, dst, rows, cols, src_ld, ld)`.
        ///
        /// # Safety
        /// As `transpose_tf32`, with `ld` a multiple of 64, `dst` `cols * ld`
        /// floats and `min(ceil(ld / 2 / TILE), MAX_GRID_ROWS)` blocks in y.
        transpose_split_tf32
    );
    copy_entry!(
        /// PTX entry `split_rows_tf32(src, dst, rows, cols, src_ld, ld)`.
        ///
        /// # Safety
        /// `src` addresses a `rows x cols` matrix with rows `src_ld` floats
        /// apart and `dst` `rows * ld` floats (`ld` a multiple of 64, `ld /
        /// 2 >= cols`), not overlapping; launched with `THREADS` threads in
        /// x, `ceil(ld / 2 / THREADS)` blocks in x and `min(rows,
        /// MAX_GRID_ROWS)` in y.
        split_rows_tf32
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_declared_in_its_module() {
        assert!(crate::modules::WGMMA.utility_entries.contains(&ENTRY));
        assert!(crate::modules::WGMMA.utility_entries.contains(&ENTRY_16));
        assert!(
            crate::modules::WGMMA
                .utility_entries
                .contains(&PAIR_ENTRY_16)
        );
        assert!(
            crate::modules::WGMMA
                .utility_entries
                .contains(&TRANSPOSE_ENTRY)
        );
        for entry in [SPLIT_ENTRY, TRANSPOSE_SPLIT_ENTRY] {
            assert!(crate::modules::WGMMA.utility_entries.contains(&entry));
        }
    }
}
