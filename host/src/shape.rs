//! The problem's shape, checked before anything is allocated.

use kernels_gpu::launch::Ops;
use rust_gemm::HostError;
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
    /// A checked shape: every dimension in `1..=MAX_DIM`. (Each kernel says
    /// which shapes it can take: `KernelSpec::unsupported`.)
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

    /// Bytes of A, B and C together, stored as `storage` says.
    pub fn bytes(&self, storage: kernels_gpu::elem::Storage) -> usize {
        let (a, b, c) = self.elems();
        a * storage.a.bytes() + b * storage.b.bytes() + c * storage.c.bytes()
    }

    /// The dense product `C = A * B` of this shape, as the kernels take it.
    pub fn params(&self) -> kernels_gpu::gemm::GemmParams {
        kernels_gpu::gemm::GemmParams::dense(self.m as u32, self.n as u32, self.k as u32)
    }

    /// [`Self::params`] for a kernel of layout `ops`: the same product,
    /// A or B stored transposed and dense (A^T's rows m apart, B^T's k).
    pub fn params_for(&self, ops: Ops) -> kernels_gpu::gemm::GemmParams {
        kernels_gpu::gemm::GemmParams::dense_in(self.m as u32, self.n as u32, self.k as u32, ops)
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
