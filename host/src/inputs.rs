//! Random inputs from a seed: reproducible, and never zeros (zeros hide
//! unwritten outputs and wrong indexing).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// `len` floats uniform in [-1, 1), from `seed`.
pub fn random_matrix(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A and B for one problem; B's stream is independent of A's.
pub fn random_inputs(shape: &crate::shape::Shape, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let (a_len, b_len, _) = shape.elems();
    (
        random_matrix(a_len, seed),
        random_matrix(b_len, seed ^ 0x9E37_79B9_7F4A_7C15),
    )
}
