//! Random inputs from a seed: reproducible, and never zeros (zeros hide
//! unwritten outputs and wrong indexing).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::shape::Shape;
use kernels_gpu::elem::{Elem, SCALE_BLOCK, Scaling, Storage};
use rust_gemm::HostError;

/// How random inputs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inputs {
    /// Uniform in [-1, 1): every program's default.
    Uniform,
    /// Uniform in [-1, 1) times `2^e`, `e` uniform in (-8, 8): values
    /// spread over 16 binades, where a split into two TF32 parts
    /// (3xTF32) loses the most, for the bench's accuracy table.
    Binades,
}

impl Inputs {
    /// Both kinds, as the accuracy table lists them.
    pub const ALL: [Inputs; 2] = [Inputs::Uniform, Inputs::Binades];

    /// How a table names them.
    pub fn name(self) -> &'static str {
        match self {
            Inputs::Uniform => "uniform in [-1, 1)",
            Inputs::Binades => "uniform x 2^U(-8, 8)",
        }
    }
}

/// `len` floats uniform in [-1, 1), from `seed`; an error (not an abort)
/// when the host cannot hold them.
pub fn random_matrix(len: usize, seed: u64) -> Result<Vec<f32>, HostError> {
    random_matrix_of(Inputs::Uniform, len, seed)
}

/// `len` floats drawn as `inputs` says, from `seed`.
pub fn random_matrix_of(inputs: Inputs, len: usize, seed: u64) -> Result<Vec<f32>, HostError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        HostError::BadShape(format!(
            "the inputs need {:.1} GB of host memory, more than this machine can give: \
             choose smaller sizes",
            len as f64 * 4.0 / 1e9
        ))
    })?;
    let mut rng = SmallRng::seed_from_u64(seed);
    match inputs {
        Inputs::Uniform => v.extend((0..len).map(|_| rng.random_range(-1.0f32..1.0))),
        Inputs::Binades => v.extend((0..len).map(|_| {
            let u = rng.random_range(-1.0f32..1.0);
            u * rng.random_range(-8.0f32..8.0).exp2()
        })),
    }
    Ok(v)
}

/// A and B for one problem, stored as `storage` says: the same f32 draws
/// for every type, rounded to nearest values of A's and B's types (so the
/// reference multiplies what the GPU reads); B's stream is independent of A's.
pub fn random_inputs(
    shape: &Shape,
    storage: Storage,
    seed: u64,
) -> Result<(Vec<f32>, Vec<f32>), HostError> {
    random_inputs_of(Inputs::Uniform, shape, storage, seed)
}

/// [`random_inputs`] drawn as `inputs` says.
pub fn random_inputs_of(
    inputs: Inputs,
    shape: &Shape,
    storage: Storage,
    seed: u64,
) -> Result<(Vec<f32>, Vec<f32>), HostError> {
    let (a_len, b_len, _) = shape.elems();
    let mut a = random_matrix_of(inputs, a_len, seed)?;
    let mut b = random_matrix_of(inputs, b_len, seed ^ 0x9E37_79B9_7F4A_7C15)?;
    crate::matrix::round_to(storage.a, &mut a);
    crate::matrix::round_to(storage.b, &mut b);
    Ok((a, b))
}

/// The bias of a fused epilogue (`runner::Buffers::set_epilogue`): one
/// value per column of C, uniform in [-1, 1) times `sqrt(k) / 3`, the
/// spread of an element of `A B` on uniform inputs (a sum of `k` products
/// of variance 1/9), so that a bias left out, applied twice or taken from
/// the wrong column moves an element by about its own size: far above
/// every tolerance, a 16-bit C's included, which a bias of the inputs'
/// size (1, against `sum |a b|` of about `k / 4`) would not be. Rounded to
/// C's stored type `c`, so that a copy in that type (what cuBLASLt reads
/// where it takes no f32 bias) holds the same values. Independent of A's
/// and B's streams.
pub fn random_bias(shape: &Shape, c: Elem, seed: u64) -> Result<Vec<f32>, HostError> {
    let spread = (shape.k as f32).sqrt() / 3.0;
    let mut bias = random_matrix(shape.n, seed ^ 0x0B1A_5B1A_5B1A_5B1A)?;
    bias.iter_mut().for_each(|x| *x *= spread);
    crate::matrix::round_to(c, &mut bias);
    Ok(bias)
}

/// The block scales of an FP8 product (`Scaling::Blocks`, step 26): A's
/// per row per 128 of K and B's per 128 x 128, laid out as the kernels
/// and cuBLASLt read them (`Scaling::a_scales`, `Scaling::b_scales`; the
/// padding between blocks holds zeros).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockScales {
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

impl BlockScales {
    /// Scales for `shape`, from `seed`: each `(1 + j / 8) 2^e`, `j` uniform
    /// in 0..8 and `e` in -3..3, so that neighbouring blocks differ (a
    /// kernel that takes one block's scale for another's is off by far
    /// more than the FP8 tolerance), and with 4 significant bits, so that
    /// a stored FP8 value (4 at most) times its scale is exact in f32: the
    /// reference multiplies exactly what the scales stand for.
    pub fn random(shape: &Shape, seed: u64) -> Self {
        let (m, n, k) = (shape.m, shape.n, shape.k);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x005C_A1E5);
        let mut draw = |len: usize, stride: usize, used: usize| -> Vec<f32> {
            (0..len)
                .map(|i| {
                    let mantissa = 1.0 + rng.random_range(0..8) as f32 / 8.0;
                    let v = mantissa * (rng.random_range(-3..3) as f32).exp2();
                    if i % stride < used { v } else { 0.0 }
                })
                .collect()
        };
        let a = draw(Scaling::a_scales(m, k), Scaling::a_scales_stride(m), m);
        let b = draw(
            Scaling::b_scales(k, n),
            Scaling::b_scales_stride(k),
            k.div_ceil(SCALE_BLOCK),
        );
        Self { a, b }
    }

    /// The scale of A[r][kk].
    pub fn of_a(&self, shape: &Shape, r: usize, kk: usize) -> f32 {
        self.a[kk / SCALE_BLOCK * Scaling::a_scales_stride(shape.m) + r]
    }

    /// The scale of B[kk][j].
    pub fn of_b(&self, shape: &Shape, kk: usize, j: usize) -> f32 {
        self.b[j / SCALE_BLOCK * Scaling::b_scales_stride(shape.k) + kk / SCALE_BLOCK]
    }

    /// A and B (row-major, `m x k` and `k x n`, FP8 values) times their
    /// scales: the matrices the stored values stand for, which the
    /// reference multiplies (exact: [`Self::random`]'s scales have 4
    /// significant bits).
    pub fn dequantize(&self, shape: &Shape, a: &[f32], b: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (n, k) = (shape.n, shape.k);
        let da = (a.iter().enumerate())
            .map(|(i, &v)| v * self.of_a(shape, i / k, i % k))
            .collect();
        let db = (b.iter().enumerate())
            .map(|(i, &v)| v * self.of_b(shape, i / n, i % n))
            .collect();
        (da, db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block scales fill their layouts (the padding with zeros), no
    /// two neighbours alike as a rule, and their products with FP8 values
    /// are exact in f32.
    #[test]
    fn block_scales_fill_their_layout_and_dequantize_exactly() {
        let shape = Shape::new(37, 300, 1000).unwrap();
        let blocks = BlockScales::random(&shape, 5);
        let (k_blocks, stride_a, stride_b) = (8, 40, 8);
        assert_eq!(blocks.a.len(), k_blocks * stride_a);
        assert_eq!(blocks.b.len(), 3 * stride_b);
        for (i, &v) in blocks.a.iter().enumerate() {
            assert_eq!(v == 0.0, i % stride_a >= 37, "A scale {i}: {v}");
        }
        assert!(
            blocks.b.iter().all(|&v| v != 0.0),
            "8 K blocks fill the stride"
        );
        let alike = blocks
            .a
            .windows(2)
            .filter(|w| w[0] == w[1] && w[0] != 0.0)
            .count();
        assert!(alike < blocks.a.len() / 10, "{alike} neighbours alike");
        assert_eq!(blocks.of_a(&shape, 36, 999), blocks.a[7 * 40 + 36]);
        assert_eq!(blocks.of_b(&shape, 999, 299), blocks.b[2 * 8 + 7]);
        let storage = Storage::new(Elem::E4m3, Elem::E4m3, Elem::Bf16);
        let (a, b) = random_inputs(&shape, storage, 5).unwrap();
        let (da, db) = blocks.dequantize(&shape, &a, &b);
        for (i, (&q, &d)) in a.iter().zip(&da).enumerate() {
            let exact = q as f64 * blocks.of_a(&shape, i / 1000, i % 1000) as f64;
            assert_eq!(d as f64, exact, "A[{i}]");
        }
        for (i, (&q, &d)) in b.iter().zip(&db).enumerate() {
            let exact = q as f64 * blocks.of_b(&shape, i / 300, i % 300) as f64;
            assert_eq!(d as f64, exact, "B[{i}]");
        }
    }

    /// The bias is as long as a row of C, spread like an element of the
    /// product, of C's type, and reproducible.
    #[test]
    fn bias_spans_a_row_of_c_in_c_type() {
        let shape = Shape::new(3, 500, 900).unwrap();
        let bias = random_bias(&shape, Elem::Bf16, 1).unwrap();
        assert_eq!(bias.len(), 500);
        assert!(bias.iter().all(|&x| x.abs() <= 10.0 && x != 0.0));
        assert!(
            bias.iter().any(|&x| x.abs() > 5.0),
            "spread sqrt(900) / 3 = 10"
        );
        let mut rounded = bias.clone();
        crate::matrix::round_to(Elem::Bf16, &mut rounded);
        assert_eq!(rounded, bias);
        assert_eq!(random_bias(&shape, Elem::Bf16, 1).unwrap(), bias);
        assert_ne!(random_bias(&shape, Elem::Bf16, 2).unwrap(), bias);
    }
}
