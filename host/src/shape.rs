//! The problem's shape, checked before anything is allocated.

use kernels_gpu::launch::Ops;
use rust_gemm::blas::{self, GemmConfig, GemmError};
use serde::Serialize;
use std::fmt;

/// Largest dimension the harness takes: it makes dense inputs and a CPU
/// reference, and 2^20 already means terabytes of data (the library's
/// own limit is 2^32 - 1).
pub const MAX_DIM: usize = 1 << 20;

/// `C (m x n) = A (m x k) * B (k x n)`, all row-major, dense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    /// A checked shape: every dimension at most [`MAX_DIM`], then the
    /// library's checks of the dense product ([`blas::plan`], the one set
    /// of checks every call goes through). (Each kernel says which
    /// shapes it can take: [`Self::choose`].)
    pub fn new(m: usize, n: usize, k: usize) -> Result<Self, GemmError> {
        // The harness's limit first: within it, `elems` cannot overflow.
        for (arg, value) in [("m", m), ("n", n), ("k", k)] {
            if value > MAX_DIM {
                return Err(GemmError::TooLarge {
                    arg,
                    value,
                    why: "the harness takes dimensions of up to 2^20 = 1048576",
                });
            }
        }
        let shape = Self { m, n, k };
        blas::plan(&shape.config(), shape.elems())?;
        Ok(shape)
    }

    /// The library's call for this product, dense and row-major.
    pub fn config(&self) -> GemmConfig {
        GemmConfig::new(self.m, self.n, self.k)
    }

    /// Whether kernel `spec` can compute this product in its layout (A^T
    /// or B^T stored dense where it reads them transposed): the library's
    /// checks of a call that names it ([`blas::choose_named`]: its stored
    /// types, layout, the sizes its offsets and its grid allow).
    pub fn choose(
        &self,
        spec: &'static kernels_gpu::launch::KernelSpec,
    ) -> Result<blas::Choice, GemmError> {
        let cfg = self.config().op_a(spec.ops.a).op_b(spec.ops.b);
        let plan = blas::plan_for(&cfg, cfg.buffer_lens(), spec.elems.storage())?;
        blas::choose_named(&plan, spec.name, 1)
    }

    pub fn square(n: usize) -> Result<Self, GemmError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape is checked against the harness's own limit, then by the
    /// library's plan (its error type and message).
    #[test]
    fn shapes_are_checked_by_the_library() {
        let e = Shape::new(4, 0, 4).unwrap_err();
        assert!(matches!(e, GemmError::ZeroDimension { arg: "n" }), "{e}");
        assert_eq!(e.to_string(), "n is 0: every dimension must be at least 1");
        let e = Shape::new(MAX_DIM + 1, 1, 1).unwrap_err();
        assert!(matches!(e, GemmError::TooLarge { arg: "m", .. }), "{e}");
        assert_eq!(Shape::square(7).unwrap(), Shape { m: 7, n: 7, k: 7 });
    }

    /// A kernel's own limits come from the library's check of a call
    /// that names it: its offsets, and CUDA's grid.
    #[test]
    fn a_kernel_takes_what_the_library_lets_it() {
        let naive = &kernels_gpu::k01_naive::SPEC;
        assert!(Shape::new(64, 64, 64).unwrap().choose(naive).is_ok());
        let wide = Shape::new(65536, 1, 65536).unwrap();
        let e = wide.choose(naive).unwrap_err();
        assert!(matches!(e, GemmError::KernelUnsupported { .. }), "{e}");
        let tall = Shape::new(MAX_DIM, 1, 1).unwrap();
        let e = tall.choose(naive).unwrap_err();
        assert!(
            e.to_string().contains("above CUDA's limit of 65,535"),
            "{e}"
        );
    }
}
