//! Tensor cores through `mma.sync` (sm_80 and newer): TF32 conversion, the
//! warp-wide `m16n8k8` matrix multiply-accumulate, and `ldmatrix`, the
//! warp-wide load of A's fragments from shared memory.
//!
//! One `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` multiplies a
//! 16 x 8 tile of A by an 8 x 8 tile of B and adds a 16 x 8 tile of C, all
//! held in registers spread over the 32 lanes of a warp. With
//! `g = lane / 4` and `t = lane % 4` (PTX ISA, "Matrix Fragments for
//! mma.m16n8k8", `.tf32`):
//!
//! | fragment | registers | lane holds |
//! |---|---|---|
//! | A (16 x 8, row-major) | `a[0..4]` | `A[g][t]`, `A[g + 8][t]`, `A[g][t + 4]`, `A[g + 8][t + 4]` |
//! | B (8 x 8, "col") | `b[0..2]` | `B[t][g]`, `B[t + 4][g]` |
//! | C, D (16 x 8) | `c[0..4]` | `C[g][2t]`, `C[g][2t + 1]`, `C[g + 8][2t]`, `C[g + 8][2t + 1]` |
//!
//! `ldmatrix.x4` fills exactly A's fragment: each lane names one 16-byte
//! row (4 words) of one of four 8 x 4 word matrices (lane `L`: row `L % 8`
//! of matrix `L / 8`), and lane `(g, t)` gets word `t` of row `g` of each
//! matrix. With matrices (rows 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7,
//! k 4-7), (rows 8-15, k 4-7) those are `a[0..4]`. (B's fragment would need
//! B stored k-contiguous per column; with B row-major it is two scalar loads.)
//!
//! The 16-bit form, `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`
//! (or `.f16`), doubles K: each 32-bit register holds two neighbours along
//! K, the lower index in the low half (PTX ISA, "Matrix Fragments for
//! mma.m16n8k16 with floating point type"):
//!
//! | fragment | registers | lane holds (each a pair along K: `k`, `k + 1`) |
//! |---|---|---|
//! | A (16 x 16, row-major) | `a[0..4]` | `A[g][2t..]`, `A[g + 8][2t..]`, `A[g][2t + 8..]`, `A[g + 8][2t + 8..]` |
//! | B (16 x 8, "col") | `b[0..2]` | `B[2t..][g]`, `B[2t + 8..][g]` |
//! | C, D (16 x 8) | `c[0..4]` | as for `m16n8k8` |
//!
//! A row of 8 16-bit values is 16 bytes, one `ldmatrix` row: an 8 x 8
//! matrix stored with K contiguous gives lane `(g, t)` the pair
//! `[g][2t..2t + 2]`, a fragment register as it is. Stored the other way
//! (M or N contiguous, as a row-major B is), `ldmatrix.trans`
//! ([`SharedTile::load_matrix_x4_trans`]) hands out the transpose: lane
//! `(g, t)` gets `[2t][g]` and `[2t + 1][g]` in one register, again a
//! fragment register. So either operand is read as it is stored, in
//! whichever of the two layouts.
//!
//! The 8-bit form, `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32`
//! (A and B each E4M3 or E5M2; sm_89 and newer, PTX ISA 8.4), doubles K
//! again: each register holds four neighbours along K, the lowest index
//! in the lowest byte (PTX ISA, "Matrix Fragments for mma.m16n8k32"):
//!
//! | fragment | registers | lane holds (each four along K: `k .. k + 4`) |
//! |---|---|---|
//! | A (16 x 32, row-major) | `a[0..4]` | `A[g][4t..]`, `A[g + 8][4t..]`, `A[g][4t + 16..]`, `A[g + 8][4t + 16..]` |
//! | B (32 x 8, "col") | `b[0..2]` | `B[4t..][g]`, `B[4t + 16..][g]` |
//! | C, D (16 x 8) | `c[0..4]` | as for `m16n8k8` |
//!
//! In 32-bit words that is the 16-bit layout again: a 16-byte `ldmatrix`
//! row is 16 FP8 values, and lane `(g, t)` gets word `t` of row `g`,
//! values `4t .. 4t + 4`. So a tile stored with K contiguous (A as it
//! is, B transposed) is read with plain `ldmatrix`, as step 21 reads its
//! K-major tiles. There is no `.trans` for 8-bit values: an operand
//! stored M- or N-major would have to be transposed on its way.
//!
//! Safety model: `mma.sync` and `ldmatrix` are warp-collective. Every lane
//! of the warp must execute the same instruction with the warp converged
//! (`.aligned`), or the result is undefined. So they are called only from
//! code every lane of a warp runs the same number of times: never under a
//! branch that depends on the lane. (rustc marks no `asm!` as convergent,
//! so LLVM may not know this; the PTX tests count the instructions.)
//! [`mma_m16n8k8_tf32`] takes and returns registers only and touches no
//! memory, so it is safe to call; breaking the convergence rule is a wrong
//! result, not memory unsafety. [`SharedTile::load_matrix_x4`] reads
//! shared memory, with the contract of [`super::shared`]'s loads for every
//! lane's row.
//!
//! On the host the CPU emulator runs the same calls: the lanes of a warp
//! meet at a rendezvous, one multiply computes the 16 x 8 result from all
//! 32 lanes' fragments with the layout above, and each lane gets its part
//! back. A lane that never arrives (it exited, or waits at a barrier) is
//! reported as a broken warp collective, like a broken barrier.

use super::shared::SharedTile;
use crate::elem::{Elem, Element, Fp8};

/// `x` rounded to TF32 (`cvt.rna.tf32.f32`: to nearest, ties away from
/// zero, keeping 10 of f32's 23 mantissa bits), as the bits of an f32
/// whose low 13 bits are zero. The tensor core would otherwise just
/// ignore those bits (round toward zero).
#[inline(always)]
pub fn to_tf32(x: f32) -> u32 {
    backend::to_tf32(x)
}

/// 3xTF32's split of `x` (step 23): `(big, small)`, TF32 bit patterns
/// with `big = tf32(x)` and `small = tf32(x - big)`, both rounded to
/// nearest, so that `big + small` is `x` to about 22 significant bits.
/// The subtraction is exact in f32 (`big` is `x` with its low 13 bits
/// rounded away). A value whose remainder is not finite (infinity, NaN,
/// or a finite `x` that rounds to infinity) keeps `big` alone, so an
/// infinity stays one instead of turning into `inf - inf`.
#[inline(always)]
pub fn split_tf32(x: f32) -> (u32, u32) {
    let big = to_tf32(x);
    let rest = x - f32::from_bits(big);
    (big, if rest.is_finite() { to_tf32(rest) } else { 0 })
}

/// `c += A * B` for one 16 x 8 x 8 TF32 tile held by the calling warp, in
/// the fragment layout of this module's table: `a` and `b` from
/// [`to_tf32`], `c` accumulated in f32.
///
/// Every lane of the warp must make the same call at the same time (see
/// the safety model).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k8_tf32(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
    backend::mma_m16n8k8_tf32(c, a, b)
}

/// `c += A * B` for one 16 x 8 x 16 tile of 16-bit type `T` (BF16 or
/// FP16) held by the calling warp, in the `m16n8k16` layout of this
/// module's second table; `c` accumulates in f32.
///
/// Every lane of the warp must make the same call at the same time (see
/// the safety model).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k16<T: Element>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
    const {
        assert!(
            matches!(T::ELEM, Elem::Bf16 | Elem::F16),
            "m16n8k16 takes BF16 or FP16"
        )
    };
    backend::mma_m16n8k16::<T>(c, a, b)
}

/// `c += A * B` for one 16 x 8 x 32 tile of FP8 `A` (16 x 32) and `B`
/// (32 x 8), each E4M3 or E5M2, held by the calling warp in the
/// `m16n8k32` layout of this module's third table; `c` accumulates in
/// f32.
///
/// Every lane of the warp must make the same call at the same time (see
/// the safety model).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k32<A: Fp8, B: Fp8>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
    backend::mma_m16n8k32::<A, B>(c, a, b)
}

impl<const ROWS: usize, const COLS: usize> SharedTile<ROWS, COLS> {
    /// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as
    /// [`Self::load_matrix_x4`], but each matrix is handed out transposed,
    /// as 16-bit values: lane `(g, t)` gets, for each of the four
    /// matrices, elements `g` of rows `2t` and `2t + 1` (the low half and
    /// the high half of the register).
    ///
    /// # Safety
    /// As [`Self::load_matrix_x4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_matrix_x4_trans(self, row: usize, col: usize) -> [u32; 4] {
        // SAFETY: forwarded from this function's contract.
        unsafe { backend::load_matrix_x4_trans(self.word(row, col)) }
    }

    /// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: this lane names
    /// `tile[row][col..col + 4]` as row `lane % 8` of matrix `lane / 8`, and
    /// gets back, for each of the four matrices, word `lane % 4` of its row
    /// `lane / 4` (raw f32 bits, as stored).
    ///
    /// # Safety
    /// Every lane of the warp calls it together (module safety model);
    /// `row < ROWS`, `col + 4 <= COLS`, the word `tile[row][col]` is a
    /// multiple of 4 (16-byte aligned), the launch provides the tile's
    /// shared memory, and no thread writes these words between the barriers
    /// around the call.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_matrix_x4(self, row: usize, col: usize) -> [f32; 4] {
        // SAFETY: forwarded from this function's contract.
        unsafe { backend::load_matrix_x4(self.word(row, col)) }
    }
}

/// The nvptx backend: one instruction each.
#[cfg(target_arch = "nvptx64")]
mod backend {
    use crate::device::shared;
    use crate::elem::{Elem, Element, Fp8};
    use core::arch::asm;

    /// `ldmatrix.sync.aligned.m8n8.x4{$shape}.shared.b16` of the rows at
    /// `$word`, the four registers as they come.
    macro_rules! ldmatrix_x4 {
        ($shape:literal, $word:expr) => {{
            let (d0, d1, d2, d3): (u32, u32, u32, u32);
            // SAFETY: every lane's 16-byte row is inside shared memory and
            // aligned, and the warp is converged (caller). Reads memory: no
            // `nomem`, so LLVM keeps it after the barrier before it.
            unsafe {
                asm!(
                    concat!(
                        "ldmatrix.sync.aligned.m8n8.x4", $shape, ".shared.b16 ",
                        "{{{d0}, {d1}, {d2}, {d3}}}, [{addr}];"
                    ),
                    d0 = out(reg32) d0,
                    d1 = out(reg32) d1,
                    d2 = out(reg32) d2,
                    d3 = out(reg32) d3,
                    addr = in(reg32) shared::address($word),
                    options(nostack, readonly),
                );
            }
            [d0, d1, d2, d3]
        }};
    }

    /// # Safety
    /// As [`super::SharedTile::load_matrix_x4`], for the word `word`.
    #[inline(always)]
    pub unsafe fn load_matrix_x4(word: usize) -> [f32; 4] {
        ldmatrix_x4!("", word).map(f32::from_bits)
    }

    /// # Safety
    /// As [`super::SharedTile::load_matrix_x4_trans`], for the word `word`.
    #[inline(always)]
    pub unsafe fn load_matrix_x4_trans(word: usize) -> [u32; 4] {
        ldmatrix_x4!(".trans", word)
    }

    /// `mma.sync.aligned.$shape.row.col.f32.$a.$b.f32` on registers: the
    /// 16- and 8-bit forms (four registers of A, two of B, four of C).
    macro_rules! mma_sync {
        ($shape:literal, $a_ty:literal, $b_ty:literal, $c:ident, $a:ident, $b:ident) => {
            // SAFETY: as for `mma_m16n8k8_tf32`: registers only.
            unsafe {
                asm!(
                    concat!(
                        "mma.sync.aligned.", $shape, ".row.col.f32.", $a_ty, ".", $b_ty, ".f32 ",
                        "{{{c0}, {c1}, {c2}, {c3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, ",
                        "{{{c0}, {c1}, {c2}, {c3}}};"
                    ),
                    c0 = inout(reg32) $c[0],
                    c1 = inout(reg32) $c[1],
                    c2 = inout(reg32) $c[2],
                    c3 = inout(reg32) $c[3],
                    a0 = in(reg32) $a[0],
                    a1 = in(reg32) $a[1],
                    a2 = in(reg32) $a[2],
                    a3 = in(reg32) $a[3],
                    b0 = in(reg32) $b[0],
                    b1 = in(reg32) $b[1],
                    options(nomem, nostack),
                )
            }
        };
    }

    /// `T` is BF16 or FP16 (the caller's `const` check); one of the two
    /// branches survives monomorphisation.
    #[inline(always)]
    pub fn mma_m16n8k16<T: Element>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        if matches!(T::ELEM, Elem::Bf16) {
            mma_sync!("m16n8k16", "bf16", "bf16", c, a, b);
        } else {
            mma_sync!("m16n8k16", "f16", "f16", c, a, b);
        }
    }

    /// One of the four branches survives monomorphisation.
    #[inline(always)]
    pub fn mma_m16n8k32<A: Fp8, B: Fp8>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        match (matches!(A::ELEM, Elem::E4m3), matches!(B::ELEM, Elem::E4m3)) {
            (true, true) => mma_sync!("m16n8k32", "e4m3", "e4m3", c, a, b),
            (true, false) => mma_sync!("m16n8k32", "e4m3", "e5m2", c, a, b),
            (false, true) => mma_sync!("m16n8k32", "e5m2", "e4m3", c, a, b),
            (false, false) => mma_sync!("m16n8k32", "e5m2", "e5m2", c, a, b),
        }
    }

    #[inline(always)]
    pub fn to_tf32(x: f32) -> u32 {
        let r: u32;
        // SAFETY: a register-to-register conversion: no memory, no
        // preconditions (sm_80+, which the `mma` module targets).
        unsafe {
            asm!(
                "cvt.rna.tf32.f32 {r}, {x};",
                r = out(reg32) r,
                x = in(reg32) x,
                options(pure, nomem, nostack),
            );
        }
        r
    }

    #[inline(always)]
    pub fn mma_m16n8k8_tf32(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        // SAFETY: registers in, registers out; no memory is touched. The
        // warp-convergence rule of the module's safety model is the
        // caller's; `nomem` without `pure` keeps LLVM from deleting or
        // merging the call.
        unsafe {
            asm!(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \
                 {{{c0}, {c1}, {c2}, {c3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
                 {{{c0}, {c1}, {c2}, {c3}}};",
                c0 = inout(reg32) c[0],
                c1 = inout(reg32) c[1],
                c2 = inout(reg32) c[2],
                c3 = inout(reg32) c[3],
                a0 = in(reg32) a[0],
                a1 = in(reg32) a[1],
                a2 = in(reg32) a[2],
                a3 = in(reg32) a[3],
                b0 = in(reg32) b[0],
                b1 = in(reg32) b[1],
                options(nomem, nostack),
            );
        }
    }
}

// On the host: the CPU emulator's warp rendezvous.
#[cfg(not(target_arch = "nvptx64"))]
use crate::emu::backend::mma as backend;
