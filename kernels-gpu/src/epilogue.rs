//! The epilogue, one component for every kernel: what happens to an
//! accumulator between the main loop and D.
//!
//! `D = act(s * (alpha * acc + beta * C) + bias)`
//!
//! - `s`: an optional f32 per row or per column of C (a dequantization or
//!   a per-channel scale), 1 without;
//! - `bias`: an optional f32 per row or per column of C, 0 without;
//! - `act`: [`Activation`]: none, ReLU, GELU (tanh and erf forms), SiLU;
//! - the result is stored in C's type (f32, or rounded to nearest for a
//!   16-bit C: [`Output`]).
//!
//! With `beta == 0` C is not read (as in BLAS: NaN in C does not leak).
//! For FP8 products `alpha` and `beta` are those folded with the scales
//! (`Gemm::scaled_by`): `scale_d` multiplies the sum, not the bias.
//!
//! The kernel ABI keeps the epilogue's arguments apart from the problem
//! and the schedule ([`crate::gemm::GemmParams`]): every GEMM entry takes
//! [`EpilogueParams`] by value as its last parameter. The CUDA C++ twins
//! declare one parameter fewer and never see it (the driver reads the
//! parameters an entry declares), so one launch path serves both.
//!
//! It runs in two parts. Every store site computes `alpha * acc + beta *
//! C` and stores it in C's type ([`Gemm::store_c`], [`Output`],
//! [`store_mma_tiles`]): that is the whole epilogue of a plain GEMM
//! (`flags == 0`, uniform over the launch), whose code is the same as
//! before the epilogue had a second part. With a bias, scales or an
//! activation, a **pass over the tile** follows, written once here and
//! called once per kernel, not at each of its store sites: the threads
//! that stored a rectangle of C meet at a barrier and read it back while
//! it is hot in L2 ([`Gemm::fuse_block`] for a block whose threads all
//! store, [`Gemm::fuse_warp`] for a warp's own rows and columns). A
//! 16-bit C is therefore rounded twice, before and after the pass (the
//! checks allow for it). The TMA-stored kernels (steps 20, 22, 25, 26
//! with beta = 0) instead finish their values in registers before they
//! write the staging box ([`Gemm::fuse_values`]): a second pass over the
//! box in shared memory cost them more, since the tensor cores wait for
//! every tile's epilogue (docs/measurements.md, twenty-third session).
//!
//! Split-K's partial launches run without an epilogue (their C is a
//! workspace of partial sums); the reduction applies it once, after the
//! slices are added (`k14_split_k`). A column-major call is computed as
//! its row-major transpose, so the host turns a bias per row into one per
//! column ([`EpilogueParams::transposed`]).

use crate::device::{GlobalIn, fma};
use crate::elem::Element;
use crate::gemm::Gemm;

/// What the epilogue applies last, elementwise.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `x`.
    #[default]
    None = 0,
    /// `max(x, 0)` (NaN stays NaN).
    Relu = 1,
    /// `x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`, the tanh form
    /// of GELU (cuBLASLt's `CUBLASLT_EPILOGUE_GELU`, PyTorch's
    /// `approximate="tanh"`).
    GeluTanh = 2,
    /// `x / 2 (1 + erf(x / sqrt 2))`, GELU's exact form (PyTorch's
    /// default).
    GeluErf = 3,
    /// `x / (1 + exp(-x))` (SiLU, swish).
    Silu = 4,
}

impl Activation {
    pub const ALL: [Activation; 5] = [
        Activation::None,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::GeluErf,
        Activation::Silu,
    ];

    /// The name the CLI and the reports use.
    pub const fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::GeluTanh => "gelu-tanh",
            Activation::GeluErf => "gelu-erf",
            Activation::Silu => "silu",
        }
    }

    /// The activation named `name` ([`Self::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The largest `|act'(x)|` over all `x`: how much the activation can
    /// magnify an error of its argument (verification bounds).
    pub const fn max_slope(self) -> f64 {
        match self {
            Activation::None | Activation::Relu => 1.0,
            // GELU's derivative peaks at 1.129 near x = 2.4 (both forms).
            Activation::GeluTanh | Activation::GeluErf => 1.13,
            // SiLU's at 1.100 near x = 2.4.
            Activation::Silu => 1.1,
        }
    }

    /// The activation in f64, from the definitions (the reference the
    /// kernels are checked against).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn reference(self, x: f64) -> f64 {
        match self {
            Activation::None => x,
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::GeluTanh => {
                let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                0.5 * x * (1.0 + u.tanh())
            }
            Activation::GeluErf => 0.5 * x * erfc64(-x / core::f64::consts::SQRT_2),
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// `erfc(y)` in f64 to about 1e-15 relative: the Taylor series of `erf`
/// below `|y| = 2` (terms at most `e^4`, so little cancellation), a
/// continued fraction of `erfc` above (Abramowitz and Stegun 7.1.14).
#[cfg(not(target_arch = "nvptx64"))]
fn erfc64(y: f64) -> f64 {
    if y < 0.0 {
        return 2.0 - erfc64(-y);
    }
    if y < 2.0 {
        // erf(y) = 2 / sqrt(pi) sum (-1)^n y^(2n+1) / (n! (2n + 1)).
        let (mut term, mut sum, mut n) = (y, y, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -y * y / n;
            sum += term / (2.0 * n + 1.0);
        }
        return 1.0 - 2.0 / core::f64::consts::PI.sqrt() * sum;
    }
    // erfc(y) = exp(-y^2) / sqrt(pi) / (y + (1/2) / (y + 1 / (y + (3/2) / ...))).
    let mut f = y;
    for k in (1..=80).rev() {
        f = y + (k as f64 / 2.0) / f;
    }
    (-y * y).exp() / (core::f64::consts::PI.sqrt() * f)
}

/// Which of C's dimensions a vector of the epilogue runs along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Per {
    /// One value per row of C (`m` of them).
    Row,
    /// One value per column of C (`n` of them).
    Column,
}

impl Per {
    /// The other one: a row of C is a column of C^T.
    pub const fn transposed(self) -> Self {
        match self {
            Per::Row => Per::Column,
            Per::Column => Per::Row,
        }
    }

    /// How many values a vector along this dimension of an `m x n` C holds.
    pub const fn len(self, m: usize, n: usize) -> usize {
        match self {
            Per::Row => m,
            Per::Column => n,
        }
    }
}

/// The epilogue's arguments as every GEMM entry takes them, by value,
/// last (see the module's docs). The CUDA C++ side never declares them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpilogueParams {
    /// The device address of the bias (f32s, `m` or `n` of them); read
    /// only when `flags` has [`Self::HAS_BIAS`].
    pub bias: u64,
    /// The device address of the scales (f32s, `m` or `n`); read only
    /// when `flags` has [`Self::HAS_SCALE`].
    pub scale: u64,
    /// The [`Activation`] in the low byte, and the bits below; 0 is a
    /// plain GEMM.
    pub flags: u32,
    /// Zero (the struct's size is a multiple of its alignment).
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<EpilogueParams>() == 24);
const _: () = assert!(core::mem::align_of::<EpilogueParams>() == 8);

impl EpilogueParams {
    /// The activation's bits.
    pub const ACTIVATION: u32 = 0xff;
    /// There is a bias.
    pub const HAS_BIAS: u32 = 1 << 8;
    /// The bias has one value per column (else per row).
    pub const BIAS_PER_COLUMN: u32 = 1 << 9;
    /// There are scales.
    pub const HAS_SCALE: u32 = 1 << 10;
    /// The scales have one value per column (else per row).
    pub const SCALE_PER_COLUMN: u32 = 1 << 11;

    /// No epilogue: `D = alpha * acc + beta * C`.
    pub const NONE: Self = Self {
        bias: 0,
        scale: 0,
        flags: 0,
        reserved: 0,
    };

    /// An epilogue of `activation`, with a bias and scales at device
    /// addresses, each along a dimension of C.
    pub const fn new(
        activation: Activation,
        bias: Option<(u64, Per)>,
        scale: Option<(u64, Per)>,
    ) -> Self {
        let mut p = Self {
            flags: activation as u32,
            ..Self::NONE
        };
        if let Some((address, per)) = bias {
            p.bias = address;
            p.flags |= Self::HAS_BIAS;
            if matches!(per, Per::Column) {
                p.flags |= Self::BIAS_PER_COLUMN;
            }
        }
        if let Some((address, per)) = scale {
            p.scale = address;
            p.flags |= Self::HAS_SCALE;
            if matches!(per, Per::Column) {
                p.flags |= Self::SCALE_PER_COLUMN;
            }
        }
        p
    }

    /// Whether this is no epilogue at all.
    pub const fn is_plain(self) -> bool {
        self.flags == 0
    }

    /// The activation these flags name (`None` for an unknown code).
    pub const fn activation(self) -> Activation {
        match self.flags & Self::ACTIVATION {
            1 => Activation::Relu,
            2 => Activation::GeluTanh,
            3 => Activation::GeluErf,
            4 => Activation::Silu,
            _ => Activation::None,
        }
    }

    /// The bias's dimension, if there is a bias.
    pub const fn bias_per(self) -> Option<Per> {
        Self::per(self.flags, Self::HAS_BIAS, Self::BIAS_PER_COLUMN)
    }

    /// The scales' dimension, if there are scales.
    pub const fn scale_per(self) -> Option<Per> {
        Self::per(self.flags, Self::HAS_SCALE, Self::SCALE_PER_COLUMN)
    }

    const fn per(flags: u32, has: u32, column: u32) -> Option<Per> {
        if flags & has == 0 {
            None
        } else if flags & column != 0 {
            Some(Per::Column)
        } else {
            Some(Per::Row)
        }
    }

    /// The same epilogue for the transposed product (`C^T = B^T A^T`, how
    /// a column-major call runs): rows and columns swap.
    pub const fn transposed(self) -> Self {
        let mut p = self;
        let swap = Self::BIAS_PER_COLUMN | Self::SCALE_PER_COLUMN;
        let mut flip = 0;
        if self.flags & Self::HAS_BIAS != 0 {
            flip |= Self::BIAS_PER_COLUMN;
        }
        if self.flags & Self::HAS_SCALE != 0 {
            flip |= Self::SCALE_PER_COLUMN;
        }
        p.flags = (self.flags & !swap) | ((self.flags & swap) ^ flip);
        p
    }
}

/// The epilogue as a kernel body reads it: the flags of
/// [`EpilogueParams`], and the bias and the scales, views of global
/// memory made where they are read ([`Self::bias`], [`Self::scale`]). On
/// the GPU it is the entry's parameter, kept as plain addresses: a view
/// made at the entry is a converted pointer (`cvta.to.global`) that
/// stays in registers through the main loop, and those four registers
/// made step 10's largest tile spill. On the emulator it holds the
/// launch's views (`emu::run_fused`).
#[derive(Clone, Copy, Debug)]
pub struct Epilogue {
    #[cfg(target_arch = "nvptx64")]
    params: EpilogueParams,
    #[cfg(not(target_arch = "nvptx64"))]
    views: [Option<GlobalIn<f32>>; 2],
    pub flags: u32,
}

impl Epilogue {
    /// No epilogue.
    #[cfg(not(target_arch = "nvptx64"))]
    pub const NONE: Self = Self {
        views: [None, None],
        flags: 0,
    };

    /// An entry's epilogue.
    ///
    /// # Safety
    /// Where `p.flags` says there is a bias or scales, their addresses
    /// hold `m` (per row) or `n` (per column) f32s for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_params(p: EpilogueParams) -> Self {
        Self {
            params: p,
            flags: p.flags,
        }
    }

    /// An emulated launch's epilogue: its views of the bias and the
    /// scales, and the flags that describe them.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(
        bias: Option<GlobalIn<f32>>,
        scale: Option<GlobalIn<f32>>,
        flags: u32,
    ) -> Self {
        Self {
            views: [bias, scale],
            flags,
        }
    }

    /// The bias, if there is one.
    #[inline(always)]
    pub fn bias(self) -> Option<GlobalIn<f32>> {
        self.view(0, EpilogueParams::HAS_BIAS)
    }

    /// The scales, if there are.
    #[inline(always)]
    pub fn scale(self) -> Option<GlobalIn<f32>> {
        self.view(1, EpilogueParams::HAS_SCALE)
    }

    #[inline(always)]
    fn view(self, which: usize, has: u32) -> Option<GlobalIn<f32>> {
        if self.flags & has == 0 {
            return None;
        }
        #[cfg(target_arch = "nvptx64")]
        {
            let address = if which == 0 {
                self.params.bias
            } else {
                self.params.scale
            };
            // SAFETY: the flags say the address holds the vector, live for
            // the launch (the contract of `from_params`); read only.
            Some(unsafe { GlobalIn::from_raw(address as *const f32) })
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            self.views[which]
        }
    }

    /// Value `(row, col)` of the vector `v` (along the dimension `column`
    /// says), `none` without one. The index is clamped to the vector (a
    /// TMA store also computes the clipped elements outside C, which the
    /// copy engine drops).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn at(
        v: Option<GlobalIn<f32>>,
        column: bool,
        (row, col): (usize, usize),
        (m, n): (usize, usize),
        none: f32,
    ) -> f32 {
        match v {
            Some(v) => {
                let i = if column {
                    col.min(n - 1)
                } else {
                    row.min(m - 1)
                };
                // SAFETY: i is below the vector's length (m or n, both at
                // least 1: the contract of the views).
                unsafe { v.read(i) }
            }
            None => none,
        }
    }
}

/// `act(x)` in f32, as the kernels compute it. `activation` is uniform
/// over the launch, so each branch costs a warp no divergence; the code
/// is in each kernel once (the fused pass's rolled loop). Every
/// activation but ReLU is `x * g(x)`:
///
/// - SiLU: `g = sigmoid(x)`; GELU (tanh): `g = sigmoid(z)` with `z = x
///   (1.5957691 + 0.0713548 x^2)` (`(1 + tanh(u)) / 2 = sigmoid(2u)`);
///   both `1 / (1 + exp(-z))`;
/// - GELU (erf): `g = Phi(x)` by Abramowitz and Stegun's 7.1.26 for
///   `erfc(|x| / sqrt 2) = t P(t) exp(-x^2 / 2)` with `t = 1 / (1 + p |x|
///   / sqrt 2)` (absolute error below 1.5e-7).
///
/// `exp` is `ex2.approx` (2 ulp) and the reciprocal `rcp.approx` (1 ulp)
/// on the GPU, one MUFU instruction each. (`tanh.approx` saves one for
/// GELU's tanh form and SiLU but errs by 2^-11, too much for an f32 C:
/// [`activate_for`] takes it for a 16-bit C.)
#[inline(always)]
pub fn activate(activation: u32, x: f32) -> f32 {
    use crate::device::math::{exp2, recip};
    const LOG2_E: f32 = core::f32::consts::LOG2_E;
    if activation == Activation::None as u32 {
        x
    } else if activation == Activation::Relu as u32 {
        if x < 0.0 { 0.0 } else { x }
    } else if activation == Activation::GeluErf as u32 {
        let y = x.abs() * core::f32::consts::FRAC_1_SQRT_2;
        let e = exp2(-(y * y) * LOG2_E);
        let t = recip(fma(0.327_591_1, y, 1.0));
        let poly = t * fma(
            t,
            fma(
                t,
                fma(t, fma(t, 1.061_405_4, -1.453_152), 1.421_413_8),
                -0.284_496_74,
            ),
            0.254_829_6,
        );
        // erfc(|x| / sqrt 2) / 2 = P(X < -|x|).
        let tail = 0.5 * poly * e;
        x * if x < 0.0 { tail } else { 1.0 - tail }
    } else {
        let z = if activation == Activation::GeluTanh as u32 {
            x * fma(0.071_354_816, x * x, 1.595_769_2)
        } else {
            x
        };
        x * recip(1.0 + exp2(-z * LOG2_E))
    }
}

/// [`activate`] for a value a 16-bit C will hold (`COARSE`; otherwise
/// `activate` itself): GELU (tanh) and SiLU through one `tanh`, where
/// `activate` takes two MUFU instructions: `x sigmoid(2u) = x / 2 (1 +
/// tanh(u))`, with `u` GELU's `sqrt(2 / pi) (x + 0.044715 x^3)` or SiLU's
/// `x / 2`. `tanh.approx` errs by at most
/// [`TANH_APPROX_ERROR`](crate::device::math::TANH_APPROX_ERROR) of
/// `tanh`, so the result by half that of `|x|`: about half a 16-bit C's
/// own rounding for FP16 (`2^-11`), far less for BF16 (`2^-8`).
#[inline(always)]
pub fn activate_for<const COARSE: bool>(activation: u32, x: f32) -> f32 {
    let gelu = activation == Activation::GeluTanh as u32;
    if COARSE && (gelu || activation == Activation::Silu as u32) {
        let u = if gelu {
            x * fma(0.035_677_407, x * x, 0.797_884_6)
        } else {
            0.5 * x
        };
        let half = 0.5 * x;
        fma(half, crate::device::math::tanh(u), half)
    } else {
        activate(activation, x)
    }
}

/// The epilogue, one place for every kernel and every stored type of C:
/// `C[idx] = alpha * acc + beta * C[idx]`, computed in f32 and stored in
/// C's type (rounded to nearest for a 16-bit C). With `beta == 0` C is not
/// read (as in BLAS: whatever C held, NaN included, does not reach the
/// result), so a kernel pays for the read only when the caller asks for
/// it. The test is uniform across the launch.
impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    #[inline(always)]
    fn blend<const W: usize>(self, acc: [f32; W], old: impl FnOnce() -> [f32; W]) -> [f32; W] {
        let mut out = [0.0f32; W];
        if self.beta == 0.0 {
            crate::unroll::unroll!(W; 4, |i| { out[i] = self.alpha * acc[i] });
        } else {
            let old = old();
            crate::unroll::unroll!(W; 4, |i| {
                out[i] = crate::device::fma(self.beta, old[i], self.alpha * acc[i])
            });
        }
        out
    }
}

/// The epilogue of an f32 C: scalar, 64-bit and 128-bit stores.
impl<A: Element, B: Element> Gemm<A, B, f32> {
    /// `C[idx] = alpha * acc + beta * C[idx]`.
    ///
    /// # Safety
    /// `idx` is that of an element of C (`row < m`, `col < n`) that no
    /// other thread of the launch writes.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_c(self, idx: usize, acc: f32) {
        // SAFETY: inside C, this thread's own element (the contract).
        let [v] = self.blend([acc], || [unsafe { self.c.read(idx) }]);
        // SAFETY: as above.
        unsafe { self.c.write(idx, v) };
    }

    /// `C[idx]` as it is, for [`Self::store_c_over`]: a kernel that
    /// stores many values reads all the old ones it blends first, then
    /// stores (`beta != 0` only). Read and stored in pairs, each read
    /// waits for the store before it, which the compiler cannot prove
    /// lands elsewhere (rows `ldc` apart), so every pair costs a trip to
    /// memory (step 10: docs/measurements.md, forty-third session).
    ///
    /// # Safety
    /// `idx` is that of an element of C.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn old_c(self, idx: usize) -> f32 {
        // SAFETY: inside C (the contract).
        unsafe { self.c.read(idx) }
    }

    /// [`Self::old_c`] for `C[idx..idx + 4]` as one 128-bit access.
    ///
    /// # Safety
    /// As [`Self::store_c4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn old_c4(self, idx: usize) -> [f32; 4] {
        // SAFETY: inside C and aligned (the contract).
        unsafe { self.c.read4(idx) }
    }

    /// [`Self::store_c`] with `C[idx]`'s old value `old` read before
    /// ([`Self::old_c`]; not used when `beta == 0`).
    ///
    /// # Safety
    /// As [`Self::store_c`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_c_over(self, idx: usize, acc: f32, old: f32) {
        let [v] = self.blend([acc], || [old]);
        // SAFETY: inside C, this thread's own element (the contract).
        unsafe { self.c.write(idx, v) };
    }

    /// [`Self::store_c4`] with the old values `old` read before
    /// ([`Self::old_c4`]; not used when `beta == 0`).
    ///
    /// # Safety
    /// As [`Self::store_c4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_c4_over(self, idx: usize, acc: [f32; 4], old: [f32; 4]) {
        let v = self.blend(acc, || old);
        // SAFETY: inside C, aligned, this thread's own elements.
        unsafe { self.c.write4(idx, v) };
    }

    /// [`Self::store_c`] for `C[idx..idx + 2]` as 64-bit accesses.
    ///
    /// # Safety
    /// As [`Self::store_c`] for both elements, `idx % 2 == 0` and
    /// [`Gemm::vec2_c`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_c2(self, idx: usize, acc: [f32; 2]) {
        // SAFETY: inside C, aligned, this thread's own elements.
        let v = self.blend(acc, || unsafe { self.c.read2(idx) });
        // SAFETY: as above.
        unsafe { self.c.write2(idx, v) };
    }

    /// [`Self::store_c`] for `C[idx..idx + 4]` as 128-bit accesses.
    ///
    /// # Safety
    /// As [`Self::store_c`] for all four elements, `idx % 4 == 0` and
    /// C 16-byte aligned with `ldc % 4 == 0` ([`Gemm::vec4`], or
    /// [`Gemm::vec4_c`], which asks only that of C).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_c4(self, idx: usize, acc: [f32; 4]) {
        // SAFETY: inside C, aligned, this thread's own elements.
        let v = self.blend(acc, || unsafe { self.c.read4(idx) });
        // SAFETY: as above.
        unsafe { self.c.write4(idx, v) };
    }
}

/// A stored type of C that the epilogue writes, for kernels generic over
/// it (steps 19-20): the scalar and paired stores of
/// `alpha * acc + beta * C`. f32 pairs are 64-bit accesses; 16-bit pairs
/// are 32-bit ones, each value rounded to nearest.
pub trait Output: Element {
    /// `C[idx] = alpha * acc + beta * C[idx]` in C's type.
    ///
    /// # Safety
    /// As [`Gemm::store_c`].
    unsafe fn store<A: Element, B: Element>(g: Gemm<A, B, Self>, idx: usize, acc: f32);
    /// The same for `C[idx..idx + 2]` as one access.
    ///
    /// # Safety
    /// As [`Self::store`] for both elements, `idx % 2 == 0` and
    /// [`Self::pairs`].
    unsafe fn store2<A: Element, B: Element>(g: Gemm<A, B, Self>, idx: usize, acc: [f32; 2]);
    /// C starts and its rows run on boundaries of a pair (`ldc` even):
    /// [`Self::store2`] may be used.
    fn pairs<A: Element, B: Element>(g: Gemm<A, B, Self>) -> bool;
    /// `C[idx]` in f32 (the fused pass reads back what was stored).
    ///
    /// # Safety
    /// `idx` is that of an element of C.
    unsafe fn read_one<A: Element, B: Element>(g: Gemm<A, B, Self>, idx: usize) -> f32 {
        // SAFETY: forwarded from the caller's contract.
        unsafe { g.c.read(idx) }.to_f32()
    }
    /// `C[idx] = v` rounded to C's type, over a value the block stored
    /// (the fused pass: `GlobalOut::rewrite`).
    ///
    /// # Safety
    /// `idx` is that of an element of C that no other thread writes
    /// after the barrier that ordered the first store before this one.
    unsafe fn write_one<A: Element, B: Element>(g: Gemm<A, B, Self>, idx: usize, v: f32) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { g.c.rewrite(idx, Self::from_f32(v)) }
    }
}

impl Output for f32 {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store<A: Element, B: Element>(g: Gemm<A, B, f32>, idx: usize, acc: f32) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { g.store_c(idx, acc) }
    }
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    unsafe fn store2<A: Element, B: Element>(g: Gemm<A, B, f32>, idx: usize, acc: [f32; 2]) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { g.store_c2(idx, acc) }
    }
    #[inline(always)]
    fn pairs<A: Element, B: Element>(g: Gemm<A, B, f32>) -> bool {
        g.vec2_c()
    }
}

/// The epilogue of a warp's `mma.sync` accumulators (step 21; step 11's
/// f32 loop is the same code, kept in its file because this one, inlined
/// there, changes its PTX's register numbering):
/// `acc[mi][ni]` is the m16 x n8 tile at rows `row0 + 16 mi`, columns
/// `col0 + 8 ni` of C, lane `(g, t)` = `(lane / 4, lane % 4)` holding
/// `C[g][2t..2t + 2]` and `C[g + 8][2t..2t + 2]` of it
/// (`crate::device::mma`). One pair store where the pair is inside C and
/// C's rows allow it ([`Output::pairs`]), else one value at a time;
/// nothing outside C.
///
/// # Safety
/// No other thread writes these elements of C (each lane of each warp
/// owns its own), and C spans at most [`MAX_ELEMS`] elements.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_mma_tiles<
    A: Element,
    B: Element,
    C: Output,
    const MI: usize,
    const NI: usize,
>(
    g: Gemm<A, B, C>,
    acc: &[[[f32; 4]; NI]; MI],
    (row0, col0): (usize, usize),
    lane: usize,
) {
    let (group, quad) = (lane / 4, lane % 4);
    let pairs = C::pairs(g);
    crate::unroll::unroll!(MI; 4, |mi| {
        crate::unroll::unroll!(NI; 8, |ni| {
            let col = col0 + ni * 8 + 2 * quad;
            crate::unroll::unroll!(2; 2, |half| {
                let row = row0 + mi * 16 + group + 8 * half;
                let pair = [acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1]];
                if row < g.m {
                    if pairs && col + 1 < g.n {
                        // SAFETY: row < m and col + 1 < n; col is even and
                        // so is ldc (pairs), so the index is; one owner.
                        unsafe { C::store2(g, row * g.ldc + col, pair) };
                    } else {
                        crate::unroll::unroll!(2; 2, |j| {
                            if col + j < g.n {
                                // SAFETY: row < m, col + j < n; one owner.
                                unsafe { C::store(g, row * g.ldc + col + j, pair[j]) };
                            }
                        });
                    }
                }
            });
        });
    });
}

/// [`Output`] for a 16-bit C: reads and writes through the pair accesses
/// of `GlobalOut`, values rounded to nearest by `Element::from_f32`.
macro_rules! output_16 {
    ($t:ty) => {
        impl Output for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn store<A: Element, B: Element>(g: Gemm<A, B, $t>, idx: usize, acc: f32) {
                // SAFETY: inside C, this thread's own element (the contract).
                let [v] = g.blend([acc], || [unsafe { g.c.read(idx) }.to_f32()]);
                // SAFETY: as above.
                unsafe { g.c.write(idx, <$t>::from_f32(v)) };
            }
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            unsafe fn store2<A: Element, B: Element>(g: Gemm<A, B, $t>, idx: usize, acc: [f32; 2]) {
                // SAFETY: inside C, 4-byte aligned, this thread's own elements.
                let v = g.blend(acc, || unsafe { g.c.read_pair(idx) }.map(<$t>::to_f32));
                // SAFETY: as above.
                unsafe { g.c.write_pair(idx, v.map(<$t>::from_f32)) };
            }
            #[inline(always)]
            fn pairs<A: Element, B: Element>(g: Gemm<A, B, $t>) -> bool {
                g.c.aligned(4) && g.ldc.is_multiple_of(2)
            }
        }
    };
}
output_16!(crate::elem::Bf16);
output_16!(crate::elem::F16);

impl<A: Element, B: Element, C: Output> Gemm<A, B, C> {
    /// The scale and the bias of element `(row, col)` of C: `(s, bias)`,
    /// `(1, 0)` without them.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn operands(self, (row, col): (usize, usize)) -> (f32, f32) {
        let ep = self.ep;
        let dims = (self.m, self.n);
        let column = |per: u32| ep.flags & per != 0;
        (
            Epilogue::at(
                ep.scale(),
                column(EpilogueParams::SCALE_PER_COLUMN),
                (row, col),
                dims,
                1.0,
            ),
            Epilogue::at(
                ep.bias(),
                column(EpilogueParams::BIAS_PER_COLUMN),
                (row, col),
                dims,
                0.0,
            ),
        )
    }

    /// `act(s * x + bias)`: the fused part of the epilogue, for a stored
    /// value `x` and its element's [`Self::operands`].
    #[inline(always)]
    pub fn fused(self, (s, bias): (f32, f32), x: f32) -> f32 {
        let act = self.ep.flags & EpilogueParams::ACTIVATION;
        let x = fma(s, x, bias);
        if C::ELEM.bytes() == 2 {
            activate_for::<true>(act, x)
        } else {
            activate_for::<false>(act, x)
        }
    }

    /// The fused pass over a rectangle of C that this thread's group
    /// (`id` of `count` threads) has just stored, `rows` x `cols` from
    /// `(row0, col0)` (clipped to C): each element `X` becomes `act(s * X
    /// + bias)` ([`Self::fused`]), in one rolled loop. Consecutive ids
    /// take consecutive columns, so a warp reads and writes whole
    /// sectors where the rectangle's rows allow. Each trip handles [`PASS`]
    /// elements of the thread, their loads (the value, the scale, the
    /// bias) issued before any is used, so that a trip waits for L2 once,
    /// not once per element (docs/measurements.md, twenty-second session,
    /// has what that bought). Only for `self.ep.flags != 0`.
    ///
    /// # Safety
    /// The rectangle's elements inside C are the group's alone, all
    /// stored before a barrier of the group that precedes this call.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn fuse_region(
        self,
        (row0, col0): (usize, usize),
        (rows, cols): (usize, usize),
        id: usize,
        count: usize,
    ) {
        let rows = rows.min(self.m.saturating_sub(row0));
        let cols = cols.min(self.n.saturating_sub(col0));
        if cols == 0 {
            return;
        }
        // One division, then the position advances by adds.
        let (mut r, mut c) = (id / cols, id % cols);
        while r < rows {
            let mut at = [None; PASS];
            crate::unroll::unroll!(PASS; 4, |u| {
                if r < rows {
                    at[u] = Some((row0 + r, col0 + c));
                }
                c += count;
                while c >= cols {
                    c -= cols;
                    r += 1;
                }
            });
            let mut x = [0.0f32; PASS];
            let mut ops = [(1.0f32, 0.0f32); PASS];
            crate::unroll::unroll!(PASS; 4, |u| {
                if let Some((row, col)) = at[u] {
                    // SAFETY: row < m and col < n (clipped), the group's
                    // element, stored before the barrier (the contract).
                    x[u] = unsafe { C::read_one(self, row * self.ldc + col) };
                    ops[u] = self.operands((row, col));
                }
            });
            crate::unroll::unroll!(PASS; 4, |u| {
                if let Some((row, col)) = at[u] {
                    // SAFETY: as above; no other thread writes it now.
                    unsafe { C::write_one(self, row * self.ldc + col, self.fused(ops[u], x[u])) };
                }
            });
        }
    }

    /// The fused pass of a block whose `threads` threads all store (one
    /// role: steps 6-11, 21, 23, 27), called by every thread after its
    /// stores of the block's `bm` x `bn` tile at `(row0, col0)`: when the
    /// launch has a fused epilogue, the block meets at a barrier (which
    /// orders its global stores before the reads) and shares the tile,
    /// thread by thread along its rows. Nothing for a plain launch.
    ///
    /// # Safety
    /// Every thread of the block calls it (a barrier), the tile's
    /// elements of C are the block's alone and all stored before the call.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn fuse_block(
        self,
        (row0, col0): (usize, usize),
        (bm, bn): (usize, usize),
        threads: usize,
    ) {
        if self.ep.flags != 0 {
            crate::device::sync_threads();
            // SAFETY: the block's own tile, stored before the barrier.
            unsafe {
                self.fuse_region(
                    (row0, col0),
                    (bm, bn),
                    crate::device::thread_idx_x(),
                    threads,
                )
            };
        }
    }

    /// The fused pass of a warp over its own `rows` x `cols` of C at
    /// `(row0, col0)` (the warp-tiled `wgmma` steps, whose producer
    /// warps never store), after its stores: `bar.warp.sync`, which
    /// orders the lanes' global stores before the reads, then the
    /// rectangle lane by lane along its rows.
    ///
    /// # Safety
    /// All 32 lanes call it, and the rectangle's elements inside C are the
    /// warp's alone, stored before the call.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn fuse_warp(
        self,
        (row0, col0): (usize, usize),
        (rows, cols): (usize, usize),
        lane: usize,
    ) {
        if self.ep.flags != 0 {
            crate::device::barrier::sync_warp();
            // SAFETY: the warp's own rectangle, stored before the barrier.
            unsafe { self.fuse_region((row0, col0), (rows, cols), lane, 32) };
        }
    }

    /// The scale and the bias of C's row `row` or column `col` (`column`
    /// says which) from those vectors that run along that dimension,
    /// `(1, 0)` for the others and for absent ones: `operands((row, col))`
    /// is the row's and the column's combined ([`Self::combined`]).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn operands_along(self, column: bool, at: (usize, usize)) -> (f32, f32) {
        let ep = self.ep;
        let dims = (self.m, self.n);
        let here = |per: u32| (ep.flags & per != 0) == column;
        (
            if here(EpilogueParams::SCALE_PER_COLUMN) {
                Epilogue::at(ep.scale(), column, at, dims, 1.0)
            } else {
                1.0
            },
            if here(EpilogueParams::BIAS_PER_COLUMN) {
                Epilogue::at(ep.bias(), column, at, dims, 0.0)
            } else {
                0.0
            },
        )
    }

    /// An element's operands from its row's and its column's
    /// ([`Self::operands_along`]): each vector runs along one of the two,
    /// so the product and the sum are exact.
    #[inline(always)]
    pub fn combined(row: (f32, f32), column: (f32, f32)) -> (f32, f32) {
        (row.0 * column.0, row.1 + column.1)
    }

    /// The fused part applied in registers to `N` values before they are
    /// stored (the `wgmma` fragments of steps 20, 22, 25 and 26 on their
    /// way to a TMA staging box): `act(s * x[i] + bias)` with `(s, bias)
    /// = ops(i)`, for the activation `ACT` (an [`Activation`] as `u32`),
    /// fixed at compile time: the caller chooses it once, outside its loop
    /// ([`crate::k22_wgmma_tma_store`]'s one copy of the loop per
    /// activation), so the values go through straight-line code. Chosen
    /// here per call, the compiler made it a jump table per element.
    #[inline(always)]
    pub fn fuse_values<const ACT: u32, const N: usize>(
        self,
        x: [f32; N],
        ops: impl Fn(usize) -> (f32, f32),
    ) -> [f32; N] {
        let mut y = [0.0f32; N];
        crate::unroll::unroll!(N; 16, |i| {
            let (s, bias) = ops(i);
            let x = fma(s, x[i], bias);
            y[i] = if C::ELEM.bytes() == 2 { activate_for::<true>(ACT, x) } else { activate_for::<false>(ACT, x) };
        });
        y
    }
}

/// Elements a thread of the fused pass handles per trip, their loads
/// issued together.
pub const PASS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels' f32 activations stay within 2e-6 of the f64
    /// definitions (relative to `max(|x|, 1)`), over [-12, 12].
    #[test]
    fn activations_match_their_definitions() {
        for act in Activation::ALL {
            let mut worst = 0.0f64;
            for i in -12_000..=12_000 {
                let x = i as f32 / 1000.0;
                let got = activate(act as u32, x) as f64;
                let want = act.reference(x as f64);
                worst = worst.max((got - want).abs() / (x.abs() as f64).max(1.0));
            }
            assert!(worst < 2e-6, "{act:?}: {worst:e}");
        }
        // The 16-bit C's forms are the same functions (on the host, whose
        // tanh is f32's; the GPU's approximation is in the verification's
        // bound).
        for act in Activation::ALL {
            for i in -12_000..=12_000 {
                let x = i as f32 / 1000.0;
                let (got, want) = (activate_for::<true>(act as u32, x), activate(act as u32, x));
                assert!(
                    (got - want).abs() <= 1e-6 * x.abs().max(1.0),
                    "{act:?} at {x}: {got} {want}"
                );
            }
        }
        assert_eq!(
            activate_for::<true>(Activation::GeluTanh as u32, -200.0),
            0.0
        );
        assert_eq!(activate_for::<true>(Activation::Silu as u32, 200.0), 200.0);
        assert!(activate_for::<true>(Activation::Silu as u32, f32::NAN).is_nan());
        assert!(activate(Activation::Relu as u32, f32::NAN).is_nan());
        assert_eq!(activate(Activation::GeluErf as u32, -200.0), 0.0);
        assert_eq!(activate(Activation::Silu as u32, 200.0), 200.0);
    }

    /// The f64 erfc agrees with known values (A and S table 7.1).
    #[test]
    fn erfc_matches_the_table() {
        for (y, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 0.004_677_734_981_047_266),
            (3.0, 2.209_049_699_858_544e-5),
            (-1.0, 1.842_700_792_949_715),
        ] {
            let got = erfc64(y);
            assert!(
                (got - want).abs() <= 1e-12 * want.abs(),
                "{y}: {got} vs {want}"
            );
        }
    }

    /// Flags round-trip, and the transpose swaps rows and columns of what
    /// is there only.
    #[test]
    fn params_carry_the_epilogue_and_transpose() {
        let p = EpilogueParams::new(Activation::GeluTanh, Some((64, Per::Row)), None);
        assert_eq!(p.activation(), Activation::GeluTanh);
        assert_eq!((p.bias_per(), p.scale_per()), (Some(Per::Row), None));
        let t = p.transposed();
        assert_eq!((t.bias_per(), t.scale_per()), (Some(Per::Column), None));
        assert_eq!(t.transposed(), p);
        let q = EpilogueParams::new(
            Activation::None,
            Some((8, Per::Column)),
            Some((16, Per::Row)),
        );
        let t = q.transposed();
        assert_eq!(
            (t.bias_per(), t.scale_per()),
            (Some(Per::Row), Some(Per::Column))
        );
        assert!(EpilogueParams::NONE.is_plain() && EpilogueParams::NONE.transposed().is_plain());
        assert!(!EpilogueParams::new(Activation::Relu, None, None).is_plain());
    }
}
