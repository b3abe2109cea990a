//! Not a ladder step: the copy that lets the TMA kernels (steps 12-13)
//! take any problem. TMA describes a matrix by its start, which must be
//! 16-byte aligned, and its row stride, which must be a multiple of 16
//! bytes; when A or B breaks either rule (`lda` or `ldb` not a multiple
//! of 4, for example K or N odd in a dense product) the host copies A
//! (m x k) and B (k x n) into buffers whose rows are padded to multiples
//! of 4 floats with zeros (`host/src/tma.rs`, `Padded`), and the tensor
//! maps describe the copies. The zeros add nothing to C.
//!
//! One thread per element of the padded matrix: consecutive threads take
//! consecutive columns, so the reads of the source rows (which start at
//! any 4-byte boundary) and the writes are coalesced. A memory-bound copy;
//! the driver's own `cuMemcpy2DAsync`, tried first, made the whole launch
//! at n = 4097 about 5 % slower (docs/measurements.md).

use crate::device::{GlobalIn, GlobalOut, block_idx_x, block_idx_y, thread_idx_x};

/// Threads per block (x); a block copies part of one row.
pub const THREADS: usize = 256;
/// Rows of blocks at most (CUDA's grid limit in y): the host launches
/// `min(rows, MAX_GRID_ROWS)` of them, and a block walks rows
/// `block_idx_y() + i * MAX_GRID_ROWS`.
pub const MAX_GRID_ROWS: usize = 65_535;
/// The PTX entry's name (in the module of the TMA kernels).
pub const ENTRY: &str = "pad_rows";

/// `dst[r][c] = src[r][c]` for `c < cols`, `0` for `cols <= c < ld`, for
/// every row `r < rows`; `src`'s rows are `src_ld` floats apart, `dst`'s
/// `ld`.
pub fn pad_rows(src: GlobalIn, dst: GlobalOut, rows: usize, cols: usize, src_ld: usize, ld: usize) {
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
            0.0
        };
        // SAFETY: r < rows and c < ld: inside dst (rows x ld); one thread
        // per (r, c).
        unsafe { dst.write(r * ld + c, value) };
        r += MAX_GRID_ROWS;
    }
}

#[cfg(target_arch = "nvptx64")]
mod entry {
    /// PTX entry `pad_rows(src, dst, rows, cols, src_ld, ld)`.
    ///
    /// # Safety
    /// `src` addresses a `rows x cols` matrix with rows `src_ld` floats
    /// apart and `dst` `rows * ld` floats (`ld >= cols`), not overlapping; launched with `THREADS` threads in
    /// x, `ceil(ld / THREADS)` blocks in x and `min(rows, MAX_GRID_ROWS)`
    /// in y.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn pad_rows(
        src: *const f32,
        dst: *mut f32,
        rows: u32,
        cols: u32,
        src_ld: u32,
        ld: u32,
    ) {
        // SAFETY: the host upholds the contract above.
        unsafe {
            super::pad_rows(
                crate::device::GlobalIn::from_raw(src),
                crate::device::GlobalOut::from_raw(dst),
                rows as usize,
                cols as usize,
                src_ld as usize,
                ld as usize,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_declared_in_its_module() {
        assert!(crate::modules::WGMMA.utility_entries.contains(&ENTRY));
    }
}
