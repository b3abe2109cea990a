//! Views of the kernel's global-memory buffers.
//!
//! A kernel receives raw device pointers; these wrappers say which are
//! read and which are written, and funnel every access through one
//! function so the access can be checked where checking is possible.
//!
//! Safety model: the host guarantees that each pointer addresses a live
//! device buffer of the length the kernel's argument struct states
//! (e.g. `m * k` floats for A). Every access is `unsafe`; its caller
//! guarantees the index is below that length. Two threads never write the
//! same element (each element of C has exactly one owner thread).

/// A read-only `f32` buffer in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalIn {
    ptr: *const f32,
}

/// A written `f32` buffer in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalOut {
    ptr: *mut f32,
}

impl GlobalIn {
    /// Wraps a kernel argument.
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const f32) -> Self {
        Self { ptr }
    }

    /// Reads element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length.
    #[inline(always)]
    pub unsafe fn read(self, index: usize) -> f32 {
        // SAFETY: in bounds by this function's contract.
        unsafe { self.ptr.add(index).read() }
    }

    /// Reads elements `index..index + 4` as one 128-bit load (`ld.global.v4.f32`).
    ///
    /// # Safety
    /// `index + 4` is at most the buffer's length and `index % 4 == 0`
    /// (device allocations are 256-byte aligned, so the load is 16-byte aligned).
    #[inline(always)]
    pub unsafe fn read4(self, index: usize) -> [f32; 4] {
        // SAFETY: in bounds and aligned by this function's contract.
        unsafe {
            (self.ptr.add(index) as *const crate::device::shared::Vec4)
                .read()
                .0
        }
    }
}

impl GlobalOut {
    /// Wraps a kernel argument.
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut f32) -> Self {
        Self { ptr }
    }

    /// Writes `value` to element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length and no other thread of the
    /// launch writes the same element.
    #[inline(always)]
    pub unsafe fn write(self, index: usize, value: f32) {
        // SAFETY: in bounds and single-writer by this function's contract.
        unsafe { self.ptr.add(index).write(value) }
    }

    /// Writes elements `index..index + 4` as one 128-bit store.
    ///
    /// # Safety
    /// As for [`Self::write`] for all four elements, and `index % 4 == 0`.
    #[inline(always)]
    pub unsafe fn write4(self, index: usize, values: [f32; 4]) {
        // SAFETY: in bounds, aligned and single-writer by this function's contract.
        unsafe {
            (self.ptr.add(index) as *mut crate::device::shared::Vec4)
                .write(crate::device::shared::Vec4(values))
        }
    }
}
