//! Element types: the number formats a kernel stores and computes in, an
//! axis of the whole stack.
//!
//! Two things vary and are kept apart:
//!
//! - how a matrix is **stored** ([`Elem`]: f32, BF16, FP16), which sets
//!   its bytes per element, what the host uploads and downloads, TMA's
//!   data type and how rows are padded;
//! - what the multiply-adds **compute in** ([`Math`]: the FP32 pipe, or the
//!   tensor cores in TF32, BF16 or FP16), which sets the peak a kernel is
//!   measured against, the cuBLAS it is compared with and, with the stored
//!   types, its verification tolerance.
//!
//! A kernel states both in its spec as one [`Elems`] (`KernelSpec::elems`):
//! A, B and C as stored, the accumulator, and the math. Everything that
//! launches, checks or reports a kernel reads them from there.
//!
//! On the device a stored element is a Rust type that implements
//! [`Element`]: `f32`, or the 16-bit [`Bf16`] and [`F16`] (bit patterns;
//! widening is integer arithmetic, narrowing is `cvt.rn` on the GPU and
//! the same rounding in integer code in the emulator:
//! [`crate::device::math`]; a host test checks both directions against
//! the `half` crate bit for bit).

/// A number format as stored in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    F32,
    /// bfloat16: f32's 8 exponent bits, 7 stored mantissa bits.
    Bf16,
    /// IEEE binary16: 5 exponent bits, 10 stored mantissa bits.
    F16,
}

impl Elem {
    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::Bf16 | Elem::F16 => 2,
        }
    }

    /// `f32`, `bf16` or `f16`, as in Rust (and the CLI).
    pub const fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::Bf16 => "bf16",
            Elem::F16 => "f16",
        }
    }

    /// Significant bits, the implicit one included (24, 8, 11).
    pub const fn precision_bits(self) -> i32 {
        match self {
            Elem::F32 => 24,
            Elem::Bf16 => 8,
            Elem::F16 => 11,
        }
    }

    /// The unit roundoff of rounding to nearest into this format:
    /// `2^-p` for `p` significant bits (2^-24, 2^-8, 2^-11).
    pub const fn unit_roundoff(self) -> f64 {
        // 2^-p, built from its exponent bits (no `powi` in `core`).
        f64::from_bits(((1023 - self.precision_bits()) as u64) << 52)
    }
}

/// The arithmetic a kernel's multiply-adds do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Math {
    /// f32 multiply-adds on the FMA pipe.
    Fp32,
    /// A and B rounded to TF32 (10 stored mantissa bits) and multiplied on
    /// the tensor cores, accumulated in f32.
    Tf32,
    /// BF16 products on the tensor cores (exact in f32), accumulated in f32.
    Bf16,
    /// FP16 products on the tensor cores (exact in f32), accumulated in f32.
    F16,
    /// 3xTF32: each f32 factor split into a TF32 part and a TF32
    /// remainder, `x = big + small` (`big = tf32(x)`, `small = tf32(x -
    /// big)`, both rounded to nearest), and the product formed from three
    /// TF32 products, `small * big + big * small + big * big` (the
    /// `small * small` term dropped), on the tensor cores with f32
    /// accumulation: close to FP32's accuracy (step 23).
    Tf32x3,
}

impl Math {
    /// `FP32`, `TF32`, `BF16` or `FP16`: the name cuBLAS's users know.
    pub const fn name(self) -> &'static str {
        match self {
            Math::Fp32 => "FP32",
            Math::Tf32 => "TF32",
            Math::Bf16 => "BF16",
            Math::F16 => "FP16",
            Math::Tf32x3 => "3xTF32",
        }
    }

    /// The math called `name` ([`Self::name`]).
    pub fn from_name(name: &str) -> Option<Math> {
        [Math::Fp32, Math::Tf32, Math::Bf16, Math::F16, Math::Tf32x3]
            .into_iter()
            .find(|m| m.name() == name)
    }

    /// The tensor cores do it (not the FMA pipe).
    pub const fn tensor_cores(self) -> bool {
        !matches!(self, Math::Fp32)
    }

    /// The math of the cuBLAS call a kernel of this math is measured and
    /// checked against: its own, but FP32 (cuBLAS SGEMM) for 3xTF32,
    /// whose claim is FP32's accuracy.
    pub const fn yardstick(self) -> Math {
        match self {
            Math::Tf32x3 => Math::Fp32,
            m => m,
        }
    }

    /// Significant bits of the factors the multipliers take (TF32: 11;
    /// 3xTF32: 24, an f32 factor taken whole, as a sum of two TF32 parts).
    pub const fn precision_bits(self) -> i32 {
        match self {
            Math::Fp32 | Math::Tf32x3 => 24,
            Math::Tf32 | Math::F16 => 11,
            Math::Bf16 => 8,
        }
    }
}

/// A kernel's element types: A, B and C as stored, the accumulator, and
/// the math of its multiply-adds (cubecl-matmul's `MatmulPrecision`,
/// CUTLASS's element types; ours are data, read at run time by the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Elems {
    pub a: Elem,
    pub b: Elem,
    pub c: Elem,
    /// The accumulators' format (f32 for every kernel so far).
    pub acc: Elem,
    pub math: Math,
}

impl Elems {
    /// f32 in and out, f32 FMAs: the FP32 ladder.
    pub const FP32: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Fp32);
    /// f32 in and out, TF32 tensor cores: steps 11-13, 17, 18.
    pub const TF32: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Tf32);
    /// f32 in and out, 3xTF32 on the tensor cores: step 23.
    pub const TF32X3: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Tf32x3);

    /// A, B and C stored as `a`, `b`, `c`, accumulated in f32, computed in `math`.
    pub const fn new(a: Elem, b: Elem, c: Elem, math: Math) -> Elems {
        Elems {
            a,
            b,
            c,
            acc: Elem::F32,
            math,
        }
    }

    /// How A, B and C are stored: what buffers a launch needs.
    pub const fn storage(self) -> Storage {
        Storage {
            a: self.a,
            b: self.b,
            c: self.c,
        }
    }

    /// `TF32 (f32 x f32 -> f32)`: the math, then the stored types.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn describe(self) -> String {
        format!("{} ({})", self.math.name(), self.storage())
    }

    /// The math's name, and the stored types where they are not all f32
    /// (`FP32`, `TF32`, `BF16 (bf16 x bf16 -> f32)`): what lists show.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn label(self) -> String {
        if self.storage() == Storage::F32 {
            self.math.name().into()
        } else {
            self.describe()
        }
    }
}

/// The stored types of A, B and C: what a set of buffers holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Storage {
    pub a: Elem,
    pub b: Elem,
    pub c: Elem,
}

impl Storage {
    /// f32 A, B and C.
    pub const F32: Storage = Elems::FP32.storage();
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Display for Storage {
    /// `f32 x f32 -> f32`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} x {} -> {}",
            self.a.name(),
            self.b.name(),
            self.c.name()
        )
    }
}

/// A stored element type on the device: what a global view
/// (`device::GlobalIn<T>`) reads and writes.
///
/// Values move through `f32`, which holds every BF16 and FP16 value
/// exactly: `to_f32` is exact, `from_f32` rounds to nearest, ties to even
/// (NaN stays NaN, overflow goes to infinity, as `cvt.rn` does).
pub trait Element: Copy + core::fmt::Debug + 'static {
    /// Its format.
    const ELEM: Elem;
    /// +0 (a constant, where `from_f32(0.0)` would be a conversion on the GPU).
    const ZERO: Self;
    /// The value as an f32 (exact).
    fn to_f32(self) -> f32;
    /// `x` rounded to nearest (ties to even).
    fn from_f32(x: f32) -> Self;
    /// The stored bits, zero-extended (what a register holds; two 16-bit
    /// elements share a 32-bit register, the lower index in the low half).
    fn bits(self) -> u32;
    /// The element of these stored bits (the low `8 * bytes` of `bits`).
    fn from_bits(bits: u32) -> Self;
}

impl Element for f32 {
    const ELEM: Elem = Elem::F32;
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
    #[inline(always)]
    fn bits(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }
}

/// A bfloat16, as its 16 bits (the upper half of an f32).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bf16(pub u16);

/// An IEEE binary16, as its 16 bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct F16(pub u16);

impl Element for Bf16 {
    const ELEM: Elem = Elem::Bf16;
    const ZERO: Self = Bf16(0);

    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        Bf16(crate::device::math::to_bf16_bits(x))
    }

    #[inline(always)]
    fn bits(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        Bf16(bits as u16)
    }
}

impl Element for F16 {
    const ELEM: Elem = Elem::F16;
    const ZERO: Self = F16(0);

    #[inline(always)]
    fn to_f32(self) -> f32 {
        crate::device::math::f16_bits_to_f32(self.0)
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        F16(crate::device::math::to_f16_bits(x))
    }

    #[inline(always)]
    fn bits(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        F16(bits as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_16_bit_pattern_converts_as_the_half_crate_does() {
        for bits in 0..=u16::MAX {
            let (ours, theirs) = (Bf16(bits).to_f32(), half::bf16::from_bits(bits).to_f32());
            assert!(ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()));
            let (ours, theirs) = (F16(bits).to_f32(), half::f16::from_bits(bits).to_f32());
            assert!(
                ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
                "f16 {bits:#06x}: {ours} vs {theirs}"
            );
        }
    }

    #[test]
    fn rounding_from_f32_matches_the_half_crate() {
        // Every 16-bit value, the values halfway between neighbours (ties),
        // and a stride through all f32 bit patterns.
        let mut xs: Vec<f32> = Vec::new();
        for bits in 0..=u16::MAX {
            let b = (bits as u32) << 16;
            xs.extend([b, b | 0x8000, b | 0x7fff, b | 0x8001].map(f32::from_bits));
            let h = half::f16::from_bits(bits).to_f32();
            let next = half::f16::from_bits(bits.wrapping_add(1)).to_f32();
            xs.extend([h, (h + next) / 2.0, h * (1.0 + f32::EPSILON)]);
        }
        xs.extend((0..u32::MAX).step_by(40_503).map(f32::from_bits));
        for x in xs {
            let (ours, theirs) = (Bf16::from_f32(x).0, half::bf16::from_f32(x).to_bits());
            assert!(
                ours == theirs || (x.is_nan() && ours & 0x7fc0 == 0x7fc0),
                "bf16 of {x:e} ({:#010x}): {ours:#06x} vs {theirs:#06x}",
                x.to_bits()
            );
            let (ours, theirs) = (F16::from_f32(x).0, half::f16::from_f32(x).to_bits());
            assert!(
                ours == theirs || (x.is_nan() && ours & 0x7e00 == 0x7e00),
                "f16 of {x:e} ({:#010x}): {ours:#06x} vs {theirs:#06x}",
                x.to_bits()
            );
        }
    }

    #[test]
    fn names_round_trip_and_roundoffs_follow_the_bits() {
        for m in [Math::Fp32, Math::Tf32, Math::Bf16, Math::F16, Math::Tf32x3] {
            assert_eq!(Math::from_name(m.name()), Some(m));
        }
        assert_eq!(Math::Tf32x3.yardstick(), Math::Fp32);
        assert_eq!(Math::Bf16.yardstick(), Math::Bf16);
        assert_eq!(Elem::Bf16.unit_roundoff(), 1.0 / 256.0);
        assert_eq!(Elem::F16.unit_roundoff(), 1.0 / 2048.0);
        assert_eq!(Elem::F32.unit_roundoff(), f32::EPSILON as f64 / 2.0);
        assert_eq!(Elems::TF32.describe(), "TF32 (f32 x f32 -> f32)");
    }
}
