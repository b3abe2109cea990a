//! The independent reference: C = A * B on the CPU in f64, and the check of
//! a GPU result against it.
//!
//! Small problems are computed in full (matrixmultiply's dgemm). Large ones
//! are checked on a random sample of elements, each an f64 dot product, plus
//! the corners and elements along the last row and column, where edge bugs
//! live. Every element of C is also checked to be finite, so an element a
//! kernel never wrote (C is poisoned with NaN before the launch) fails.
//!
//! The error of one element is `|c - ref| / sum_k |a_ik * b_kj|`: the
//! quantity rounding-error bounds are stated in, and well defined where
//! `ref` is close to zero. The tolerance depends on the kernel's element
//! types ([`tolerance`]): the inputs are the values A and B hold in their
//! stored types, so the reference multiplies exactly what the GPU reads.

use crate::shape::Shape;
use kernels_gpu::elem::{Elem, Elems, Math};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rust_gemm::blas::{Activation, EmuEpilogue, Per};
use serde::Serialize;

/// Largest scaled error accepted for FP32 kernels. f32 accumulation of K
/// terms stays near 1e-7 in this measure for random data; a dropped or
/// doubled term at K = 8192 costs at least ~1e-4.
pub const TOLERANCE: f64 = 1e-5;

/// Largest relative error of one f32 converted to TF32 (10 stored
/// mantissa bits): `2^-11` when rounded to nearest (`cvt.rna`, what steps
/// 11-13 do to the operands they load into registers), `2^-10` when the
/// low bits are dropped, which is what `wgmma` does to an operand it reads
/// from shared memory (PTX ISA: it "will truncate lower 13 bits"; steps 12
/// and 13 read A that way). The bound takes the larger.
pub const TF32_UNIT_ROUNDOFF: f64 = 1.0 / 1024.0;

/// Largest relative error of a factor the tensor cores take in a format
/// narrower than its stored one (an f32 read as TF32), and 0 where the
/// stored type is what they multiply (BF16 and FP16 read as they are).
/// TF32: [`TF32_UNIT_ROUNDOFF`] (truncation, the larger of the two
/// conversions the kernels meet).
fn factor_roundoff(stored: Elem, math: Math) -> f64 {
    if stored.precision_bits() <= math.precision_bits() {
        0.0
    } else if math == Math::Tf32 {
        TF32_UNIT_ROUNDOFF
    } else {
        // Truncation to `p` significant bits: 2^(1 - p).
        2f64.powi(1 - math.precision_bits())
    }
}

/// Largest scaled error accepted for a kernel of element types `elems`
/// with `k` terms per element of C.
///
/// FP32 math on f32 (the FMA pipe): [`TOLERANCE`]. So is 3xTF32's
/// (step 23), whose claim is FP32's accuracy: it is checked as an FP32
/// kernel is, not with a TF32 bound. (Its products lose the dropped
/// `small * small` term and the remainders' own rounding, at most about
/// `3 * 2^-22` of `|a * b|` each, below f32 accumulation's error at any K
/// past a few terms.)
///
/// Tensor-core math, derived as a worst-case bound (so a correct kernel
/// never fails it). Each factor that the tensor cores take in a format
/// narrower than its stored one carries a relative error of at most `u_a`
/// (A) and `u_b` (B) ([`factor_roundoff`]: TF32 from f32, `u = 2^-10`;
/// 0 for BF16 and FP16 stored as such), so each product `a * b` one of at
/// most `u_a + u_b + u_a u_b`; the products are exact in f32 (11 x 11
/// significant bits at most), and their sum of `k` terms is accumulated in
/// f32. NVIDIA's tensor cores truncate in their internal additions (Fasi,
/// Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor
/// cores", 2021), so take the f32 unit roundoff of truncation, `v = 2^-23`,
/// and the classical bound `gamma_k = k v / (1 - k v)` on a sum of `k`
/// terms. With `S = sum |a * b|`:
///
/// `|acc - ref| <= (u_a + u_b + u_a u_b) S + gamma_k (1 + u_a)(1 + u_b) S`
///
/// TF32 (`u_a = u_b = u`): at most `2u + u^2 + gamma_k (1 + u)^2`, 1.95e-3
/// plus 1.2e-7 per unit of k (2.44e-3 at k = 4096). BF16 and FP16 stored
/// as such: `gamma_k (1 + 0)`, 4.9e-4 at k = 4096.
///
/// Then C: an accumulator stored in a narrower type than its own (C in
/// BF16 or FP16) is rounded to nearest once, a relative error of at most
/// that type's unit roundoff `u_c` (2^-8, 2^-11) of `|acc| <= S (1 +
/// e)`, where `e` is the bound above: the bound becomes `e + u_c (1 + e)`.
/// Real errors are far smaller (rounding errors of random sign cancel),
/// which is why the bench also shows each tensor-core kernel's error next
/// to cuBLAS's on the same inputs; a wrong index or a missing tile is
/// still far above the bound.
pub fn tolerance(elems: Elems, k: usize) -> f64 {
    let accumulated = if matches!(elems.math, Math::Fp32 | Math::Tf32x3) {
        TOLERANCE
    } else if elems.math == Math::Fp8 {
        fp8_accumulation(k, elems.promote_every as usize)
    } else {
        let (ua, ub) = (
            factor_roundoff(elems.a, elems.math),
            factor_roundoff(elems.b, elems.math),
        );
        let v = 2f64.powi(-23);
        let kv = k as f64 * v;
        // Beyond k = 2^23 the classical bound says nothing.
        let gamma = if kv < 1.0 { kv / (1.0 - kv) } else { 1.0 };
        ua + ub + ua * ub + gamma * (1.0 + ua) * (1.0 + ub)
    };
    if elems.c.precision_bits() < elems.acc.precision_bits() {
        let uc = elems.c.unit_roundoff();
        accumulated + uc * (1.0 + accumulated)
    } else {
        accumulated
    }
}
/// The accumulation bound of an FP8 kernel, relative to `S = sum |a *
/// b|` of the dequantized values (the stored ones times their scales).
/// The products are exact (4 x 4 significant bits at most), but Hopper's
/// FP8 tensor cores add each `wgmma` k-step's 32 products into the
/// accumulator keeping about 13 fraction bits, not f32's 23 (DeepSeek-V3's
/// report, section 3.3.2, measured "around 14 bits"; we take 13,
/// truncated: `v = 2^-13`). Counting each k-step's addition as one
/// rounding of at most `v` relative to the magnitudes it adds, `n` of them
/// give `gamma_n = n v / (1 - n v)`.
///
/// - Without promotion (step 25: `promote_every` 0) the tensor cores sum
///   all of K: `n = ceil(k / 32)`, 1.6e-2 at k = 4096, 6.7e-2 at 16384.
/// - Promoted every `p` of K (step 26: 128), each partial sum spans at
///   most `p`: `n = ceil(min(k, p) / 32)` (4.9e-4 for 128), and the `b =
///   ceil(k / p)` promotions (an f32 multiply by the block's scale and an
///   add, each rounded to nearest, `w = 2^-24`) add `gamma_{2b}` of `w`
///   (1.5e-5 at k = 16384): the bound hardly grows with K.
///
/// Real errors are far smaller; the bench compares them with cuBLASLt's
/// on the same inputs.
fn fp8_accumulation(k: usize, promote_every: usize) -> f64 {
    let gamma = |n: usize, v: f64| {
        let nv = n as f64 * v;
        if nv < 1.0 { nv / (1.0 - nv) } else { 1.0 }
    };
    let v = 2f64.powi(-13);
    if promote_every == 0 {
        return gamma(k.div_ceil(32), v);
    }
    let sums = gamma(k.min(promote_every).div_ceil(32), v);
    let promotions = gamma(2 * k.div_ceil(promote_every), 2f64.powi(-24));
    sums + promotions + sums * promotions
}

/// Problems up to this many multiply-adds get a full f64 product.
pub const FULL_LIMIT_MACS: f64 = (1u64 << 30) as f64;
/// Random elements checked when the problem is too large for a full product.
pub const RANDOM_SAMPLES: usize = 4096;
/// Elements checked along the last row and along the last column.
pub const EDGE_SAMPLES: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every element of C computed in f64.
    Full,
    /// A sample of elements computed in f64.
    Sampled,
}

/// Reference values for some (or all) elements of C.
pub struct Reference {
    shape: Shape,
    mode: Mode,
    /// `(index into C, reference value, sum of |a * b|)`.
    entries: Vec<(usize, f64, f64)>,
}

/// The element where a check went worst.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Worst {
    pub row: usize,
    pub col: usize,
    pub got: f32,
    pub want: f64,
}

/// The outcome of checking one GPU result.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    pub mode: Mode,
    /// Elements compared with the reference.
    pub checked: usize,
    /// Elements of C that are NaN or infinite (never written, or overflowed).
    pub nonfinite: usize,
    /// Largest `|c - ref| / sum |a * b|` over the checked elements.
    pub max_error: f64,
    pub worst: Option<Worst>,
    pub tolerance: f64,
    pub passed: bool,
}

impl Reference {
    /// The reference for `a * b`; `seed` picks the sample when one is used.
    pub fn new(shape: Shape, a: &[f32], b: &[f32], seed: u64) -> Self {
        match Self::mode_for(&shape) {
            Mode::Full => Self::full(shape, a, b),
            Mode::Sampled => Self::sampled(shape, a, b, seed),
        }
    }

    /// How [`Self::new`] checks a problem of `shape`: in full up to
    /// [`FULL_LIMIT_MACS`] multiply-adds, else on a sample.
    pub fn mode_for(shape: &Shape) -> Mode {
        let macs = shape.m as f64 * shape.n as f64 * shape.k as f64;
        if macs <= FULL_LIMIT_MACS {
            Mode::Full
        } else {
            Mode::Sampled
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn full(shape: Shape, a: &[f32], b: &[f32]) -> Self {
        let Shape { m, n, k } = shape;
        let a64: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let b64: Vec<f64> = b.iter().map(|&x| x as f64).collect();
        let abs_a: Vec<f64> = a64.iter().map(|x| x.abs()).collect();
        let abs_b: Vec<f64> = b64.iter().map(|x| x.abs()).collect();
        let mut c = vec![0.0f64; m * n];
        let mut scale = vec![0.0f64; m * n];
        // SAFETY: the pointers address m*k, k*n and m*n f64s laid out row-major
        // with the strides given (row stride = columns, column stride = 1).
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                a64.as_ptr(),
                k as isize,
                1,
                b64.as_ptr(),
                n as isize,
                1,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            );
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                abs_a.as_ptr(),
                k as isize,
                1,
                abs_b.as_ptr(),
                n as isize,
                1,
                0.0,
                scale.as_mut_ptr(),
                n as isize,
                1,
            );
        }
        let entries = c
            .into_iter()
            .zip(scale)
            .enumerate()
            .map(|(i, (v, s))| (i, v, s))
            .collect();
        Self {
            shape,
            mode: Mode::Full,
            entries,
        }
    }

    fn sampled(shape: Shape, a: &[f32], b: &[f32], seed: u64) -> Self {
        let Shape { m, n, k } = shape;
        let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(1));
        let mut cells: Vec<(usize, usize)> = (0..RANDOM_SAMPLES)
            .map(|_| (rng.random_range(0..m), rng.random_range(0..n)))
            .collect();
        cells.extend([(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)]);
        cells.extend((0..EDGE_SAMPLES).map(|i| (m - 1, i * (n - 1) / EDGE_SAMPLES)));
        cells.extend((0..EDGE_SAMPLES).map(|i| (i * (m - 1) / EDGE_SAMPLES, n - 1)));
        cells.sort_unstable();
        cells.dedup();
        let entries = cells
            .into_iter()
            .map(|(row, col)| {
                let (mut v, mut s) = (0.0f64, 0.0f64);
                for kk in 0..k {
                    let p = a[row * k + kk] as f64 * b[kk * n + col] as f64;
                    v += p;
                    s += p.abs();
                }
                (row * n + col, v, s)
            })
            .collect();
        Self {
            shape,
            mode: Mode::Sampled,
            entries,
        }
    }

    /// Checks a GPU result `c` (row-major, m x n, as f32) against the
    /// reference, for a kernel of element types `elems`.
    pub fn check(&self, c: &[f32], elems: Elems) -> Verification {
        self.check_scaled(c, elems, 1.0)
    }

    /// [`Self::check`] for a kernel whose C is `scale` times the product
    /// (an FP8 kernel's per-tensor scales): each reference value and its
    /// sum of magnitudes multiplied by `|scale|`.
    pub fn check_scaled(&self, c: &[f32], elems: Elems, scale: f64) -> Verification {
        self.check_fused(c, elems, scale, &EmuEpilogue::default())
    }

    /// [`Self::check_scaled`] for a kernel that applies `epilogue` (its
    /// activation, and its bias and scales along C's rows or columns):
    /// each element's `act(scale s ref + bias)` in f64, its error scaled
    /// by `(|scale s| sum |a * b| + |bias|)` times the activation's
    /// largest slope ([`with_epilogue`]), within [`fused_tolerance`].
    /// With no epilogue (the default) this is the plain check, unchanged.
    pub fn check_fused(
        &self,
        c: &[f32],
        elems: Elems,
        scale: f64,
        epilogue: &EmuEpilogue,
    ) -> Verification {
        let tolerance = fused_tolerance(elems, self.shape.k, epilogue);
        assert_eq!(
            c.len(),
            self.shape.m * self.shape.n,
            "C has the wrong length"
        );
        let nonfinite = c.iter().filter(|x| !x.is_finite()).count();
        let mut max_error = 0.0f64;
        let mut worst = None;
        for &(i, want, magnitude) in &self.entries {
            let (row, col) = (i / self.shape.n, i % self.shape.n);
            let s = scale * along(&epilogue.scale, (row, col), 1.0);
            let bias = along(&epilogue.bias, (row, col), 0.0);
            let expected =
                with_epilogue(epilogue.activation, (want * s, magnitude * s.abs()), bias);
            let got = c[i];
            // A NaN must never pass: treat it as an infinite error.
            let err = if got.is_finite() {
                expected.error(got)
            } else {
                f64::INFINITY
            };
            if err > max_error || worst.is_none() {
                max_error = max_error.max(err);
                worst = Some(Worst {
                    row,
                    col,
                    got,
                    want: expected.want,
                });
            }
        }
        Verification {
            mode: self.mode,
            checked: self.entries.len(),
            nonfinite,
            max_error,
            worst,
            tolerance,
            passed: nonfinite == 0 && max_error <= tolerance,
        }
    }
}

/// [`tolerance`] for a result with `epilogue`: a 16-bit C is rounded
/// once more, since the fused pass reads back the stored value
/// (`kernels_gpu::epilogue`), so one more `u_c` (relative to the same
/// scale: the activation's slope is in it, and `|act(x)| <= |x|`).
///
/// A 16-bit C's GELU (tanh) and SiLU go through `tanh.approx`
/// (`kernels_gpu::epilogue::activate_for`), which adds at most half its
/// relative error times `|x|`, the pre-activation value, which the scale
/// bounds.
pub fn fused_tolerance(elems: Elems, k: usize, epilogue: &EmuEpilogue) -> f64 {
    let coarse = elems.c.bytes() == 2;
    let once_more = if epilogue.params().is_plain() || !coarse {
        0.0
    } else {
        elems.c.unit_roundoff()
    };
    let tanh = if coarse && matches!(epilogue.activation, Activation::GeluTanh | Activation::Silu) {
        0.5 * kernels_gpu::device::math::TANH_APPROX_ERROR
    } else {
        0.0
    };
    tolerance(elems, k) + once_more + tanh
}

/// Value `(row, col)` of an epilogue's vector `v` (a bias or scales, one
/// value per row or per column of C), `none` without one.
fn along(v: &Option<(Vec<f32>, Per)>, (row, col): (usize, usize), none: f64) -> f64 {
    match v {
        Some((v, Per::Row)) => v[row] as f64,
        Some((v, Per::Column)) => v[col] as f64,
        None => none,
    }
}

/// Largest error of the kernels' f32 activations against their f64
/// definitions, relative to `max(|x|, 1)` (`kernels_gpu::epilogue`'s
/// test holds them to 2e-6 over [-12, 12]; beyond, GELU and SiLU are `x`
/// or 0 to f32's precision). ReLU and none are exact.
pub const ACTIVATION_ERROR: f64 = 2e-6;

/// What one element of `D = act(sum + bias)` should be, and how its error
/// is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expected {
    /// `act(sum + bias)` in f64 (`Activation::reference`).
    pub want: f64,
    /// What the error is divided by: `(magnitude + |bias|)` times the
    /// activation's largest slope. An error `e` in the argument (the
    /// accumulation's, bounded by the tolerance times `magnitude`, plus
    /// the rounding of `+ bias`, a fraction of `|sum| + |bias|`) moves
    /// the activation by at most `max_slope() e`.
    pub scale: f64,
    /// Subtracted from the difference first: what the kernels' own
    /// activation may err by ([`ACTIVATION_ERROR`] of `max(|x|, 1)`),
    /// which the argument's bound does not cover (near 0, where `x` is
    /// small next to 1). 0 with no activation or ReLU, so a plain check
    /// is unchanged.
    pub slack: f64,
}

impl Expected {
    /// The scaled error of `got` (finite).
    pub fn error(self, got: f32) -> f64 {
        ((got as f64 - self.want).abs() - self.slack).max(0.0) / self.scale.max(f64::MIN_POSITIVE)
    }
}

/// One element of a product with an epilogue: `sum` is the reference's
/// `s (alpha dot + beta c)` and `magnitude` its sum of magnitudes
/// (`|s| (|alpha| sum |a * b| + |beta c|)`); `bias` is the element's bias (0
/// without). The one place where the epilogue enters a check
/// ([`Reference::check_fused`], [`check_gemm_fused`]).
pub fn with_epilogue(activation: Activation, (sum, magnitude): (f64, f64), bias: f64) -> Expected {
    let x = sum + bias;
    let slack = match activation {
        Activation::None | Activation::Relu => 0.0,
        _ => ACTIVATION_ERROR * x.abs().max(1.0),
    };
    Expected {
        want: activation.reference(x),
        scale: (magnitude + bias.abs()) * activation.max_slope(),
        slack,
    }
}

/// Checks a library call (`rust_gemm::blas`): `after` is the caller's C
/// buffer after `C = alpha * op(A) * op(B) + beta * C` as `cfg` says, on
/// `a`, `b` and the C buffer `before` it. Each checked element of each
/// product is computed in f64 and its error scaled by `|alpha| sum |a *
/// b| + |beta c|`; elements of the buffer that belong to no product (the
/// padding of leading dimensions, the gaps between products) must hold
/// their old bits. At most `samples` elements per product are computed
/// (all of them when the product has fewer; a random choice, from `seed`,
/// otherwise, with the last row and column always in).
///
/// # Panics
/// If the buffers are shorter than `cfg` needs (`rust_gemm::blas::plan`
/// checks that first).
pub fn check_gemm(
    cfg: &rust_gemm::blas::GemmConfig,
    (a, b): (&[f32], &[f32]),
    (before, after): (&[f32], &[f32]),
    elems: Elems,
    samples: usize,
    seed: u64,
) -> Verification {
    let plain = EmuEpilogue::default();
    check_gemm_fused(cfg, (a, b), (before, after), elems, (samples, seed), &plain)
}

/// [`check_gemm`] of a call with a fused epilogue (`Sgemm::gemm_fused`,
/// described by `epilogue`: its activation, and its bias and scales as
/// host vectors along the caller's rows or columns): each element's
/// `act(s (alpha dot + beta c) + bias)` in f64 (`Activation::reference`),
/// its error scaled by `(|s| (|alpha| sum |a * b| + |beta c|) + |bias|)`
/// times the activation's largest slope (how much it can magnify the
/// error of its argument), within [`fused_tolerance`].
pub fn check_gemm_fused(
    cfg: &rust_gemm::blas::GemmConfig,
    (a, b): (&[f32], &[f32]),
    (before, after): (&[f32], &[f32]),
    elems: Elems,
    (samples, seed): (usize, u64),
    epilogue: &EmuEpilogue,
) -> Verification {
    use rust_gemm::blas::{Layout, Op};
    let at = |r: usize, c: usize, ld: usize| match cfg.layout {
        Layout::RowMajor => r * ld + c,
        Layout::ColMajor => c * ld + r,
    };
    // Indices of op(A)[i][kk], op(B)[kk][j] and C[i][j] in product z.
    let a_at = |z: usize, i: usize, kk: usize| {
        z * cfg.stride_a
            + if cfg.op_a == Op::N {
                at(i, kk, cfg.lda)
            } else {
                at(kk, i, cfg.lda)
            }
    };
    let b_at = |z: usize, kk: usize, j: usize| {
        z * cfg.stride_b
            + if cfg.op_b == Op::N {
                at(kk, j, cfg.ldb)
            } else {
                at(j, kk, cfg.ldb)
            }
    };
    let c_at = |z: usize, i: usize, j: usize| z * cfg.stride_c + at(i, j, cfg.ldc);
    let tolerance = fused_tolerance(elems, cfg.k, epilogue);
    let underflow = elems.c.subnormal_spacing() / 2.0;
    let mut owned = vec![false; after.len()];
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut checked, mut nonfinite, mut max_error, mut worst) = (0, 0, 0.0f64, None);
    let mut untouched_changed = 0;
    for z in 0..cfg.batch {
        let mut elements: Vec<(usize, usize)> = Vec::new();
        if cfg.m * cfg.n <= samples {
            elements.extend((0..cfg.m).flat_map(|i| (0..cfg.n).map(move |j| (i, j))));
        } else {
            elements.extend(
                (0..cfg.n)
                    .step_by(cfg.n.div_ceil(64))
                    .map(|j| (cfg.m - 1, j)),
            );
            elements.extend(
                (0..cfg.m)
                    .step_by(cfg.m.div_ceil(64))
                    .map(|i| (i, cfg.n - 1)),
            );
            while elements.len() < samples {
                elements.push((rng.random_range(0..cfg.m), rng.random_range(0..cfg.n)));
            }
        }
        for i in 0..cfg.m {
            for j in 0..cfg.n {
                owned[c_at(z, i, j)] = true;
            }
        }
        for (i, j) in elements {
            let (mut dot, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..cfg.k {
                let term = a[a_at(z, i, kk)] as f64 * b[b_at(z, kk, j)] as f64;
                dot += term;
                magnitude += term.abs();
            }
            let old = before[c_at(z, i, j)] as f64;
            let s = along(&epilogue.scale, (i, j), 1.0);
            let alpha = cfg.alpha as f64;
            let bias = along(&epilogue.bias, (i, j), 0.0);
            let (sum, scale) = if cfg.beta == 0.0 {
                (s * alpha * dot, (s * alpha).abs() * magnitude)
            } else {
                (
                    s * (alpha * dot + cfg.beta as f64 * old),
                    s.abs() * (alpha.abs() * magnitude + (cfg.beta as f64 * old).abs()),
                )
            };
            let expected = with_epilogue(epilogue.activation, (sum, scale), bias);
            let (want, scale) = (expected.want, expected.scale);
            let got = after[c_at(z, i, j)];
            checked += 1;
            let err = if !got.is_finite() {
                nonfinite += 1;
                f64::INFINITY
            } else if scale == 0.0 {
                // alpha = 0 and beta = 0 (or beta * C = 0): exactly zero.
                if got == 0.0 { 0.0 } else { f64::INFINITY }
            } else {
                // Less what rounding into C's subnormals may err by (a
                // result below C's smallest normal: alpha = 0 and a tiny
                // beta, say), and what the activation may (`Expected`).
                ((got as f64 - want).abs() - underflow - expected.slack).max(0.0) / scale
            };
            if err > max_error || worst.is_none() {
                max_error = max_error.max(err);
                worst = Some(Worst {
                    row: i,
                    col: j,
                    got,
                    want,
                });
            }
        }
    }
    for (idx, own) in owned.iter().enumerate() {
        if !own && before[idx].to_bits() != after[idx].to_bits() {
            untouched_changed += 1;
        }
    }
    Verification {
        mode: if checked == cfg.batch * cfg.m * cfg.n {
            Mode::Full
        } else {
            Mode::Sampled
        },
        checked,
        nonfinite,
        max_error: if untouched_changed > 0 {
            f64::INFINITY
        } else {
            max_error
        },
        worst,
        tolerance,
        passed: nonfinite == 0 && untouched_changed == 0 && max_error <= tolerance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Reference {
        fn check_fp32(&self, c: &[f32]) -> Verification {
            self.check(c, Elems::FP32)
        }
    }

    /// The FP8 bound grows with K without promotion (step 25) and hardly
    /// at all with it (step 26): the figures its doc gives.
    #[test]
    fn fp8_tolerance_is_flat_in_k_once_promoted() {
        use kernels_gpu::elem::Elem;
        let tensor = Elems::new(Elem::E4m3, Elem::E4m3, Elem::F32, Math::Fp8);
        let promoted = tensor.promoted(128);
        let close = |x: f64, want: f64| (x / want - 1.0).abs() < 0.02;
        assert!(
            close(tolerance(tensor, 4096), 1.6e-2),
            "{}",
            tolerance(tensor, 4096)
        );
        assert!(
            close(tolerance(tensor, 16384), 6.7e-2),
            "{}",
            tolerance(tensor, 16384)
        );
        let (short, long) = (tolerance(promoted, 1024), tolerance(promoted, 16384));
        assert!(
            close(short, 4.9e-4) && long > short && long < 1.05 * short,
            "{short} {long}"
        );
        // A BF16 C adds its rounding, whatever the accumulation.
        let bf16 = Elems::new(Elem::E4m3, Elem::E4m3, Elem::Bf16, Math::Fp8).promoted(128);
        assert!(tolerance(bf16, 16384) > long + 3.9e-3);
    }

    /// A 2x3 times 3x2 product checked by hand.
    #[test]
    fn full_reference_matches_hand_computed_product() {
        let shape = Shape::new(2, 2, 3).unwrap();
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154]
        let r = Reference::new(shape, &a, &b, 0);
        assert_eq!(r.mode(), Mode::Full);
        let want = [58.0, 64.0, 139.0, 154.0];
        for (&(i, v, s), w) in r.entries.iter().zip(want) {
            assert_eq!(v, w, "element {i}");
            assert_eq!(
                s, w,
                "all terms are positive, so the scale equals the value"
            );
        }
        assert!(r.check_fp32(&[58.0, 64.0, 139.0, 154.0]).passed);
        let off = r.check_fp32(&[58.0, 64.0, 139.0, 155.0]);
        assert!(!off.passed);
        let worst = off.worst.unwrap();
        assert_eq!((worst.row, worst.col), (1, 1));
    }

    /// The epilogue on the 2x3 times 3x2 product by hand: a bias per
    /// column and ReLU, after the product's scale; a result without the
    /// bias, with the bias per row or without the scale fails.
    #[test]
    fn reference_applies_bias_and_relu_after_the_scale() {
        let shape = Shape::new(2, 2, 3).unwrap();
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let r = Reference::new(shape, &a, &b, 0);
        let epilogue = |per| EmuEpilogue {
            activation: Activation::Relu,
            bias: Some((vec![-100.0, 0.5], per)),
            scale: None,
        };
        let column = epilogue(Per::Column);
        let check = |c: &[f32], scale: f64| r.check_fused(c, Elems::FP32, scale, &column);
        // [58 64; 139 154] + [-100 0.5] per column, then max(x, 0).
        let want = [0.0, 64.5, 39.0, 154.5];
        let v = check(&want, 1.0);
        assert!(v.passed && v.max_error == 0.0, "{v:?}");
        // Twice the product: [116 128; 278 308] + bias.
        assert!(check(&[16.0, 128.5, 178.0, 308.5], 2.0).passed);
        assert!(!check(&want, 2.0).passed, "the scale left out");
        assert!(
            !check(&[58.0, 64.0, 139.0, 154.0], 1.0).passed,
            "no epilogue"
        );
        assert!(
            !check(&[0.0, 64.0, 39.0, 154.0], 1.0).passed,
            "a bias of 0.5 lost"
        );
        // Per row: [58 - 100, 64 - 100; 139.5, 154.5].
        let row = r.check_fused(
            &[0.0, 0.0, 139.5, 154.5],
            Elems::FP32,
            1.0,
            &epilogue(Per::Row),
        );
        assert!(row.passed);
        let v = check(&[0.0, 0.0, 139.5, 154.5], 1.0);
        assert!(!v.passed);
        assert_eq!(v.worst.map(|w| (w.row, w.col, w.want)), Some((0, 1, 64.5)));
        // A plain check of the same C is the check of no epilogue.
        assert!(
            r.check_fused(
                &[58.0, 64.0, 139.0, 154.0],
                Elems::FP32,
                1.0,
                &EmuEpilogue::default()
            )
            .passed
        );
    }

    /// GELU (tanh form) of a 1x1 times 1x2 product plus a bias, where GELU
    /// bends: [1] [0.5 -1] + [0.25 0.5] = [0.75 -0.5], whose GELUs are
    /// `x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))` = 0.5799605551656203
    /// and -0.15428599017485606. The error is measured against
    /// `max_slope() (sum |a b| + |bias|)`; the erf form (0.5800295 at 0.75)
    /// and the bare argument are far outside it.
    #[test]
    fn reference_applies_gelu_to_the_biased_product() {
        let shape = Shape::new(1, 2, 1).unwrap();
        let r = Reference::new(shape, &[1.0], &[0.5, -1.0], 0);
        let gelu = EmuEpilogue {
            activation: Activation::GeluTanh,
            bias: Some((vec![0.25, 0.5], Per::Column)),
            scale: None,
        };
        let want = [
            0.579_960_555_165_620_3_f64 as f32,
            -0.154_285_990_174_856_06_f64 as f32,
        ];
        let v = r.check_fused(&want, Elems::FP32, 1.0, &gelu);
        assert!(v.passed && v.max_error < 1e-7, "{v:?}");
        // One f32 ulp-ish error of the activation itself is within its slack.
        let v = r.check_fused(&[want[0] + 1e-6, want[1]], Elems::FP32, 1.0, &gelu);
        assert!(v.passed, "{v:?}");
        let erf = [0.580_029_5, -0.154_268_7];
        assert!(!r.check_fused(&erf, Elems::FP32, 1.0, &gelu).passed);
        assert!(!r.check_fused(&[0.75, -0.5], Elems::FP32, 1.0, &gelu).passed);
        // The bound: slope 1.13 times (|1 * 0.5| + |0.25|) at the first element.
        let e = with_epilogue(Activation::GeluTanh, (0.5, 0.5), 0.25);
        approx::assert_relative_eq!(e.scale, 1.13 * 0.75, max_relative = 1e-12);
        approx::assert_relative_eq!(e.want, 0.579_960_555_165_620_3, max_relative = 1e-14);
        assert_eq!(
            with_epilogue(Activation::None, (3.0, 4.0), 0.0),
            Expected {
                want: 3.0,
                scale: 4.0,
                slack: 0.0
            }
        );
    }

    #[test]
    fn nan_and_unwritten_elements_fail() {
        let shape = Shape::new(1, 2, 1).unwrap();
        let r = Reference::new(shape, &[2.0], &[3.0, -1.0], 0);
        assert!(r.check_fp32(&[6.0, -2.0]).passed);
        let v = r.check_fp32(&[6.0, f32::NAN]);
        assert!(!v.passed);
        assert_eq!(v.nonfinite, 1);
        assert!(v.max_error.is_infinite());
    }

    /// The sampled reference agrees with the full one where both exist.
    #[test]
    fn sampled_reference_agrees_with_full() {
        let shape = Shape::new(37, 41, 29).unwrap();
        let (a, b) =
            crate::inputs::random_inputs(&shape, kernels_gpu::elem::Storage::F32, 7).unwrap();
        let full = Reference::full(shape, &a, &b);
        let sampled = Reference::sampled(shape, &a, &b, 7);
        assert_eq!(sampled.mode(), Mode::Sampled);
        // Corners and both edges are always sampled.
        for corner in [0, 40, 36 * 41, 37 * 41 - 1] {
            assert!(
                sampled.entries.iter().any(|e| e.0 == corner),
                "corner {corner} missing"
            );
        }
        for &(i, v, s) in &sampled.entries {
            let (_, fv, fs) = full.entries[i];
            approx::assert_relative_eq!(v, fv, max_relative = 1e-12);
            approx::assert_relative_eq!(s, fs, max_relative = 1e-12);
        }
    }

    /// Plain f32 accumulation (what every kernel does, in some order) stays
    /// well inside the tolerance; a single dropped term does not.
    #[test]
    fn tolerance_separates_rounding_from_a_dropped_term() {
        let shape = Shape::new(4, 4, 8192).unwrap();
        let (a, b) =
            crate::inputs::random_inputs(&shape, kernels_gpu::elem::Storage::F32, 3).unwrap();
        let r = Reference::new(shape, &a, &b, 3);
        let product = |drop: Option<usize>| -> Vec<f32> {
            let mut c = vec![0.0f32; 16];
            for i in 0..4 {
                for j in 0..4 {
                    let mut acc = 0.0f32;
                    for kk in (0..8192).filter(|&kk| Some(kk) != drop) {
                        acc = a[i * 8192 + kk].mul_add(b[kk * 4 + j], acc);
                    }
                    c[i * 4 + j] = acc;
                }
            }
            c
        };
        let exact = r.check_fp32(&product(None));
        assert!(exact.passed, "f32 rounding flagged: {:e}", exact.max_error);
        assert!(
            exact.max_error < TOLERANCE / 10.0,
            "rounding error {:e}",
            exact.max_error
        );
        let dropped = r.check_fp32(&product(Some(4000)));
        assert!(
            !dropped.passed,
            "a dropped term passed: {:e}",
            dropped.max_error
        );
    }

    /// The TF32 bound at a few k, by hand: 2u + u^2 + gamma_k (1 + u)^2.
    #[test]
    fn tf32_tolerance_follows_its_derivation() {
        assert_eq!(tolerance(Elems::FP32, 4096), TOLERANCE);
        let at = |k| tolerance(Elems::TF32, k);
        // k = 1: only the input conversion, 2^-9 + 2^-20, and one term's 2^-23.
        let one = 2f64.powi(-9)
            + 2f64.powi(-20)
            + 2f64.powi(-23) / (1.0 - 2f64.powi(-23)) * (1.0 + 2f64.powi(-10)).powi(2);
        approx::assert_relative_eq!(at(1), one, max_relative = 1e-12);
        approx::assert_relative_eq!(at(4096), 2.4438e-3, max_relative = 1e-3);
        assert!(at(8192) > at(4096) && at(4096) > at(1));
        // Far above what f32 kernels are held to.
        assert!(at(1) > 50.0 * TOLERANCE);
    }

    #[test]
    fn sixteen_bit_tolerances_follow_the_same_derivation() {
        use kernels_gpu::elem::{Elem, Math};
        let gamma = |k: f64| k * 2f64.powi(-23) / (1.0 - k * 2f64.powi(-23));
        // BF16 and FP16 stored as such: no factor rounding, only the sum.
        for (e, m) in [(Elem::Bf16, Math::Bf16), (Elem::F16, Math::F16)] {
            let f32_out = Elems::new(e, e, Elem::F32, m);
            approx::assert_relative_eq!(
                tolerance(f32_out, 4096),
                gamma(4096.0),
                max_relative = 1e-12
            );
            // C in the input type: one rounding to nearest on top.
            let same_out = Elems::new(e, e, e, m);
            let acc = gamma(4096.0);
            approx::assert_relative_eq!(
                tolerance(same_out, 4096),
                acc + e.unit_roundoff() * (1.0 + acc),
                max_relative = 1e-12
            );
        }
        // An f32 operand multiplied in BF16 would be truncated to 8 bits.
        let mixed = Elems::new(Elem::F32, Elem::Bf16, Elem::F32, Math::Bf16);
        assert!(tolerance(mixed, 1) > 2f64.powi(-7));
        // BF16 in and out is looser than FP16 (8 vs 11 bits), both looser
        // than f32 out.
        let bf = Elems::new(Elem::Bf16, Elem::Bf16, Elem::Bf16, Math::Bf16);
        let hf = Elems::new(Elem::F16, Elem::F16, Elem::F16, Math::F16);
        assert!(tolerance(bf, 64) > tolerance(hf, 64));
        assert!(
            tolerance(hf, 64)
                > tolerance(Elems::new(Elem::F16, Elem::F16, Elem::F32, Math::F16), 64)
        );
    }

    /// Products of inputs rounded to TF32 and summed in f32 stay inside the
    /// TF32 bound; a wrong term does not.
    #[test]
    fn tf32_rounded_products_pass_and_a_wrong_term_fails() {
        let shape = Shape::new(3, 5, 4096).unwrap();
        let (a, b) =
            crate::inputs::random_inputs(&shape, kernels_gpu::elem::Storage::F32, 9).unwrap();
        let r = Reference::new(shape, &a, &b, 9);
        let tf32 = |x: f32| f32::from_bits((x.to_bits() + 0x1000) & !0x1fff);
        let product = |swap: bool| -> Vec<f32> {
            let mut c = vec![0.0f32; 15];
            for i in 0..3 {
                for j in 0..5 {
                    let mut acc = 0.0f32;
                    for kk in 0..4096 {
                        // `swap`: row i + 1 of A in place of row i for one block of k.
                        let row = if swap && (100..356).contains(&kk) {
                            (i + 1) % 3
                        } else {
                            i
                        };
                        acc += tf32(a[row * 4096 + kk]) * tf32(b[kk * 5 + j]);
                    }
                    c[i * 5 + j] = acc;
                }
            }
            c
        };
        let good = r.check(&product(false), Elems::TF32);
        assert!(good.passed, "TF32 rounding flagged: {:e}", good.max_error);
        let wrong = r.check(&product(true), Elems::TF32);
        assert!(
            !wrong.passed,
            "256 wrong terms passed: {:e}",
            wrong.max_error
        );
    }
}
