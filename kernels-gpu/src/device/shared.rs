//! Tiles in the block's shared memory.
//!
//! rustc has no `__shared__` statics; the block's shared memory is the
//! launch-sized (dynamic) region whose size the host passes at launch
//! (`shared_mem_bytes`). A [`SharedTile`] is a typed window into it: a
//! `ROWS x COLS` array of `f32` at a fixed word offset. Kernels lay their
//! tiles out with `const`s, so the total size is a constant the host reads
//! from the kernel (`KernelSpec::launch.shared_bytes`).
//!
//! Safety model: every access is `unsafe` and its caller guarantees
//! (1) `row < ROWS` and `col < COLS`, so the word lies inside the tile and
//! the tile inside the launch's shared memory, and (2) no other thread of
//! the block writes that word between the same two barriers in which this
//! thread reads or writes it (otherwise the result is a data race).

/// A `ROWS x COLS` tile of `f32` in the block's shared memory, row-major,
/// starting `offset` words (4 bytes each) into it. Padding is part of the
/// type: the lesson's padded tile is `SharedTile<16, 17>`.
#[derive(Clone, Copy, Debug)]
pub struct SharedTile<const ROWS: usize, const COLS: usize> {
    offset: usize,
}

impl<const ROWS: usize, const COLS: usize> SharedTile<ROWS, COLS> {
    /// Words (f32) the tile occupies.
    pub const WORDS: usize = ROWS * COLS;
    /// Bytes the tile occupies.
    pub const BYTES: usize = Self::WORDS * 4;

    /// The tile that starts `offset` words into shared memory.
    pub const fn at(offset: usize) -> Self {
        Self { offset }
    }

    /// The first word after this tile: where the next tile can start.
    pub const fn end(self) -> usize {
        self.offset + Self::WORDS
    }

    /// The word `tile[row][col]` is, counted from the start of shared memory.
    #[inline(always)]
    pub(crate) fn word(self, row: usize, col: usize) -> usize {
        self.offset + row * COLS + col
    }

    /// Reads `tile[row][col]`.
    ///
    /// # Safety
    /// `row < ROWS`, `col < COLS`, the launch provides at least
    /// [`Self::end`] words of shared memory, and no other thread writes
    /// this word between the barriers that enclose the read.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, row: usize, col: usize) -> f32 {
        // SAFETY: in bounds and race-free by this function's contract.
        unsafe { backend::load(self.word(row, col)) }
    }

    /// Reads `tile[row][col..col + 2]` as one 64-bit access (`ld.shared.v2.f32`).
    ///
    /// # Safety
    /// As for [`Self::load`] for both words, and the first word's index in
    /// shared memory is even, so the access is 8-byte aligned.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load2(self, row: usize, col: usize) -> [f32; 2] {
        // SAFETY: in bounds, aligned and race-free by this function's contract.
        unsafe { backend::load2(self.word(row, col)) }
    }

    /// Writes `tile[row][col] = value`.
    ///
    /// # Safety
    /// As for [`Self::load`], and no other thread reads or writes this
    /// word between the barriers that enclose the write.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(self, row: usize, col: usize, value: f32) {
        // SAFETY: in bounds and race-free by this function's contract.
        unsafe { backend::store(self.word(row, col), value) }
    }

    /// Writes `tile[row][col..col + 2] = values` as one 64-bit access.
    ///
    /// # Safety
    /// As for [`Self::store`] for both words, and 8-byte alignment as for
    /// [`Self::load2`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store2(self, row: usize, col: usize, values: [f32; 2]) {
        // SAFETY: in bounds, aligned and race-free by this function's contract.
        unsafe { backend::store2(self.word(row, col), values) }
    }

    /// Reads `tile[row][col..col + 4]` as one 128-bit access (`ld.shared.v4.f32`).
    ///
    /// # Safety
    /// As for [`Self::load`] for all four words, and the first word's
    /// index in shared memory (`offset + row * COLS + col`) is a multiple
    /// of 4, so the access is 16-byte aligned.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load4(self, row: usize, col: usize) -> [f32; 4] {
        // SAFETY: in bounds, aligned and race-free by this function's contract.
        unsafe { backend::load4(self.word(row, col)) }
    }

    /// Writes `tile[row][col..col + 4] = values` as one 128-bit access.
    ///
    /// # Safety
    /// As for [`Self::store`] for all four words, and 16-byte alignment
    /// as for [`Self::load4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store4(self, row: usize, col: usize, values: [f32; 4]) {
        // SAFETY: in bounds, aligned and race-free by this function's contract.
        unsafe { backend::store4(self.word(row, col), values) }
    }
}

/// Four floats with 16-byte alignment: read and written as one vector.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(crate) struct Vec4(pub [f32; 4]);

/// Two floats with 8-byte alignment: read and written as one vector.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct Vec2(pub [f32; 2]);

/// The shared-memory address (the `.shared` window, as `cp.async` takes
/// it) of `word`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn address(word: usize) -> u32 {
    backend::address(word)
}

#[cfg(target_arch = "nvptx64")]
mod backend {
    use super::{Vec2, Vec4};
    use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

    #[inline(always)]
    fn base() -> *mut f32 {
        gpu_launch_sized_workgroup_mem::<f32>()
    }

    /// `cvta.to.shared` of the region's start, plus `4 * word` bytes.
    #[inline(always)]
    pub fn address(word: usize) -> u32 {
        let window: u64;
        // SAFETY: converts an address between state spaces; reads nothing.
        // `pure` lets LLVM compute the base once per kernel.
        unsafe {
            core::arch::asm!(
                "cvta.to.shared.u64 {window}, {generic};",
                window = out(reg64) window,
                generic = in(reg64) base(),
                options(pure, nomem, nostack),
            );
        }
        window as u32 + 4 * word as u32
    }

    /// # Safety
    /// `word` lies inside the launch's shared memory; no racing writer.
    #[inline(always)]
    pub unsafe fn load(word: usize) -> f32 {
        // SAFETY: the caller keeps `word` inside the launch-sized region.
        unsafe { base().add(word).read() }
    }

    /// # Safety
    /// `word` lies inside the launch's shared memory; no racing access.
    #[inline(always)]
    pub unsafe fn store(word: usize, value: f32) {
        // SAFETY: the caller keeps `word` inside the launch-sized region.
        unsafe { base().add(word).write(value) }
    }

    /// # Safety
    /// `word..word + 2` lies inside shared memory; `word % 2 == 0`.
    #[inline(always)]
    pub unsafe fn load2(word: usize) -> [f32; 2] {
        // SAFETY: in bounds and 8-byte aligned by the caller's contract.
        unsafe { (base().add(word) as *const Vec2).read().0 }
    }

    /// # Safety
    /// `word..word + 2` lies inside shared memory; `word % 2 == 0`.
    #[inline(always)]
    pub unsafe fn store2(word: usize, values: [f32; 2]) {
        // SAFETY: in bounds and 8-byte aligned by the caller's contract.
        unsafe { (base().add(word) as *mut Vec2).write(Vec2(values)) }
    }

    /// # Safety
    /// `word..word + 4` lies inside shared memory; `word % 4 == 0`.
    #[inline(always)]
    pub unsafe fn load4(word: usize) -> [f32; 4] {
        // SAFETY: in bounds and 16-byte aligned by the caller's contract.
        unsafe { (base().add(word) as *const Vec4).read().0 }
    }

    /// # Safety
    /// `word..word + 4` lies inside shared memory; `word % 4 == 0`.
    #[inline(always)]
    pub unsafe fn store4(word: usize, values: [f32; 4]) {
        // SAFETY: in bounds and 16-byte aligned by the caller's contract.
        unsafe { (base().add(word) as *mut Vec4).write(Vec4(values)) }
    }
}

// On the host, the CPU emulator's shared memory: accesses are checked and
// logged for the race and bank-conflict checks.
#[cfg(not(target_arch = "nvptx64"))]
use crate::emu::backend::shared as backend;
