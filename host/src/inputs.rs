//! Random inputs from a seed: reproducible, and never zeros (zeros hide
//! unwritten outputs and wrong indexing).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::HostError;
use crate::shape::Shape;
use kernels_gpu::elem::Storage;

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
