//! Views of the kernel's global-memory buffers.
//!
//! A kernel receives raw device pointers; these wrappers say which are
//! read and which are written, and funnel every access through one
//! function so the access can be checked where checking is possible.
//!
//! A view is typed by the element type stored ([`Element`]: `f32`, or
//! the 16-bit [`Bf16`](crate::elem::Bf16) and [`F16`](crate::elem::F16));
//! indices count elements of that type. Scalar accesses and 16-byte
//! stores (`write16`) exist for every type, 32-bit pairs (`read_pair`,
//! `write_pair`) for the 16-bit types; the 64- and 128-bit vector accesses
//! the FP32 kernels use are those of `f32` views.
//!
//! Safety model: the host guarantees that each pointer addresses a live
//! device buffer of the length the kernel's argument struct states
//! (e.g. `m * k` elements for A). Every access is `unsafe`; its caller
//! guarantees the index is below that length. Two threads never write the
//! same element (each element of C has exactly one owner thread).
//!
//! On the GPU a buffer is just its pointer. On the host (the CPU
//! emulator, [`crate::emu`]) it is the buffer's identity and length, and
//! every access is checked against them and reported, never undefined.

use core::marker::PhantomData;

use crate::elem::Element;

/// A read-only buffer of `T` in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalIn<T: Element = f32> {
    #[cfg(target_arch = "nvptx64")]
    ptr: *const T,
    #[cfg(not(target_arch = "nvptx64"))]
    ptr: backend::Buffer,
    elem: PhantomData<T>,
}

/// A written buffer of `T` in global memory.
#[derive(Clone, Copy, Debug)]
pub struct GlobalOut<T: Element = f32> {
    #[cfg(target_arch = "nvptx64")]
    ptr: *mut T,
    #[cfg(not(target_arch = "nvptx64"))]
    ptr: backend::Buffer,
    elem: PhantomData<T>,
}

impl<T: Element> GlobalIn<T> {
    /// Wraps a kernel argument (on the GPU; the emulator makes its own).
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const T) -> Self {
        Self {
            ptr: backend::from_raw(ptr),
            elem: PhantomData,
        }
    }

    /// The emulator's buffer `buffer`.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(buffer: backend::Buffer) -> Self {
        Self {
            ptr: buffer,
            elem: PhantomData,
        }
    }

    /// Whether the buffer starts on a multiple of `bytes` (a power of two).
    #[inline(always)]
    pub fn aligned(self, bytes: usize) -> bool {
        backend::aligned::<T>(self.ptr, bytes)
    }

    /// Reads element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, index: usize) -> T {
        // SAFETY: in bounds by this function's contract.
        unsafe { backend::read(self.ptr, index) }
    }

    /// The device address of element `index` (for `cp.async`, which takes
    /// addresses); not dereferenced here.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub(crate) fn address(self, index: usize) -> *const T {
        self.ptr.wrapping_add(index)
    }

    /// The emulator's buffer behind this view.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn buffer(self) -> backend::Buffer {
        self.ptr
    }

    /// This emulator buffer viewed as elements of `U` (tests of bodies
    /// generic over the type, which the emulator's f32 launches cannot
    /// type otherwise): its slots hold one element each, so a value reads
    /// as `U::from_f32` of what the slot holds.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn retyped<U: Element>(self) -> GlobalIn<U> {
        GlobalIn::emulated(self.ptr)
    }
}

impl GlobalIn<f32> {
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

impl<T: Element> GlobalOut<T> {
    /// Wraps a kernel argument (on the GPU; the emulator makes its own).
    ///
    /// # Safety
    /// `ptr` addresses a live device buffer for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T) -> Self {
        Self {
            ptr: backend::from_raw(ptr),
            elem: PhantomData,
        }
    }

    /// The emulator's buffer `buffer`.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(buffer: backend::Buffer) -> Self {
        Self {
            ptr: buffer,
            elem: PhantomData,
        }
    }

    /// Whether the buffer starts on a multiple of `bytes` (a power of two).
    #[inline(always)]
    pub fn aligned(self, bytes: usize) -> bool {
        backend::aligned::<T>(backend::as_in(self.ptr), bytes)
    }

    /// The same buffer as a read-only view (a buffer an entry's signature
    /// passes as written but a body only reads: the quantizer's scale).
    #[inline(always)]
    pub fn as_in(self) -> GlobalIn<T> {
        GlobalIn {
            ptr: backend::as_in(self.ptr),
            elem: PhantomData,
        }
    }

    /// The view of this buffer from element `elements` on: its indices
    /// count from there, and its length is what is left (the accesses'
    /// contracts are the new view's). On the emulator, a second output
    /// carved out of C's buffer (tests of bodies with two outputs).
    #[inline(always)]
    pub fn offset(self, elements: usize) -> Self {
        Self {
            ptr: backend::offset(self.ptr, elements),
            elem: PhantomData,
        }
    }

    /// The device address of element `index` (for the `asm!` accesses of
    /// [`crate::device::atomic`]); not dereferenced here.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub(crate) fn address(self, index: usize) -> *mut T {
        self.ptr.wrapping_add(index)
    }

    /// Reads element `index` (for `beta * C`).
    ///
    /// # Safety
    /// `index` is below the buffer's length and no other thread of the
    /// launch writes the element.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, index: usize) -> T {
        // SAFETY: in bounds by this function's contract.
        unsafe { backend::read(backend::as_in(self.ptr), index) }
    }

    /// Writes `value` to element `index`.
    ///
    /// # Safety
    /// `index` is below the buffer's length and no other thread of the
    /// launch writes the same element.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write(self, index: usize, value: T) {
        // SAFETY: in bounds and single-writer by this function's contract.
        unsafe { backend::write(self.ptr, index, value) }
    }

    /// Writes `value` over element `index`, which a thread of the same
    /// block stored before a barrier both passed (the fused epilogue's
    /// pass over a tile: `crate::epilogue`). On the GPU, [`Self::write`];
    /// the emulator accepts the second writer because it is of the same
    /// block, and reports it otherwise.
    ///
    /// # Safety
    /// As [`Self::write`], with "no other thread" meaning none after the
    /// barrier.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn rewrite(self, index: usize, value: T) {
        // SAFETY: in bounds and single-writer by this function's contract.
        #[cfg(target_arch = "nvptx64")]
        unsafe {
            backend::write(self.ptr, index, value)
        }
        // SAFETY: as above.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe {
            backend::rewrite(self.ptr, index, value)
        }
    }

    /// Reads elements `index..index + 2` of a 16-bit type as one 32-bit
    /// load (for `beta * C` in a 16-bit C).
    ///
    /// # Safety
    /// As for [`Self::read`] for both elements, and `index % 2 == 0`
    /// (the address is 4-byte aligned).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_pair(self, index: usize) -> [T; 2] {
        const { assert!(size_of::<T>() == 2) };
        // SAFETY: in bounds and aligned by this function's contract.
        unsafe { backend::read_pair(backend::as_in(self.ptr), index) }
    }

    /// Writes elements `index..index + 2` of a 16-bit type as one 32-bit
    /// store.
    ///
    /// # Safety
    /// As for [`Self::write`] for both elements, and `index % 2 == 0`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write_pair(self, index: usize, values: [T; 2]) {
        const { assert!(size_of::<T>() == 2) };
        // SAFETY: in bounds, aligned and single-writer by this function's contract.
        unsafe { backend::write_pair(self.ptr, index, values) }
    }

    /// Writes elements `index..index + W`, 16 bytes (`W` elements of
    /// `T`: 8 of a 16-bit type, 4 of f32), as one 128-bit store.
    ///
    /// # Safety
    /// As for [`Self::write`] for all `W` elements, and the first one's
    /// byte offset in the buffer is a multiple of 16 (device allocations
    /// are 256-byte aligned).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write16<const W: usize>(self, index: usize, values: [T; W]) {
        const { assert!(W * size_of::<T>() == 16) };
        // SAFETY: in bounds, aligned and single-writer by this function's contract.
        unsafe { backend::write16(self.ptr, index, values) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T: Element> GlobalOut<T> {
    /// As [`GlobalIn::retyped`]: this emulator buffer's slots written as
    /// elements of `U` (each slot then holds `U::to_f32` of a value).
    pub fn retyped<U: Element>(self) -> GlobalOut<U> {
        GlobalOut::emulated(self.ptr)
    }
}

impl GlobalOut<f32> {
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

    type In<T> = *const T;
    type Out<T> = *mut T;

    #[inline(always)]
    pub fn from_raw<P>(ptr: P) -> P {
        ptr
    }

    /// The written buffer as a read one (C, for `beta * C`).
    #[inline(always)]
    pub fn as_in<T>(ptr: Out<T>) -> In<T> {
        ptr.cast_const()
    }

    #[inline(always)]
    pub fn offset<T>(ptr: Out<T>, elements: usize) -> Out<T> {
        ptr.wrapping_add(elements)
    }

    #[inline(always)]
    pub fn aligned<T>(ptr: In<T>, bytes: usize) -> bool {
        (ptr as usize).is_multiple_of(bytes)
    }

    /// # Safety
    /// `index` is inside the buffer `ptr` addresses.
    #[inline(always)]
    pub unsafe fn read<T>(ptr: In<T>, index: usize) -> T {
        // SAFETY: in bounds by the caller's contract.
        unsafe { ptr.add(index).read() }
    }

    /// # Safety
    /// `index..index + 4` is inside the buffer; `index % 4 == 0`.
    #[inline(always)]
    pub unsafe fn read4(ptr: In<f32>, index: usize) -> [f32; 4] {
        // SAFETY: in bounds and 16-byte aligned by the caller's contract.
        unsafe { (ptr.add(index) as *const Vec4).read().0 }
    }

    /// # Safety
    /// `index..index + 2` is inside the buffer; `index % 2 == 0`.
    #[inline(always)]
    pub unsafe fn read2(ptr: In<f32>, index: usize) -> [f32; 2] {
        // SAFETY: in bounds and 8-byte aligned by the caller's contract.
        unsafe { (ptr.add(index) as *const Vec2).read().0 }
    }

    /// # Safety
    /// `index` is inside the buffer; no other thread writes it.
    #[inline(always)]
    pub unsafe fn write<T>(ptr: Out<T>, index: usize, value: T) {
        // SAFETY: in bounds and single-writer by the caller's contract.
        unsafe { ptr.add(index).write(value) }
    }

    /// # Safety
    /// `index..index + 2` is inside the buffer, `index % 2 == 0`; no
    /// other thread writes those elements.
    #[inline(always)]
    pub unsafe fn write2(ptr: Out<f32>, index: usize, values: [f32; 2]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Vec2).write(Vec2(values)) }
    }

    /// # Safety
    /// `index..index + 4` is inside the buffer, `index % 4 == 0`; no
    /// other thread writes those elements.
    #[inline(always)]
    pub unsafe fn write4(ptr: Out<f32>, index: usize, values: [f32; 4]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Vec4).write(Vec4(values)) }
    }

    /// 16 bytes with 16-byte alignment: stored as one vector.
    #[repr(C, align(16))]
    struct Bytes16<V>(V);

    /// Two 16-bit elements with 4-byte alignment: one 32-bit access.
    #[repr(C, align(4))]
    #[derive(Clone, Copy)]
    struct Bytes4<V>(V);

    /// # Safety
    /// `index..index + 2` is inside the buffer and 4-byte aligned.
    #[inline(always)]
    pub unsafe fn read_pair<T: Copy>(ptr: In<T>, index: usize) -> [T; 2] {
        // SAFETY: in bounds and aligned by the caller's contract.
        unsafe { (ptr.add(index) as *const Bytes4<[T; 2]>).read().0 }
    }

    /// # Safety
    /// `index..index + 2` is inside the buffer and 4-byte aligned; no
    /// other thread writes them.
    #[inline(always)]
    pub unsafe fn write_pair<T>(ptr: Out<T>, index: usize, values: [T; 2]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Bytes4<[T; 2]>).write(Bytes4(values)) }
    }

    /// # Safety
    /// `index..index + W` is inside the buffer and 16-byte aligned (`W`
    /// elements of `T` are 16 bytes); no other thread writes them.
    #[inline(always)]
    pub unsafe fn write16<T, const W: usize>(ptr: Out<T>, index: usize, values: [T; W]) {
        // SAFETY: in bounds, aligned and single-writer by the caller's contract.
        unsafe { (ptr.add(index) as *mut Bytes16<[T; W]>).write(Bytes16(values)) }
    }
}

/// On the host: the CPU emulator's checked buffers.
#[cfg(not(target_arch = "nvptx64"))]
mod backend {
    pub use crate::emu::backend::global::{Buffer, read2, read4, write2, write4};

    use crate::elem::Element;
    use crate::emu::backend::global as emu;

    /// The written buffer as a read one (C, for `beta * C`).
    pub fn as_in(buffer: Buffer) -> Buffer {
        buffer
    }

    /// The buffer from element `elements` on (bounds still checked
    /// against the whole buffer).
    pub fn offset(buffer: Buffer, elements: usize) -> Buffer {
        emu::offset(buffer, elements)
    }

    /// The emulator's buffers hold one slot per element, whatever its
    /// type: an element's byte address is its index times `T`'s size.
    pub fn aligned<T>(buffer: Buffer, bytes: usize) -> bool {
        emu::aligned(buffer, bytes, size_of::<T>())
    }

    /// # Safety
    /// None on the host (the access is checked).
    #[track_caller]
    pub unsafe fn read<T: Element>(buffer: Buffer, index: usize) -> T {
        // SAFETY: checked by the emulator. The slot holds an f32 that is
        // a value of T (written through `write::<T>` or uploaded as T).
        T::from_f32(unsafe { emu::read(buffer, index) })
    }

    /// # Safety
    /// None on the host (the access is checked).
    #[track_caller]
    pub unsafe fn write<T: Element>(buffer: Buffer, index: usize, value: T) {
        // SAFETY: checked by the emulator.
        unsafe { emu::write(buffer, index, value.to_f32()) }
    }

    /// # Safety
    /// None on the host (the access is checked, and so is the writer
    /// before: a thread of the same block).
    #[track_caller]
    pub unsafe fn rewrite<T: Element>(buffer: Buffer, index: usize, value: T) {
        emu::rewrite(buffer, index, value.to_f32())
    }

    /// # Safety
    /// None on the host (the access is checked, as one of 2 elements).
    #[track_caller]
    pub unsafe fn read_pair<T: Element>(buffer: Buffer, index: usize) -> [T; 2] {
        // SAFETY: checked by the emulator.
        unsafe { emu::read_v::<2>(buffer, index) }.map(T::from_f32)
    }

    /// # Safety
    /// None on the host (the access is checked, as one of 2 elements).
    #[track_caller]
    pub unsafe fn write_pair<T: Element>(buffer: Buffer, index: usize, values: [T; 2]) {
        // SAFETY: checked by the emulator.
        unsafe { emu::write_v(buffer, index, values.map(T::to_f32)) }
    }

    /// # Safety
    /// None on the host (the access is checked, as one of `W` elements).
    #[track_caller]
    pub unsafe fn write16<T: Element, const W: usize>(
        buffer: Buffer,
        index: usize,
        values: [T; W],
    ) {
        // SAFETY: checked by the emulator.
        unsafe { emu::write_v(buffer, index, values.map(T::to_f32)) }
    }
}
