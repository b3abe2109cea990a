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
