//! Random inputs from a seed: reproducible, and never zeros (zeros hide
//! unwritten outputs and wrong indexing).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::HostError;
use crate::shape::Shape;
use kernels_gpu::elem::Storage;

/// `len` floats uniform in [-1, 1), from `seed`; an error (not an abort)
/// when the host cannot hold them.
pub fn random_matrix(len: usize, seed: u64) -> Result<Vec<f32>, HostError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        HostError::BadShape(format!(
            "the inputs need {:.1} GB of host memory, more than this machine can give: \
             choose smaller sizes",
            len as f64 * 4.0 / 1e9
        ))
    })?;
    let mut rng = SmallRng::seed_from_u64(seed);
    v.extend((0..len).map(|_| rng.random_range(-1.0f32..1.0)));
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
    let (a_len, b_len, _) = shape.elems();
    let mut a = random_matrix(a_len, seed)?;
    let mut b = random_matrix(b_len, seed ^ 0x9E37_79B9_7F4A_7C15)?;
    crate::matrix::round_to(storage.a, &mut a);
    crate::matrix::round_to(storage.b, &mut b);
    Ok((a, b))
}
