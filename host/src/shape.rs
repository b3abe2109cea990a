//! The problem's shape, checked before anything is allocated.

use crate::HostError;
use serde::Serialize;
use std::fmt;

/// Largest dimension accepted: kernel parameters are `u32`, grids are at
/// most 65,535 blocks high, and 2^20 already means terabytes of data.
pub const MAX_DIM: usize = 1 << 20;

/// `C (m x n) = A (m x k) * B (k x n)`, all row-major `f32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    /// A checked shape: every dimension in `1..=MAX_DIM`, every matrix at
    /// most [`kernels_gpu::gemm::MAX_ELEMS`] elements.
    pub fn new(m: usize, n: usize, k: usize) -> Result<Self, HostError> {
        for (name, v) in [("n", n), ("m", m), ("k", k)] {
            if v == 0 {
                return Err(HostError::BadShape(format!(
                    "--{name} is 0: every dimension must be at least 1"
                )));
            }
            if v > MAX_DIM {
                return Err(HostError::BadShape(format!(
                    "--{name} {v} is larger than the limit of {MAX_DIM}: choose a smaller size"
                )));
            }
        }
        let limit = kernels_gpu::gemm::MAX_ELEMS;
        for (name, rows, cols) in [("A", m, k), ("B", k, n), ("C", m, n)] {
            if rows * cols > limit {
                return Err(HostError::BadShape(format!(
                    "{name} would hold {rows} x {cols} = {} elements, more than the kernels' \
                     limit of {limit} (2^32 - 1: they index a matrix in 32 bits): choose smaller sizes",
                    rows * cols
                )));
            }
        }
        Ok(Self { m, n, k })
    }

    pub fn square(n: usize) -> Result<Self, HostError> {
        Self::new(n, n, n)
    }

    /// Floating-point operations of the product: one multiply and one add per term.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Floats in A, B and C.
    pub fn elems(&self) -> (usize, usize, usize) {
        (self.m * self.k, self.k * self.n, self.m * self.n)
    }

    /// Bytes of A, B and C together.
    pub fn bytes(&self) -> usize {
        let (a, b, c) = self.elems();
        (a + b + c) * 4
    }

    pub fn is_square(&self) -> bool {
        self.m == self.n && self.n == self.k
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m={} n={} k={}", self.m, self.n, self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_matrix_must_fit_32_bit_offsets() {
        // 65,535 x 65,537 = 2^32 - 1: the largest matrix allowed.
        assert!(Shape::new(65_535, 1, 65_537).is_ok());
        for (m, n, k, name) in [
            (65_536, 1, 65_536, "A"),
            (1, 65_536, 65_536, "B"),
            (65_536, 65_536, 1, "C"),
        ] {
            let err = Shape::new(m, n, k).unwrap_err().to_string();
            assert!(err.contains(&format!("{name} would hold")), "{err}");
            assert!(err.contains("32 bits"), "{err}");
        }
    }
}
