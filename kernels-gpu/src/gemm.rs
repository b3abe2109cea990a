//! The arguments every GEMM kernel takes, and the macro that turns a kernel
//! body into a PTX entry point.

use crate::device::{GlobalIn, GlobalOut};

/// `C = A * B` with row-major `A` (m x k), `B` (k x n), `C` (m x n).
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    pub a: GlobalIn,
    pub b: GlobalIn,
    pub c: GlobalOut,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

#[cfg(target_arch = "nvptx64")]
impl Gemm {
    /// Builds the arguments from a kernel's raw parameters (PTX entries only;
    /// on the host the emulator builds `Gemm` from checked buffers).
    ///
    /// # Safety
    /// `a`, `b` and `c` address live device buffers of at least `m * k`,
    /// `k * n` and `m * n` floats for the whole launch, and `c` overlaps
    /// neither input.
    #[inline(always)]
    pub unsafe fn from_raw(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        m: u32,
        n: u32,
        k: u32,
    ) -> Self {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            Self {
                a: GlobalIn::from_raw(a),
                b: GlobalIn::from_raw(b),
                c: GlobalOut::from_raw(c),
                m: m as usize,
                n: n as usize,
                k: k as usize,
            }
        }
    }
}

/// The most elements one matrix may hold: the kernels compute element
/// offsets in 32 bits (see [`Gemm::a_index`]); the host refuses larger
/// shapes.
pub const MAX_ELEMS: usize = u32::MAX as usize;

impl Gemm {
    /// `(m, n, k)` as `u32`, the type of the offset helpers' coordinates
    /// (the kernel parameters are `u32`, so nothing is lost).
    #[inline(always)]
    pub fn dims32(self) -> (u32, u32, u32) {
        (self.m as u32, self.n as u32, self.k as u32)
    }

    /// The index of `A[row][col]` in A's buffer, `row * k + col`.
    ///
    /// Computed in 32 bits with a promise of no wrap-around
    /// (`unchecked_mul`, `unchecked_add`), which is what lets LLVM turn a
    /// loop's offsets into pointer steps with 32-bit strides (one `IMAD.WIDE`
    /// per step in SASS) and keep loads in flight; `usize` arithmetic gives
    /// 64-bit strides (two instructions per step), wrapping `u32`
    /// arithmetic gives neither. docs/rust-vs-cuda.md has the measurements.
    ///
    /// # Safety
    /// `row < m` and `col < k`, and A has at most [`MAX_ELEMS`] elements
    /// (the host guarantees it), so the offset fits in a `u32`.
    #[inline(always)]
    pub unsafe fn a_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * k + col < m * k <= MAX_ELEMS by the contract.
        unsafe { offset32(row, self.k as u32, col) }
    }

    /// The index of `B[row][col]`, `row * n + col`; as [`Self::a_index`].
    ///
    /// # Safety
    /// `row < k` and `col < n`; B has at most [`MAX_ELEMS`] elements.
    #[inline(always)]
    pub unsafe fn b_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * n + col < k * n <= MAX_ELEMS by the contract.
        unsafe { offset32(row, self.n as u32, col) }
    }

    /// The index of `C[row][col]`, `row * n + col`; as [`Self::a_index`].
    ///
    /// # Safety
    /// `row < m` and `col < n`; C has at most [`MAX_ELEMS`] elements.
    #[inline(always)]
    pub unsafe fn c_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * n + col < m * n <= MAX_ELEMS by the contract.
        unsafe { offset32(row, self.n as u32, col) }
    }
}

/// `row * width + col` in `u32` arithmetic that must not wrap.
///
/// # Safety
/// The exact result is at most `u32::MAX`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn offset32(row: u32, width: u32, col: u32) -> usize {
    // SAFETY: forwarded: the product and the sum fit in 32 bits (and so
    // do the factors, which are at most the result or zero).
    unsafe { row.unchecked_mul(width).unchecked_add(col) as usize }
}

impl Gemm {
    /// `A[row][col..col + 4]`, where `idx == row * k + col`. Guarded
    /// (`GUARD = true`): four scalar loads, elements outside A read as
    /// zero, any indices allowed. Unguarded: one 128-bit load.
    ///
    /// # Safety
    /// Unguarded only: `row < m`, `col + 4 <= k` and `idx % 4 == 0`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_a4<const GUARD: bool>(self, row: usize, col: usize, idx: usize) -> [f32; 4] {
        if !GUARD {
            // SAFETY: in bounds and 16-byte aligned by this function's contract.
            return unsafe { self.a.read4(idx) };
        }
        let mut v = [0.0f32; 4];
        crate::unroll::unroll!(4; 4, |j| {
            if row < self.m && col + j < self.k {
                // SAFETY: row < m and col + j < k: inside A.
                v[j] = unsafe { self.a.read(idx + j) };
            }
        });
        v
    }

    /// `B[row][col..col + 4]`, where `idx == row * n + col`; as
    /// [`Self::read_a4`] with `k` and `n` for the bounds.
    ///
    /// # Safety
    /// Unguarded only: `row < k`, `col + 4 <= n` and `idx % 4 == 0`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_b4<const GUARD: bool>(self, row: usize, col: usize, idx: usize) -> [f32; 4] {
        if !GUARD {
            // SAFETY: in bounds and 16-byte aligned by this function's contract.
            return unsafe { self.b.read4(idx) };
        }
        let mut v = [0.0f32; 4];
        crate::unroll::unroll!(4; 4, |j| {
            if row < self.k && col + j < self.n {
                // SAFETY: row < k and col + j < n: inside B.
                v[j] = unsafe { self.b.read(idx + j) };
            }
        });
        v
    }
}

/// Exports a kernel body `fn name(Gemm)` as the PTX entry `name` with the
/// parameters `(const float* A, const float* B, float* C, u32 M, u32 N, u32 K)`;
/// `gemm_kernel!(name, tensor_maps)` a body `fn name(Gemm, TensorMaps)`
/// with one more parameter, `const u8* maps`.
#[macro_export]
macro_rules! gemm_kernel {
    ($name:ident) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`
            /// and buffers as [`Gemm::from_raw`](crate::gemm::Gemm::from_raw) requires.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const f32,
                b: *const f32,
                c: *mut f32,
                m: u32,
                n: u32,
                k: u32,
            ) {
                // SAFETY: the host upholds the launch contract above.
                super::$name(unsafe { $crate::gemm::Gemm::from_raw(a, b, c, m, n, k) })
            }
        }
    };
    // A TMA kernel (`Operands::TensorMaps`): one more parameter, the
    // address of A's and B's tensor maps in device memory.
    ($name:ident, tensor_maps) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`,
            /// buffers as [`Gemm::from_raw`](crate::gemm::Gemm::from_raw)
            /// requires and `maps` as
            /// [`TensorMaps::from_raw`](crate::device::tma::TensorMaps::from_raw) requires.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const f32,
                b: *const f32,
                c: *mut f32,
                m: u32,
                n: u32,
                k: u32,
                maps: *const u8,
            ) {
                // SAFETY: the host upholds the launch contract above.
                unsafe {
                    super::$name(
                        $crate::gemm::Gemm::from_raw(a, b, c, m, n, k),
                        $crate::device::tma::TensorMaps::from_raw(maps),
                    )
                }
            }
        }
    };
}
