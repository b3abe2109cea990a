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
    /// OCP FP8 E4M3: 4 exponent bits (bias 7), 3 stored mantissa bits; no
    /// infinities, `S.1111.111` is NaN, the largest value 448.
    E4m3,
    /// OCP FP8 E5M2: 5 exponent bits (bias 15), 2 stored mantissa bits,
    /// IEEE's special values (infinities, NaNs), the largest value 57344.
    E5m2,
}

impl Elem {
    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::Bf16 | Elem::F16 => 2,
            Elem::E4m3 | Elem::E5m2 => 1,
        }
    }

    /// `f32`, `bf16`, `f16`, `e4m3` or `e5m2`, as in Rust (and the CLI).
    pub const fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::Bf16 => "bf16",
            Elem::F16 => "f16",
            Elem::E4m3 => "e4m3",
            Elem::E5m2 => "e5m2",
        }
    }

    /// Significant bits, the implicit one included (24, 8, 11, 4, 3).
    pub const fn precision_bits(self) -> i32 {
        match self {
            Elem::F32 => 24,
            Elem::Bf16 => 8,
            Elem::F16 => 11,
            Elem::E4m3 => 4,
            Elem::E5m2 => 3,
        }
    }

    /// The unit roundoff of rounding to nearest into this format:
    /// `2^-p` for `p` significant bits (2^-24, 2^-8, 2^-11).
    pub const fn unit_roundoff(self) -> f64 {
        // 2^-p, built from its exponent bits (no `powi` in `core`).
        f64::from_bits(((1023 - self.precision_bits()) as u64) << 52)
    }

    /// The spacing of this format's subnormals, its smallest positive
    /// value (2^-149, 2^-133, 2^-24, 2^-9, 2^-16): below the smallest
    /// normal, rounding to nearest errs by up to half of it, however
    /// small the value, an absolute error no relative bound covers.
    pub const fn subnormal_spacing(self) -> f64 {
        let e: u64 = match self {
            Elem::F32 => 149,
            Elem::Bf16 => 133,
            Elem::F16 => 24,
            Elem::E4m3 => 9,
            Elem::E5m2 => 16,
        };
        f64::from_bits((1023 - e) << 52)
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
    /// FP8 products (E4M3 or E5M2, A and B may differ; exact in f32) on
    /// the tensor cores, scaled per tensor in the epilogue. Hopper's FP8
    /// tensor cores keep about 13 fraction bits in the sums of a `wgmma`
    /// k-step (DeepSeek-V3's report, section 3.3.2: "around 14 bits"),
    /// fewer than f32's 23: the tolerance counts it
    /// (`host/src/reference.rs`).
    Fp8,
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
            Math::Fp8 => "FP8",
        }
    }

    /// Every math, in ladder order.
    pub const ALL: [Math; 6] = [
        Math::Fp32,
        Math::Tf32,
        Math::Bf16,
        Math::F16,
        Math::Tf32x3,
        Math::Fp8,
    ];

    /// The math called `name` ([`Self::name`]).
    pub fn from_name(name: &str) -> Option<Math> {
        Math::ALL.into_iter().find(|m| m.name() == name)
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
            // E4M3's (E5M2 has one fewer).
            Math::Fp8 => 4,
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
    /// What an FP8 kernel's scales are ([`Scaling`]); `None` for the rest.
    pub scaling: Scaling,
    /// K values between promotions of the tensor cores' partial sums to
    /// the f32 accumulators (step 26: 128, one K block); 0 where the sums
    /// stay in the tensor cores' own accumulators for the whole of K
    /// (every kernel but step 26's; it matters only for FP8, whose tensor
    /// cores add with fewer bits than f32, [`Math::Fp8`]).
    pub promote_every: u32,
}

/// What the scales of an FP8 product are (issue 21): what the entry's
/// `gemm::ScaleParams` point at, what the harness uploads and what the
/// reference multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scaling {
    /// No scales (the 32- and 16-bit kernels).
    None,
    /// One f32 each for A, B and D (cuBLASLt's scale pointers): step 25.
    Tensor,
    /// DeepSeek-V3's block scales (step 26): A one f32 per row per 128 of
    /// K, B (read as B^T, N x K) one per 128 x 128 block, D one per
    /// tensor ([`Scaling::a_scales`] and [`Scaling::b_scales`] say how
    /// they are laid out).
    Blocks,
}

/// Values of K (and of N, for B's) that one block scale covers.
pub const SCALE_BLOCK: usize = 128;

impl Scaling {
    /// Elements between one K block's A scales and the next's: A's rows
    /// rounded up to a multiple of 4 (16 bytes), as cuBLASLt's
    /// `VEC128_32F` lays them out.
    pub const fn a_scales_stride(m: usize) -> usize {
        m.next_multiple_of(4)
    }

    /// Elements between one column block's B scales and the next's: the
    /// K blocks rounded up to a multiple of 4 (16 bytes), as cuBLASLt's
    /// `BLK128x128_32F` lays them out.
    pub const fn b_scales_stride(k: usize) -> usize {
        k.div_ceil(SCALE_BLOCK).next_multiple_of(4)
    }

    /// Block scales of an `m x k` A: one f32 per row per 128 of K, stored
    /// K block by K block (the scale of A[r][kk] at `kk / 128 *
    /// a_scales_stride(m) + r`, so that one block's rows are contiguous
    /// for the warps that read them together). Returns the count.
    pub const fn a_scales(m: usize, k: usize) -> usize {
        k.div_ceil(SCALE_BLOCK) * Self::a_scales_stride(m)
    }

    /// Block scales of a `k x n` B (stored as B^T, N x K): one f32 per
    /// 128 x 128 block, the K blocks of one 128 columns of B (rows of
    /// B^T) contiguous (the scale of B[kk][j] at `j / 128 *
    /// b_scales_stride(k) + kk / 128`). Returns the count.
    pub const fn b_scales(k: usize, n: usize) -> usize {
        n.div_ceil(SCALE_BLOCK) * Self::b_scales_stride(k)
    }
}

impl Elems {
    /// f32 in and out, f32 FMAs: the FP32 ladder.
    pub const FP32: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Fp32);
    /// f32 in and out, TF32 tensor cores: steps 11-13, 17, 18.
    pub const TF32: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Tf32);
    /// f32 in and out, 3xTF32 on the tensor cores: step 23.
    pub const TF32X3: Elems = Elems::new(Elem::F32, Elem::F32, Elem::F32, Math::Tf32x3);

    /// A, B and C stored as `a`, `b`, `c`, accumulated in f32, computed
    /// in `math`; per-tensor scales where A or B is FP8
    /// ([`Storage::new`]), no promotion.
    pub const fn new(a: Elem, b: Elem, c: Elem, math: Math) -> Elems {
        Elems {
            a,
            b,
            c,
            acc: Elem::F32,
            math,
            scaling: Storage::new(a, b, c).scaling,
            promote_every: 0,
        }
    }

    /// These types with the partial sums promoted to f32 every `k` of K
    /// (step 26).
    pub const fn promoted(self, k: u32) -> Elems {
        Elems {
            promote_every: k,
            ..self
        }
    }

    /// These types with the scales `scaling` (step 26's block scales).
    pub const fn with_scaling(self, scaling: Scaling) -> Elems {
        Elems { scaling, ..self }
    }

    /// The same stored types, scales and math as `other`, whatever the
    /// accumulation (a kernel and the cuBLAS baseline it is compared
    /// with).
    pub fn same_types(self, other: Elems) -> bool {
        self.storage() == other.storage() && self.math == other.math
    }

    /// How A, B and C are stored: what buffers a launch needs.
    pub const fn storage(self) -> Storage {
        Storage {
            a: self.a,
            b: self.b,
            c: self.c,
            scaling: self.scaling,
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
    /// The scales that come with FP8 A and B.
    pub scaling: Scaling,
}

impl Storage {
    /// f32 A, B and C.
    pub const F32: Storage = Elems::FP32.storage();

    /// A, B and C of these types, with per-tensor scales where A or B is
    /// FP8 ([`Scaling::Tensor`]) and none otherwise.
    pub const fn new(a: Elem, b: Elem, c: Elem) -> Storage {
        let fp8 = a.bytes() == 1 || b.bytes() == 1;
        Storage {
            a,
            b,
            c,
            scaling: if fp8 { Scaling::Tensor } else { Scaling::None },
        }
    }

    /// These types with the scales `scaling`.
    pub const fn with_scaling(self, scaling: Scaling) -> Storage {
        Storage { scaling, ..self }
    }

    /// The kernels take scales (`gemm::ScaleParams`, their entries' last
    /// parameter): A or B is FP8.
    pub const fn scaled(self) -> bool {
        !matches!(self.scaling, Scaling::None)
    }
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
        )?;
        if self.scaling == Scaling::Blocks {
            write!(f, ", block scales")?;
        }
        Ok(())
    }
}

/// A stored element type on the device: what a global view
/// (`device::GlobalIn<T>`) reads and writes.
///
/// Values move through `f32`, which holds every BF16, FP16 and FP8 value
/// exactly: `to_f32` is exact, `from_f32` rounds to nearest, ties to even
/// (NaN stays NaN; overflow goes to infinity for the 16-bit types, as
/// `cvt.rn` does, and saturates to the largest finite value for the FP8
/// ones, as `cvt.rn.satfinite` does, the conversion FP8 recipes use).
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

/// An OCP FP8 E4M3 value, as its 8 bits ([`Elem::E4m3`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct E4m3(pub u8);

/// An OCP FP8 E5M2 value, as its 8 bits ([`Elem::E5m2`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct E5m2(pub u8);

/// An 8-bit float format of the OCP FP8 specification: its field widths
/// and how it spends the top exponent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp8Format {
    /// Exponent bits.
    pub exponent_bits: u32,
    /// Stored mantissa bits.
    pub mantissa_bits: u32,
    /// IEEE-like: the top exponent holds infinities (mantissa 0) and NaNs
    /// (E5M2). Otherwise it holds normal values but for the all-ones
    /// mantissa, NaN, and there is no infinity (E4M3).
    pub ieee_specials: bool,
}

impl Fp8Format {
    pub const E4M3: Fp8Format = Fp8Format {
        exponent_bits: 4,
        mantissa_bits: 3,
        ieee_specials: false,
    };
    pub const E5M2: Fp8Format = Fp8Format {
        exponent_bits: 5,
        mantissa_bits: 2,
        ieee_specials: true,
    };

    const fn bias(self) -> i32 {
        (1 << (self.exponent_bits - 1)) - 1
    }

    /// The bits of the largest finite value (positive).
    pub const fn max_bits(self) -> u8 {
        let top = (1u32 << (self.exponent_bits + self.mantissa_bits)) - 1;
        // IEEE: the exponent below the top, mantissa all ones; E4M3: the
        // top pattern but one (the last is NaN).
        (if self.ieee_specials {
            top - (1 << self.mantissa_bits)
        } else {
            top - 1
        }) as u8
    }

    /// The canonical NaN's bits (positive): all ones below the sign.
    pub const fn nan_bits(self) -> u8 {
        0x7F
    }

    /// The value of `bits` (exact in f32).
    pub fn to_f32(self, bits: u8) -> f32 {
        let (m, e) = (self.mantissa_bits, self.exponent_bits);
        let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
        let exp = (bits as u32 >> m) & ((1 << e) - 1);
        let man = bits as u32 & ((1 << m) - 1);
        let top = (1 << e) - 1;
        if self.ieee_specials && exp == top {
            return if man == 0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            };
        }
        if !self.ieee_specials && exp == top && man == (1 << m) - 1 {
            return f32::NAN;
        }
        // man * 2^(1 - bias - m) for subnormals (exp 0), (2^m + man) *
        // 2^(exp - bias - m) for normals: small integers times powers of
        // two, exact.
        let (int, scale) = if exp == 0 {
            (man, 1 - self.bias() - m as i32)
        } else {
            ((1 << m) | man, exp as i32 - self.bias() - m as i32)
        };
        sign * int as f32 * f32::from_bits(((127 + scale) as u32) << 23)
    }

    /// `x` rounded to nearest, ties to even, saturating: a finite value
    /// beyond the largest finite one, and an infinity, give the largest
    /// finite value of the same sign (`cvt.rn.satfinite`); NaN gives NaN.
    /// In integer code, as the 16-bit narrowings are on the host.
    pub fn from_f32(self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = ((bits >> 24) & 0x80) as u8;
        if x.is_nan() {
            return sign | self.nan_bits();
        }
        let max = self.max_bits();
        let abs = bits & 0x7FFF_FFFF;
        if f32::from_bits(abs) >= self.to_f32(max) {
            return sign | max;
        }
        let m = self.mantissa_bits;
        // The value in units of the format's smallest subnormal, 2^(1 -
        // bias - m), rounded to nearest even, is the magnitude's bits for
        // subnormals; for normals, round the f32 mantissa to m bits and
        // rebias the exponent. Both carry into the exponent correctly.
        let exp32 = (abs >> 23) as i32 - 127;
        let min_normal_exp = 1 - self.bias();
        let magnitude = if exp32 < min_normal_exp {
            let mant = if abs >> 23 == 0 {
                abs
            } else {
                (abs & 0x7F_FFFF) | 0x80_0000
            };
            // value = mant * 2^(max(exp32, -126) - 23); in units of
            // 2^(min_normal_exp - m): shift right by s.
            let s = (min_normal_exp - m as i32) - (exp32.max(-126) - 23);
            round_shift(mant, s as u32)
        } else {
            let rounded = round_shift(abs, 23 - m);
            rounded - (((127 - self.bias()) as u32) << m)
        };
        sign | magnitude as u8
    }
}

/// `v >> s` rounded to nearest, ties to even (0 when `s` shifts
/// everything out and the rest is below a half).
const fn round_shift(v: u32, s: u32) -> u32 {
    if s == 0 {
        return v;
    }
    if s > 32 {
        return 0;
    }
    let q = if s == 32 { 0 } else { v >> s };
    let rem = if s == 32 {
        v as u64
    } else {
        (v & ((1 << s) - 1)) as u64
    };
    let half = 1u64 << (s - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// An FP8 element type: its format and its largest finite value, what a
/// quantizer's scale maps a block's largest magnitude to (`quant`).
pub trait Fp8: Element {
    const FORMAT: Fp8Format;
    /// The largest finite value: 448 (E4M3), 57344 (E5M2).
    const MAX: f32;
}

impl Fp8 for E4m3 {
    const FORMAT: Fp8Format = Fp8Format::E4M3;
    const MAX: f32 = 448.0;
}

impl Fp8 for E5m2 {
    const FORMAT: Fp8Format = Fp8Format::E5M2;
    const MAX: f32 = 57344.0;
}

impl Element for E4m3 {
    const ELEM: Elem = Elem::E4m3;
    const ZERO: Self = E4m3(0);
    #[inline(always)]
    fn to_f32(self) -> f32 {
        Fp8Format::E4M3.to_f32(self.0)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        E4m3(crate::device::math::to_e4m3_bits(x))
    }
    #[inline(always)]
    fn bits(self) -> u32 {
        self.0 as u32
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        E4m3(bits as u8)
    }
}

impl Element for E5m2 {
    const ELEM: Elem = Elem::E5m2;
    const ZERO: Self = E5m2(0);
    #[inline(always)]
    fn to_f32(self) -> f32 {
        Fp8Format::E5M2.to_f32(self.0)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        E5m2(crate::device::math::to_e5m2_bits(x))
    }
    #[inline(always)]
    fn bits(self) -> u32 {
        self.0 as u32
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        E5m2(bits as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OCP 8-bit floating point specification (OFP8, rev. 1.0), table
    /// 1: each format's exponent bias, infinities, NaNs, zeros, largest
    /// normal, smallest normal, largest and smallest subnormal (positive
    /// encodings; the negative ones are the same with the sign bit).
    #[test]
    fn every_fp8_encoding_decodes_as_the_ocp_table_says() {
        struct Row {
            format: Fp8Format,
            max: (u8, f32),
            min_normal: (u8, f32),
            max_subnormal: (u8, f32),
            min_subnormal: (u8, f32),
            infinity: Option<u8>,
            nans: &'static [u8],
        }
        let rows = [
            Row {
                format: Fp8Format::E4M3,
                max: (0x7E, 448.0),
                min_normal: (0x08, 2f32.powi(-6)),
                max_subnormal: (0x07, 0.875 * 2f32.powi(-6)),
                min_subnormal: (0x01, 2f32.powi(-9)),
                infinity: None,
                nans: &[0x7F, 0xFF],
            },
            Row {
                format: Fp8Format::E5M2,
                max: (0x7B, 57344.0),
                min_normal: (0x04, 2f32.powi(-14)),
                max_subnormal: (0x03, 0.75 * 2f32.powi(-14)),
                min_subnormal: (0x01, 2f32.powi(-16)),
                infinity: Some(0x7C),
                nans: &[0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF],
            },
        ];
        for row in rows {
            let f = row.format;
            for (bits, value) in [
                row.max,
                row.min_normal,
                row.max_subnormal,
                row.min_subnormal,
            ] {
                assert_eq!(f.to_f32(bits), value, "{f:?} {bits:#04x}");
                assert_eq!(f.to_f32(bits | 0x80), -value, "{f:?} {bits:#04x} negated");
            }
            assert_eq!(f.max_bits(), row.max.0);
            assert_eq!(f.to_f32(0x00).to_bits(), 0.0f32.to_bits());
            assert_eq!(f.to_f32(0x80).to_bits(), (-0.0f32).to_bits());
            if let Some(inf) = row.infinity {
                assert_eq!(f.to_f32(inf), f32::INFINITY);
                assert_eq!(f.to_f32(inf | 0x80), f32::NEG_INFINITY);
            }
            // Every encoding: NaN exactly where the table says; otherwise
            // the value of its fields, (-1)^s 2^(e - bias) (1 + m / 2^M)
            // or 2^(1 - bias) (m / 2^M), computed here in f64; and each
            // non-NaN value converts back to its own bits.
            let (mb, bias) = (f.mantissa_bits, f.bias());
            for bits in 0..=255u8 {
                let v = f.to_f32(bits);
                assert_eq!(v.is_nan(), row.nans.contains(&bits), "{f:?} {bits:#04x}");
                if v.is_nan() {
                    assert!(f.from_f32(v) & 0x7F == f.nan_bits());
                    continue;
                }
                let exp = (bits as i32 >> mb) & ((1 << f.exponent_bits) - 1);
                let man = f64::from(bits & ((1 << mb) - 1));
                let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
                let want = if row.infinity.is_some_and(|i| i == bits & 0x7F) {
                    sign * f64::INFINITY
                } else if exp == 0 {
                    sign * 2f64.powi(1 - bias) * man / f64::from(1u32 << mb)
                } else {
                    sign * 2f64.powi(exp - bias) * (1.0 + man / f64::from(1u32 << mb))
                };
                assert_eq!(f64::from(v), want, "{f:?} {bits:#04x}");
                if v.is_finite() {
                    assert_eq!(f.from_f32(v), bits, "{f:?} {bits:#04x} round trip");
                }
            }
        }
    }

    /// Rounding to FP8 against a search of every finite value: nearest,
    /// ties to the even encoding (an even mantissa), saturating at the
    /// largest finite value; over every value halfway between neighbours,
    /// just beside them, and a stride through all f32 bit patterns.
    #[test]
    fn rounding_to_fp8_is_nearest_even_and_saturates() {
        for f in [Fp8Format::E4M3, Fp8Format::E5M2] {
            let finite: Vec<(u8, f32)> = (0..=0x7Fu8)
                .map(|b| (b, f.to_f32(b)))
                .filter(|(_, v)| v.is_finite())
                .collect();
            let max = f.to_f32(f.max_bits());
            let nearest = |x: f32| -> u8 {
                let sign = if x.is_sign_negative() { 0x80 } else { 0 };
                let a = x.abs();
                if a >= max {
                    return sign | f.max_bits();
                }
                let mut best = finite[0];
                for &(b, v) in &finite {
                    let (d, db) = ((v - a).abs(), (best.1 - a).abs());
                    if d < db || (d == db && b & 1 == 0) {
                        best = (b, v);
                    }
                }
                sign | best.0
            };
            let mut xs: Vec<f32> = Vec::new();
            for w in finite.windows(2) {
                let (lo, hi) = (w[0].1, w[1].1);
                let mid = (lo + hi) / 2.0;
                xs.extend([lo, hi, mid, mid.next_up(), mid.next_down(), -mid]);
            }
            xs.extend([
                max * 1.01,
                1e30,
                f32::MAX,
                f32::INFINITY,
                f32::NEG_INFINITY,
                1e-30,
                -1e-30,
            ]);
            xs.extend(
                (0..u32::MAX)
                    .step_by(1_000_003)
                    .map(f32::from_bits)
                    .filter(|x| !x.is_nan()),
            );
            for x in xs {
                assert_eq!(
                    f.from_f32(x),
                    nearest(x),
                    "{f:?} of {x:e} ({:#010x})",
                    x.to_bits()
                );
            }
            assert_eq!(f.from_f32(f32::NAN) & 0x7F, f.nan_bits());
        }
        // The formats' saturation points, named.
        assert_eq!(E4m3::from_f32(1e6), E4m3(0x7E));
        assert_eq!(E4m3::from_f32(f32::NEG_INFINITY), E4m3(0xFE));
        assert_eq!(E5m2::from_f32(f32::INFINITY), E5m2(0x7B));
        assert_eq!(
            E4m3::from_f32(464.0),
            E4m3(0x7E),
            "above 448, below the next step"
        );
    }

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
        for m in Math::ALL {
            assert_eq!(Math::from_name(m.name()), Some(m));
        }
        assert_eq!(Math::Tf32x3.yardstick(), Math::Fp32);
        assert_eq!(Math::Bf16.yardstick(), Math::Bf16);
        assert_eq!(Elem::Bf16.unit_roundoff(), 1.0 / 256.0);
        assert_eq!(Elem::F16.unit_roundoff(), 1.0 / 2048.0);
        assert_eq!(Elem::F32.unit_roundoff(), f32::EPSILON as f64 / 2.0);
        assert_eq!(Elems::TF32.describe(), "TF32 (f32 x f32 -> f32)");
    }

    #[test]
    fn fp8_max_is_the_largest_finite_encoding() {
        fn check<T: Fp8>() {
            assert_eq!(T::FORMAT.to_f32(T::FORMAT.max_bits()), T::MAX);
            assert_eq!(T::from_f32(T::MAX * 4.0).to_f32(), T::MAX);
        }
        check::<E4m3>();
        check::<E5m2>();
    }
}
