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
//!
//! On the GPU a buffer is just its pointer. On the host (the CPU
//! emulator, [`crate::emu`]) it is the buffer's identity and length, and
//! every access is checked against them and reported, never undefined.

/// A read-only `f32` buffer in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalIn {
    ptr: backend::In,
}

/// A written `f32` buffer in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalOut {
    ptr: backend::Out,
}

impl GlobalIn {
    /// Wraps a kernel argument (on the GPU; the emulator makes its own).
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const f32) -> Self {
        Self {
            ptr: backend::from_raw(ptr),
        }
    }

    /// The emulator's buffer `buffer`.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(buffer: backend::Buffer) -> Self {
        Self { ptr: buffer }
    }

    /// Whether the buffer starts on a multiple of `bytes` (a power of two).
    #[inline(always)]
    pub fn aligned(self, bytes: usize) -> bool {
        backend::aligned(self.ptr, bytes)
    }

    /// Reads element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, index: usize) -> f32 {
        // SAFETY: in bounds by this function's contract.
        unsafe { backend::read(self.ptr, index) }
    }

    /// The device address of element `index` (for `cp.async`, which takes
    /// addresses); not dereferenced here.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub(crate) fn address(self, index: usize) -> *const f32 {
        self.ptr.wrapping_add(index)
    }

    /// The emulator's buffer behind this view.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn buffer(self) -> backend::Buffer {
        self.ptr
    }

    /// Reads elements `index..index + 4` as one 128-bit load (`ld.global.v4.f32`).
    ///
    /// # Safety
    /// `index + 4` is at most the buffer's length and `index % 4 == 0`
    /// (device allocations are 256-byte aligned, so the load is 16-byte aligned).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read4(self, index: usize) -> [f32; 4] {
        // SAFETY: in bounds and aligned by this function's contract.
        unsafe { backend::read4(self.ptr, index) }
    }
}

impl GlobalOut {
    /// Wraps a kernel argument (on the GPU; the emulator makes its own).
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut f32) -> Self {
        Self {
            ptr: backend::from_raw(ptr),
        }
    }

    /// The emulator's buffer `buffer`.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(buffer: backend::Buffer) -> Self {
        Self { ptr: buffer }
    }

    /// Whether the buffer starts on a multiple of `bytes` (a power of two).
    #[inline(always)]
    pub fn aligned(self, bytes: usize) -> bool {
        backend::aligned(backend::as_in(self.ptr), bytes)
    }

    /// Reads element `index` (for `beta * C`).
    ///
    /// # Safety
    /// `index` is below the buffer's length and no other thread of the
    /// launch writes the element.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, index: usize) -> f32 {
        // SAFETY: in bounds by this function's contract.
        unsafe { backend::read(backend::as_in(self.ptr), index) }
    }

    /// Reads elements `index..index + 2` as one 64-bit load.
    ///
    /// # Safety
    /// As for [`Self::read`] for both elements, and `index % 2 == 0` (the
    /// address is 8-byte aligned).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read2(self, index: usize) -> [f32; 2] {
        // SAFETY: in bounds and aligned by this function's contract.
        unsafe { backend::read2(backend::as_in(self.ptr), index) }
    }

    /// Reads elements `index..index + 4` as one 128-bit load.
    ///
    /// # Safety
    /// As for [`Self::read`] for all four elements; the address is
    /// 16-byte aligned.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read4(self, index: usize) -> [f32; 4] {
        // SAFETY: in bounds and aligned by this function's contract.
        unsafe { backend::read4(backend::as_in(self.ptr), index) }
    }

    /// Writes `value` to element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length and no other thread of the
    /// launch writes the same element.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write(self, index: usize, value: f32) {
        // SAFETY: in bounds and single-writer by this function's contract.
        unsafe { backend::write(self.ptr, index, value) }
    }

    /// Writes elements `index..index + 2` as one 64-bit store.
    ///
    /// # Safety
    /// As for [`Self::write`] for both elements, and `index % 2 == 0`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write2(self, index: usize, values: [f32; 2]) {
        // SAFETY: in bounds, aligned and single-writer by this function's contract.
        unsafe { backend::write2(self.ptr, index, values) }
    }

    /// Writes elements `index..index + 4` as one 128-bit store.
    ///
    /// # Safety
    /// As for [`Self::write`] for all four elements, and `index % 4 == 0`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write4(self, index: usize, values: [f32; 4]) {
        // SAFETY: in bounds, aligned and single-writer by this function's contract.
        unsafe { backend::write4(self.ptr, index, values) }
    }
}

/// On the GPU: plain pointer accesses (`ld.global`, `st.global`).
#[cfg(target_arch = "nvptx64")]
mod backend {
    use crate::device::shared::{Vec2, Vec4};

    pub type In = *const f32;
    pub type Out = *mut f32;

    #[inline(always)]
    pub fn from_raw<P>(ptr: P) -> P {
        ptr
    }

    /// The written buffer as a read one (C, for `beta * C`).
    #[inline(always)]
    pub fn as_in(ptr: Out) -> In {
        ptr.cast_const()
    }

    #[inline(always)]
    pub fn aligned(ptr: In, bytes: usize) -> bool {
        (ptr as usize).is_multiple_of(bytes)
    }

    /// # Safety
    /// `index` is inside the buffer `ptr` addresses.
    #[inline(always)]
    pub unsafe fn read(ptr: In, index: usize) -> f32 {
        // SAFETY: in bounds by the caller's contract.
        unsafe { ptr.add(index).read() }
    }

    /// # Safety
    /// `index..index + 4` is inside the buffer; `index % 4 == 0`.
    #[inline(always)]
    pub unsafe fn read4(ptr: In, index: usize) -> [f32; 4] {
        // SAFETY: in bounds and 16-byte aligned by the caller's contract.
        unsafe { (ptr.add(index) as *const Vec4).read().0 }
    }

    /// # Safety
    /// `index..index + 2` is inside the buffer; `index % 2 == 0`.
    #[inline(always)]
    pub unsafe fn read2(ptr: In, index: usize) -> [f32; 2] {
        // SAFETY: in bounds and 8-byte aligned by the caller's contract.
        unsafe { (ptr.add(index) as *const Vec2).read().0 }
    }

    /// # Safety
    /// `index` is inside the buffer; no other thread writes it.
    #[inline(always)]
    pub unsafe fn write(ptr: Out, index: usize, value: f32) {
        // SAFETY: in bounds and single-writer by the caller's contract.
        unsafe { ptr.add(index).write(value) }
    }

    /// # Safety
    /// `index..index + 2` is inside the buffer, `index % 2 == 0`; no
    /// other thread writes those elements.
    #[inline(always)]
    pub unsafe fn write2(ptr: Out, index: usize, values: [f32; 2]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Vec2).write(Vec2(values)) }
    }

    /// # Safety
    /// `index..index + 4` is inside the buffer, `index % 4 == 0`; no
    /// other thread writes those elements.
    #[inline(always)]
    pub unsafe fn write4(ptr: Out, index: usize, values: [f32; 4]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Vec4).write(Vec4(values)) }
    }
}

/// On the host: the CPU emulator's checked buffers.
#[cfg(not(target_arch = "nvptx64"))]
mod backend {
    pub use crate::emu::backend::global::*;

    pub type In = Buffer;
    pub type Out = Buffer;

    /// The written buffer as a read one (C, for `beta * C`).
    pub fn as_in(buffer: Out) -> In {
        buffer
    }
}
