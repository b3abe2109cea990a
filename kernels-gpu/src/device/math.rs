//! Arithmetic that must map to one PTX instruction.
//!
//! Safety model: pure functions, nothing to uphold.

/// `a * b + c` rounded once (`fma.rn.f32`). rustc never contracts a
/// separate multiply and add into an FMA (nvcc does by default), so
/// kernels that want the FMA pipe's throughput call this.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::intrinsics::fmaf32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}
