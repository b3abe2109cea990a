//! Arithmetic that must map to one PTX instruction.
//!
//! Safety model: pure functions, nothing to uphold. The conversions to
//! and from 16 bits are `cvt` on the GPU (sm_80 and newer: the modules
//! that use them) and the same arithmetic in integer code on the host, which a test
//! checks against the `half` crate bit for bit (NaN aside: the hardware
//! returns the canonical NaN). The narrowings to FP8 are
//! `cvt.rn.satfinite` (sm_89 and newer) on the GPU and
//! `elem::Fp8Format::from_f32` on the host, checked against the OCP
//! table and a search of every value (`elem`'s tests). `exp2` and
//! `recip` are the GPU's approximate instructions (2 and 1 ulp) and exact
//! on the host: the GPU tests of the epilogue bound the difference.

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

/// The bits of `x` rounded to BF16, to nearest, ties to even
/// (`cvt.rn.bf16.f32`; overflow goes to infinity).
#[inline(always)]
pub fn to_bf16_bits(x: f32) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let bits: u16;
        // SAFETY: a conversion between registers; no memory, no side effect.
        unsafe {
            core::arch::asm!("cvt.rn.bf16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) x,
                options(pure, nomem, nostack));
        }
        bits
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host::to_bf16_bits(x)
    }
}

/// The bits of `x` rounded to IEEE binary16, to nearest, ties to even
/// (`cvt.rn.f16.f32`; overflow goes to infinity).
#[inline(always)]
pub fn to_f16_bits(x: f32) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let bits: u16;
        // SAFETY: a conversion between registers; no memory, no side effect.
        unsafe {
            core::arch::asm!("cvt.rn.f16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) x,
                options(pure, nomem, nostack));
        }
        bits
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host::to_f16_bits(x)
    }
}

/// The IEEE binary16 of bits `h` as an f32 (exact): `cvt.f32.f16` on the
/// GPU, one instruction where the integer code (subnormals, infinities)
/// is a dozen with branches; that code on the host.
#[inline(always)]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let x: f32;
        // SAFETY: a conversion between registers; no memory, no side effect.
        unsafe {
            core::arch::asm!("cvt.f32.f16 {x}, {h};", x = out(reg32) x, h = in(reg16) h,
                options(pure, nomem, nostack));
        }
        x
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        host::f16_bits_to_f32(h)
    }
}

/// `cvt.rn.satfinite.$pair.f32` of `$x` (the pair's high byte 0,
/// dropped) on the GPU, `$format.from_f32($x)` on the host.
macro_rules! to_fp8_bits {
    ($pair:literal, $format:ident, $x:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            let bits: u16;
            // SAFETY: a conversion between registers; no memory, no side
            // effect.
            unsafe {
                core::arch::asm!(concat!("cvt.rn.satfinite.", $pair, ".f32 {b}, {z}, {x};"),
                    b = out(reg16) bits, z = in(reg32) 0f32, x = in(reg32) $x,
                    options(pure, nomem, nostack));
            }
            bits as u8
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            crate::elem::Fp8Format::$format.from_f32($x)
        }
    }};
}

/// The bits of `x` rounded to FP8 E4M3, to nearest, ties to even,
/// saturating (`cvt.rn.satfinite.e4m3x2.f32`: beyond 448 gives 448, an
/// infinity too; NaN gives NaN).
#[inline(always)]
pub fn to_e4m3_bits(x: f32) -> u8 {
    to_fp8_bits!("e4m3x2", E4M3, x)
}

/// The bits of `x` rounded to FP8 E5M2, to nearest, ties to even,
/// saturating (`cvt.rn.satfinite.e5m2x2.f32`: beyond 57344 gives 57344).
#[inline(always)]
pub fn to_e5m2_bits(x: f32) -> u8 {
    to_fp8_bits!("e5m2x2", E5M2, x)
}

/// `2^x` (`ex2.approx.ftz.f32`: 2 ulp, a single MUFU instruction; a
/// result below f32's smallest normal is 0; the host computes it
/// exactly). The epilogue's activations use it.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let y: f32;
        // SAFETY: a register-only instruction.
        unsafe {
            core::arch::asm!("ex2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                options(pure, nomem, nostack));
        }
        y
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.exp2()
    }
}

/// `1 / x` (`rcp.approx.ftz.f32`: 1 ulp, a single MUFU instruction, for
/// a normal `x`; the host divides exactly). The epilogue's activations
/// take it of values at least 1.
#[inline(always)]
pub fn recip(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let y: f32;
        // SAFETY: a register-only instruction.
        unsafe {
            core::arch::asm!("rcp.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                options(pure, nomem, nostack));
        }
        y
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x
    }
}

/// `tanh(x)` (`tanh.approx.f32`: relative error at most about 2^-11 (PTX
/// ISA: 2^-10.987), a single MUFU instruction; the host computes it to
/// f32's precision, so the emulator does not see the approximation: the
/// verification's bound for it is [`TANH_APPROX_ERROR`]). The epilogue
/// uses it only for a 16-bit C, whose rounding is as coarse or coarser.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let y: f32;
        // SAFETY: a register-only instruction.
        unsafe {
            core::arch::asm!("tanh.approx.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                options(pure, nomem, nostack));
        }
        y
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.tanh()
    }
}

/// The largest relative error of [`tanh`] on the GPU (PTX ISA,
/// `tanh.approx.f32`: 2^-10.987 = 4.93e-4), rounded up.
pub const TANH_APPROX_ERROR: f64 = 5e-4;

/// The host's conversions: what `cvt.rn` does, in integer arithmetic.
#[cfg(not(target_arch = "nvptx64"))]
mod host {
    pub fn f16_bits_to_f32(h: u16) -> f32 {
        let h = h as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = match exp {
            // Zero, or a subnormal: man * 2^-24, exact in f32.
            0 => {
                let v = man as f32 * (1.0 / 16_777_216.0);
                return if sign != 0 { -v } else { v };
            }
            // Infinity or NaN (payload kept).
            0x1f => sign | 0x7f80_0000 | (man << 13),
            _ => sign | ((exp + 112) << 23) | (man << 13),
        };
        f32::from_bits(bits)
    }

    pub fn to_bf16_bits(x: f32) -> u16 {
        let bits = x.to_bits();
        if x.is_nan() {
            // Keep the sign and the top payload bits; set the quiet bit.
            return (bits >> 16) as u16 | 0x0040;
        }
        // Round to nearest even on the 16 bits dropped; a carry moves into
        // the exponent, and past the largest finite value into infinity.
        let round = 0x7fff + ((bits >> 16) & 1);
        (bits.wrapping_add(round) >> 16) as u16
    }

    pub fn to_f16_bits(x: f32) -> u16 {
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32;
        let man = bits & 0x7f_ffff;
        if exp == 0xff {
            // Infinity, or NaN (quiet, top payload bits kept).
            let nan = if man != 0 {
                0x0200 | (man >> 13) as u16
            } else {
                0
            };
            return sign | 0x7c00 | nan;
        }
        // The exponent in FP16's bias.
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return sign | 0x7c00;
        }
        // The significand and how many of its low bits are dropped: 13 for
        // a normal result, more for a subnormal one (whose unit is 2^-24).
        let (sig, shift, base) = if e > 0 {
            (man, 13u32, (e as u32) << 10)
        } else if e >= -10 {
            (man | 0x80_0000, (14 - e) as u32, 0)
        } else {
            // Below half the smallest subnormal: zero.
            return sign;
        };
        let kept = sig >> shift;
        let rest = sig & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let up = (rest > half || (rest == half && kept & 1 == 1)) as u32;
        // A carry out of the significand moves into the exponent (and
        // from the largest finite value into infinity, 0x7c00).
        sign | (base + kept + up) as u16
    }
}
