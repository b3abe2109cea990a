//! Hopper's warpgroup tensor-core instructions (`wgmma`, sm_90a): four
//! warps (a *warpgroup*, 128 threads starting at a warp index divisible
//! by 4) multiply a 64 x N x 8 TF32 tile (64 x N x 16 for BF16 and FP16,
//! [`Wgmma16`]; 64 x N x 32 for FP8, [`Fp8Pair`]) together,
//! asynchronously.
//!
//! `wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32` computes
//! `D += A * B` with A (64 x 8) in registers or shared memory and B (8 x N)
//! in shared memory, named by a 64-bit *matrix descriptor*
//! ([`descriptor_k_major_sw128`]). For TF32 both A and B must be
//! *K-major* (the 8 values of K contiguous per row of A and per column of
//! B); there is no transposed form. D is in registers, `N / 2` f32 per
//! thread. With warp `w` of the warpgroup and `g = lane / 4`,
//! `t = lane % 4` (PTX ISA, "Register Fragments and Shared Memory Matrix
//! Layouts" for `wgmma` `.tf32`):
//!
//! | fragment | registers | thread holds |
//! |---|---|---|
//! | A (64 x 8, registers) | `a[0..4]` | `A[16w + g][t]`, `A[16w + g + 8][t]`, `A[16w + g][t + 4]`, `A[16w + g + 8][t + 4]` |
//! | D (64 x N) | `d[4j..4j + 4]` | `D[16w + g][8j + 2t + {0, 1}]`, `D[16w + g + 8][8j + 2t + {0, 1}]` |
//!
//! (each warp's 16 rows are an `mma.sync` m16n8k8 tile's layout,
//! [`super::mma`], repeated along N; D's layout is the same for the
//! 16-bit forms). The 16-bit forms (`m64nNk16.f32.bf16.bf16`, `.f16`)
//! read either operand from shared memory K-major or, with its
//! `imm-trans` bit set, MN-major ([`descriptor_mn_major_sw128`]), so a
//! row-major B (K x N, N contiguous) is read as it is stored. The instruction is asynchronous:
//! [`commit_group`] closes the `wgmma`s issued since the last commit into
//! a group and [`wait_group`] waits until at most `N` groups are pending.
//! Until then the hardware may still read A's registers and the shared
//! memory of B and write D.
//!
//! Safety model:
//!
//! 1. Warpgroup-collective: every thread of the warpgroup runs the same
//!    `wgmma` instruction, converged (`.sync.aligned`). Callers keep them
//!    out of branches that differ between the warpgroup's threads.
//!    (rustc marks no `asm!` convergent; the PTX tests count them.)
//! 2. Registers: [`fence`] comes after the last ordinary write of D or A
//!    and before the `wgmma`s that read them; nothing touches D or A
//!    between an `mma_async` and the [`wait_group`] that retires it. The
//!    helpers take D (and A) as `inout` operands of the fence and the
//!    wait, so LLVM keeps its own reads and writes of them outside that
//!    window; ptxas checks the rest and warns (C7510, serialisation)
//!    where it cannot prove it, which the PTX tests treat as an error.
//! 3. Shared memory: the descriptor names a tile laid out as it says
//!    (K-major, 128-byte swizzle, 8-row atoms 1024 bytes apart, 1024-byte
//!    aligned) inside the launch's shared memory, written before the
//!    `wgmma` by a copy whose completion this thread has observed (an
//!    [`super::mbarrier::MBarrier`] wait), or by threads that then ran
//!    [`fence_proxy_async`] and met this thread at a barrier, and not
//!    overwritten until the `wgmma` is retired.
//!
//! GPU only, like [`super::mbarrier`].

use core::arch::asm;

use super::shared;

/// A shared-memory matrix descriptor for `wgmma`: a K-major tile whose
/// rows are 128 bytes (32 TF32 values) stored with the 128-byte swizzle
/// (16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)`, TMA's
/// `CU_TENSOR_MAP_SWIZZLE_128B`), starting at word `word` of shared
/// memory, which must be 1024-byte aligned except for the offset of the
/// K step within the row (a multiple of 32 bytes).
///
/// Fields (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in
/// bits 0-13; leading-dimension byte offset >> 4 in 16-29 (unused by
/// swizzled K-major layouts; 1 by convention); stride byte offset >> 4 in
/// 32-45 (1024: from one 8-row atom to the next); swizzle mode in 62-63
/// (1: 128 bytes).
#[inline(always)]
pub fn descriptor_k_major_sw128(word: usize) -> u64 {
    let address = shared::address(word) as u64;
    ((address & 0x3_FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)
}

/// An MN-major shared-memory matrix descriptor with the 128-byte swizzle,
/// for a 16-bit operand stored MN-major: B (K x N) row-major, whose rows
/// of 64 N values (128 bytes) lie 128 bytes apart along K, in 8-row atoms
/// of 1024 bytes (TMA's `CU_TENSOR_MAP_SWIZZLE_128B` box of 64 columns),
/// starting at word `word` of shared memory (1024-byte aligned but for a
/// K offset that is a multiple of 8 rows). The canonical layout (PTX ISA,
/// "Shared Memory Matrix Layout", MN-major with 128-byte swizzling) is
/// `((64, m), (8, k))` elements with strides `((1, lbo), (64, sbo))`: the
/// leading-dimension offset `lbo_bytes` steps from one 64-wide column of
/// atoms to the next along N (the next TMA box), the stride offset, 1024
/// bytes, from one 8-row atom to the next along K.
#[inline(always)]
pub fn descriptor_mn_major_sw128(word: usize, lbo_bytes: u32) -> u64 {
    let address = shared::address(word) as u64;
    ((address & 0x3_FFFF) >> 4) | ((lbo_bytes as u64 >> 4) << 16) | ((1024 >> 4) << 32) | (1 << 62)
}

/// Generates a `wgmma` helper whose `asm!` names all of D's registers.
/// `[$first $($i)*]` lists D's register indices (0 .. N / 2).
macro_rules! with_d {
    (
        $(#[$meta:meta])*
        fn $name:ident $(<$(const $g:ident: $gt:ty),+>)? (d: [f32; $regs:literal] $(, $arg:ident: $ty:ty)*)
        template: ($($template:expr),+)
        regs: [$first:literal $($i:literal)*]
        operands: ($($operands:tt)*)
    ) => {
        $(#[$meta])*
        #[inline(always)]
        pub unsafe fn $name $(<$(const $g: $gt),+>)? (d: &mut [f32; $regs] $(, $arg: $ty)*) {
            // SAFETY: the caller upholds the module's rules 1-3.
            unsafe {
                asm!(
                    concat!($($template),+),
                    inout(reg32) d[$first], $(inout(reg32) d[$i],)*
                    $($operands)*
                );
            }
        }
    };
}

/// D's register list for the `asm!` template: `{0}, {1}, ...`.
macro_rules! d_list {
    ([$first:literal $($i:literal)*]) => {
        concat!("{", $first, "}" $(, ", {", $i, "}")*)
    };
}

with_d! {
    /// `wgmma.fence.sync.aligned` with every register operand of the
    /// coming group as operands: D, the A fragments and B's descriptors.
    /// Orders this thread's earlier writes of D and A before the `wgmma`s
    /// that follow (rule 2), and keeps LLVM from computing any of them
    /// between the fence and the `wgmma`s, which ptxas answers by
    /// serialising them (C7513).
    ///
    /// # Safety
    /// Rule 1.
    fn fence_128(d: [f32; 128], a: &mut [[u32; 4]; 4], b: &mut [u64; 4])
    template: ("wgmma.fence.sync.aligned; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
        " {a0} {a1} {a2} {a3} {a4} {a5} {a6} {a7} {a8} {a9} {a10} {a11} {a12} {a13} {a14} {a15}",
        " {b0} {b1} {b2} {b3}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (
        a0 = inout(reg32) a[0][0], a1 = inout(reg32) a[0][1], a2 = inout(reg32) a[0][2], a3 = inout(reg32) a[0][3],
        a4 = inout(reg32) a[1][0], a5 = inout(reg32) a[1][1], a6 = inout(reg32) a[1][2], a7 = inout(reg32) a[1][3],
        a8 = inout(reg32) a[2][0], a9 = inout(reg32) a[2][1], a10 = inout(reg32) a[2][2], a11 = inout(reg32) a[2][3],
        a12 = inout(reg32) a[3][0], a13 = inout(reg32) a[3][1], a14 = inout(reg32) a[3][2], a15 = inout(reg32) a[3][3],
        b0 = inout(reg64) b[0], b1 = inout(reg64) b[1], b2 = inout(reg64) b[2], b3 = inout(reg64) b[3],
        options(nostack),
    )
}

with_d! {
    /// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`, A from
    /// registers: `d += a * B`, with `a` this thread's part of the 64 x 8
    /// A (module table; TF32 bits from [`super::mma::to_tf32`]) and B the
    /// 8 x 256 K-major tile `b` describes. Asynchronous: retire it with
    /// [`commit_group`] and [`wait_group_128`].
    ///
    /// # Safety
    /// Rules 1-3.
    fn mma_m64n256k8_tf32(d: [f32; 128], a: [u32; 4], b: u64)
    template: ("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
        "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, 1, 1, 1;")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (
        a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
        b = in(reg64) b,
        options(nostack),
    )
}

with_d! {
    /// `wgmma.wait_group.sync.aligned PENDING` with D and an A as
    /// operands: waits until at most `PENDING` groups of this thread's
    /// `wgmma`s are in flight; D then holds the retired ones' results, and
    /// `a`, the registers of a retired group's A, may be written again
    /// (rule 2). Naming `a` keeps LLVM from reusing those registers for
    /// the next group's A while the hardware may still read them: ptxas
    /// would see them redefined inside the pipeline and serialise every
    /// `wgmma` (C7513).
    ///
    /// # Safety
    /// Rule 1.
    fn wait_group_128<const PENDING: u32>(d: [f32; 128], a: &mut [[u32; 4]; 4])
    template: ("wgmma.wait_group.sync.aligned {n}; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
        " {a0} {a1} {a2} {a3} {a4} {a5} {a6} {a7} {a8} {a9} {a10} {a11} {a12} {a13} {a14} {a15}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (
        n = const PENDING,
        a0 = inout(reg32) a[0][0], a1 = inout(reg32) a[0][1], a2 = inout(reg32) a[0][2], a3 = inout(reg32) a[0][3],
        a4 = inout(reg32) a[1][0], a5 = inout(reg32) a[1][1], a6 = inout(reg32) a[1][2], a7 = inout(reg32) a[1][3],
        a8 = inout(reg32) a[2][0], a9 = inout(reg32) a[2][1], a10 = inout(reg32) a[2][2], a11 = inout(reg32) a[2][3],
        a12 = inout(reg32) a[3][0], a13 = inout(reg32) a[3][1], a14 = inout(reg32) a[3][2], a15 = inout(reg32) a[3][3],
        options(nostack),
    )
}

with_d! {
    /// `wgmma.fence.sync.aligned` for a group whose operands are both in
    /// shared memory: D and the descriptors of A (`a`) and B (`b`) as
    /// operands, for the reasons of [`fence_128`].
    ///
    /// # Safety
    /// Rule 1.
    fn fence_ss_128(d: [f32; 128], a: &mut [u64; 4], b: &mut [u64; 4])
    template: ("wgmma.fence.sync.aligned; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
        " {a0} {a1} {a2} {a3} {b0} {b1} {b2} {b3}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (
        a0 = inout(reg64) a[0], a1 = inout(reg64) a[1], a2 = inout(reg64) a[2], a3 = inout(reg64) a[3],
        b0 = inout(reg64) b[0], b1 = inout(reg64) b[1], b2 = inout(reg64) b[2], b3 = inout(reg64) b[3],
        options(nostack),
    )
}

with_d! {
    /// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`, both
    /// operands from shared memory: `d += A * B`, with A the 64 x 8
    /// K-major tile `a` describes and B the 8 x 256 K-major tile `b`
    /// describes. With no register operand but D, groups of these can stay
    /// in flight while the threads do other work ([`wait_ss_128`] with
    /// `PENDING` = 1).
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles).
    fn mma_m64n256k8_tf32_ss(d: [f32; 128], a: u64, b: u64)
    template: ("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
        "}}, {a}, {b}, 1, 1, 1;")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (
        a = in(reg64) a,
        b = in(reg64) b,
        options(nostack),
    )
}

/// The 16-bit `m64n256k16` helpers, both operands from shared memory:
/// one per type, the PTX type `$ty` their only difference.
macro_rules! mma_m64n256k16_ss {
    ($(#[$meta:meta])* $name:ident, $ty:literal) => {
        with_d! {
            $(#[$meta])*
            fn $name<const TRANS_A: u32, const TRANS_B: u32>(d: [f32; 128], a: u64, b: u64)
            template: ("wgmma.mma_async.sync.aligned.m64n256k16.f32.", $ty, ".", $ty, " {{", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
                "}}, {a}, {b}, 1, 1, 1, {ta}, {tb};")
            regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
            operands: (
                a = in(reg64) a,
                b = in(reg64) b,
                ta = const TRANS_A,
                tb = const TRANS_B,
                options(nostack),
            )
        }
    };
}

mma_m64n256k16_ss! {
    /// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`, both
    /// operands from shared memory: `d += A * B` with A the 64 x 16 tile
    /// `a` describes and B the 16 x 256 tile `b` describes, each K-major
    /// (`TRANS_* = 0`, [`descriptor_k_major_sw128`]) or MN-major (`1`,
    /// [`descriptor_mn_major_sw128`]). Retire it with [`commit_group`]
    /// and [`wait_ss_128`].
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles); `TRANS_A` and `TRANS_B` are 0 or 1.
    mma_m64n256k16_bf16_ss, "bf16"
}

mma_m64n256k16_ss! {
    /// [`mma_m64n256k16_bf16_ss`] for FP16 A and B
    /// (`wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16`).
    ///
    /// # Safety
    /// As [`mma_m64n256k16_bf16_ss`].
    mma_m64n256k16_f16_ss, "f16"
}

/// A 16-bit element type the tensor cores multiply with `wgmma ...k16`:
/// which instruction a kernel generic over the type issues.
pub trait Wgmma16: crate::elem::Element {
    /// `m64n256k16` of this type, both operands from shared memory
    /// ([`mma_m64n256k16_bf16_ss`]).
    ///
    /// # Safety
    /// As [`mma_m64n256k16_bf16_ss`].
    unsafe fn mma_m64n256k16_ss<const TRANS_A: u32, const TRANS_B: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    );
}

impl Wgmma16 for crate::elem::Bf16 {
    #[inline(always)]
    unsafe fn mma_m64n256k16_ss<const TRANS_A: u32, const TRANS_B: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { mma_m64n256k16_bf16_ss::<TRANS_A, TRANS_B>(d, a, b) }
    }
}

impl Wgmma16 for crate::elem::F16 {
    #[inline(always)]
    unsafe fn mma_m64n256k16_ss<const TRANS_A: u32, const TRANS_B: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { mma_m64n256k16_f16_ss::<TRANS_A, TRANS_B>(d, a, b) }
    }
}

/// The FP8 `m64n256k32` helpers, both operands from shared memory: one
/// per pair of types (`$a`, `$b`: `e4m3` or `e5m2`), which `wgmma`
/// allows to differ. FP8 `wgmma` has no transpose operands: both tiles
/// are K-major ([`descriptor_k_major_sw128`]: a 128-byte row holds 128
/// values of K, and each `k32` step is 32 bytes on, as a 16-bit `k16`
/// step is).
macro_rules! mma_m64n256k32_ss {
    ($(#[$meta:meta])* $name:ident, $a:literal, $b:literal) => {
        with_d! {
            $(#[$meta])*
            fn $name(d: [f32; 128], a: u64, b: u64)
            template: ("wgmma.mma_async.sync.aligned.m64n256k32.f32.", $a, ".", $b, " {{", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]),
                "}}, {a}, {b}, 1, 1, 1;")
            regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
            operands: (
                a = in(reg64) a,
                b = in(reg64) b,
                options(nostack),
            )
        }
    };
}

mma_m64n256k32_ss! {
    /// `wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3`: `d += A *
    /// B` with A the 64 x 32 E4M3 tile `a` describes and B the 32 x 256
    /// E4M3 tile `b` describes, both K-major. Retire it with
    /// [`commit_group`] and [`wait_ss_128`].
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles).
    mma_m64n256k32_e4m3_e4m3_ss, "e4m3", "e4m3"
}

mma_m64n256k32_ss! {
    /// [`mma_m64n256k32_e4m3_e4m3_ss`] for E5M2 A and E4M3 B.
    ///
    /// # Safety
    /// As [`mma_m64n256k32_e4m3_e4m3_ss`].
    mma_m64n256k32_e5m2_e4m3_ss, "e5m2", "e4m3"
}

mma_m64n256k32_ss! {
    /// [`mma_m64n256k32_e4m3_e4m3_ss`] for E4M3 A and E5M2 B.
    ///
    /// # Safety
    /// As [`mma_m64n256k32_e4m3_e4m3_ss`].
    mma_m64n256k32_e4m3_e5m2_ss, "e4m3", "e5m2"
}

mma_m64n256k32_ss! {
    /// [`mma_m64n256k32_e4m3_e4m3_ss`] for E5M2 A and B.
    ///
    /// # Safety
    /// As [`mma_m64n256k32_e4m3_e4m3_ss`].
    mma_m64n256k32_e5m2_e5m2_ss, "e5m2", "e5m2"
}

/// The FP8 `m64nNk32` helpers of a kernel that promotes its partial
/// sums (step 26), both operands from shared memory, one per pair of
/// types: `d = A * B + (ACCUMULATE ? d : 0)` on a 64 x `$n` f32 D, `$regs`
/// registers per thread (`[$r]` lists them). `ACCUMULATE = 0` (`wgmma`'s
/// `scale-d` predicate false) starts a fresh partial sum without zeroing
/// `d` first.
macro_rules! mma_fp8_k32_ss {
    ($n:literal, $regs:literal, [$($r:literal)*], $(#[$meta:meta])* $name:ident, $a:literal, $b:literal) => {
        with_d! {
            $(#[$meta])*
            fn $name<const ACCUMULATE: u32>(d: [f32; $regs], a: u64, b: u64)
            template: ("{{ .reg .pred p; setp.ne.b32 p, {acc}, 0; ",
                "wgmma.mma_async.sync.aligned.m64n", $n, "k32.f32.", $a, ".", $b, " {{", d_list!([$($r)*]),
                "}}, {a}, {b}, p, 1, 1; }}")
            regs: [$($r)*]
            operands: (
                a = in(reg64) a,
                b = in(reg64) b,
                acc = in(reg32) ACCUMULATE,
                options(nostack),
            )
        }
    };
}

/// [`mma_fp8_k32_ss`] with N = 128: 64 registers per thread.
macro_rules! mma_m64n128k32_ss {
    ($($t:tt)*) => {
        mma_fp8_k32_ss!(128, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63], $($t)*);
    };
}

/// [`mma_fp8_k32_ss`] with N = 192 (step 26's wide tile): 96 registers
/// per thread.
macro_rules! mma_m64n192k32_ss {
    ($($t:tt)*) => {
        mma_fp8_k32_ss!(192, 96, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95], $($t)*);
    };
}

mma_m64n128k32_ss! {
    /// `wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3`: `d = A *
    /// B (+ d with ACCUMULATE = 1)` with A the 64 x 32 E4M3 tile `a`
    /// describes and B the 32 x 128 E4M3 tile `b` describes, both
    /// K-major. Retire it with [`commit_group`] and [`wait_ss_64x2`].
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles); `ACCUMULATE` is 0 or 1.
    mma_m64n128k32_e4m3_e4m3_ss, "e4m3", "e4m3"
}

mma_m64n128k32_ss! {
    /// [`mma_m64n128k32_e4m3_e4m3_ss`] for E5M2 A and E4M3 B.
    ///
    /// # Safety
    /// As [`mma_m64n128k32_e4m3_e4m3_ss`].
    mma_m64n128k32_e5m2_e4m3_ss, "e5m2", "e4m3"
}

mma_m64n128k32_ss! {
    /// [`mma_m64n128k32_e4m3_e4m3_ss`] for E4M3 A and E5M2 B.
    ///
    /// # Safety
    /// As [`mma_m64n128k32_e4m3_e4m3_ss`].
    mma_m64n128k32_e4m3_e5m2_ss, "e4m3", "e5m2"
}

mma_m64n128k32_ss! {
    /// [`mma_m64n128k32_e4m3_e4m3_ss`] for E5M2 A and B.
    ///
    /// # Safety
    /// As [`mma_m64n128k32_e4m3_e4m3_ss`].
    mma_m64n128k32_e5m2_e5m2_ss, "e5m2", "e5m2"
}

mma_m64n192k32_ss! {
    /// `wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3`: `d = A *
    /// B (+ d with ACCUMULATE = 1)` with A the 64 x 32 E4M3 tile `a`
    /// describes and B the 32 x 192 E4M3 tile `b` describes, both
    /// K-major. Retire it with [`commit_group`] and [`wait_ss_96x2`].
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles); `ACCUMULATE` is 0 or 1.
    mma_m64n192k32_e4m3_e4m3_ss, "e4m3", "e4m3"
}

mma_m64n192k32_ss! {
    /// [`mma_m64n192k32_e4m3_e4m3_ss`] for E5M2 A and E4M3 B.
    ///
    /// # Safety
    /// As [`mma_m64n192k32_e4m3_e4m3_ss`].
    mma_m64n192k32_e5m2_e4m3_ss, "e5m2", "e4m3"
}

mma_m64n192k32_ss! {
    /// [`mma_m64n192k32_e4m3_e4m3_ss`] for E4M3 A and E5M2 B.
    ///
    /// # Safety
    /// As [`mma_m64n192k32_e4m3_e4m3_ss`].
    mma_m64n192k32_e4m3_e5m2_ss, "e4m3", "e5m2"
}

mma_m64n192k32_ss! {
    /// [`mma_m64n192k32_e4m3_e4m3_ss`] for E5M2 A and B.
    ///
    /// # Safety
    /// As [`mma_m64n192k32_e4m3_e4m3_ss`].
    mma_m64n192k32_e5m2_e5m2_ss, "e5m2", "e5m2"
}

with_d! {
    /// [`fence_ss_64`] for a group of [`mma_m64n192k32_e4m3_e4m3_ss`]:
    /// its 96-register partial sum and eight descriptors as operands.
    ///
    /// # Safety
    /// Rule 1.
    fn fence_ss_96(d: [f32; 96], s: &mut [u64; 8])
    template: ("wgmma.fence.sync.aligned; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95]),
        " {s0} {s1} {s2} {s3} {s4} {s5} {s6} {s7}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95]
    operands: (
        s0 = inout(reg64) s[0], s1 = inout(reg64) s[1], s2 = inout(reg64) s[2], s3 = inout(reg64) s[3],
        s4 = inout(reg64) s[4], s5 = inout(reg64) s[5], s6 = inout(reg64) s[6], s7 = inout(reg64) s[7],
        options(nostack),
    )
}

with_d! {
    /// `wgmma.fence.sync.aligned` for a group of [`mma_m64n128k32_e4m3_e4m3_ss`]
    /// (step 26) or of [`mma_m64n128k8_tf32_ss`] (steps 17-18's 128-row
    /// tiles, [`Tf32Ss`]): the 64-register partial sum the group writes and the
    /// group's eight descriptors (four of A's, four of B's) as operands,
    /// for the reasons of [`fence_128`].
    ///
    /// # Safety
    /// Rule 1.
    fn fence_ss_64(d: [f32; 64], s: &mut [u64; 8])
    template: ("wgmma.fence.sync.aligned; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]),
        " {s0} {s1} {s2} {s3} {s4} {s5} {s6} {s7}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
    operands: (
        s0 = inout(reg64) s[0], s1 = inout(reg64) s[1], s2 = inout(reg64) s[2], s3 = inout(reg64) s[3],
        s4 = inout(reg64) s[4], s5 = inout(reg64) s[5], s6 = inout(reg64) s[6], s7 = inout(reg64) s[7],
        options(nostack),
    )
}

/// The operand types of a `wgmma` whose A and B both come from shared
/// memory in tiles of 128-byte rows, with an f32 D of 64 x 256: what a
/// kernel generic over its element types issues for each 32 bytes of K
/// (16 values of a 16-bit type, [`Wgmma16`]; 32 of FP8, [`Fp8Pair`]).
pub trait WgmmaAb {
    /// A's stored type.
    type A: crate::elem::Element;
    /// B's stored type.
    type B: crate::elem::Element;
    /// `m64n256` over 32 bytes of K: [`mma_m64n256k16_bf16_ss`] and its
    /// FP16 twin, or [`mma_m64n256k32_e4m3_e4m3_ss`] and its siblings.
    ///
    /// # Safety
    /// As those; `TRANS_A` and `TRANS_B` are 0 or 1 for the 16-bit types
    /// and 0 for FP8, which reads K-major tiles only (its impls refuse
    /// anything else at compile time).
    unsafe fn mma_m64n256_ss<const TRANS_A: u32, const TRANS_B: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    );
}

impl<T: Wgmma16> WgmmaAb for T {
    type A = T;
    type B = T;
    #[inline(always)]
    unsafe fn mma_m64n256_ss<const TRANS_A: u32, const TRANS_B: u32>(
        d: &mut [f32; 128],
        a: u64,
        b: u64,
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { T::mma_m64n256k16_ss::<TRANS_A, TRANS_B>(d, a, b) }
    }
}

/// FP8 A of type `A` and B of type `B` (`E4m3` or `E5m2`), as a
/// [`WgmmaAb`].
pub struct Fp8Pair<A, B>(core::marker::PhantomData<(A, B)>);

/// A pair of FP8 types whose kernel promotes its partial sums (step 26),
/// each `ACC` registers per thread (a 64 x 2 `ACC` tile per warpgroup):
/// the `m64n(2 ACC)k32` that writes one, and the fence and the wait of
/// its groups.
pub trait WgmmaFp8<const ACC: usize>: WgmmaAb {
    /// [`mma_m64n128k32_e4m3_e4m3_ss`] (`ACC` = 64),
    /// [`mma_m64n192k32_e4m3_e4m3_ss`] (96) or a sibling, for these types.
    ///
    /// # Safety
    /// As [`mma_m64n128k32_e4m3_e4m3_ss`].
    unsafe fn mma_k32_ss<const ACCUMULATE: u32>(d: &mut [f32; ACC], a: u64, b: u64);

    /// [`fence_ss_64`] or [`fence_ss_96`].
    ///
    /// # Safety
    /// Rule 1.
    unsafe fn fence(d: &mut [f32; ACC], s: &mut [u64; 8]);

    /// [`wait_ss_64x2`] or [`wait_ss_96x2`].
    ///
    /// # Safety
    /// Rule 1.
    unsafe fn wait<const PENDING: u32>(d: &mut [f32; ACC], e: &mut [f32; ACC]);
}

/// The [`WgmmaFp8`] of a pair of FP8 types for `ACC` registers, issuing
/// `$mma` and retiring with `$fence` and `$wait`.
macro_rules! fp8_sum {
    ($a:ident, $b:ident, $acc:literal, $mma:ident, $fence:ident, $wait:ident) => {
        impl WgmmaFp8<$acc> for Fp8Pair<crate::elem::$a, crate::elem::$b> {
            #[inline(always)]
            unsafe fn mma_k32_ss<const ACCUMULATE: u32>(d: &mut [f32; $acc], a: u64, b: u64) {
                // SAFETY: forwarded from the caller's contract.
                unsafe { $mma::<ACCUMULATE>(d, a, b) }
            }
            #[inline(always)]
            unsafe fn fence(d: &mut [f32; $acc], s: &mut [u64; 8]) {
                // SAFETY: forwarded from the caller's contract.
                unsafe { $fence(d, s) }
            }
            #[inline(always)]
            unsafe fn wait<const PENDING: u32>(d: &mut [f32; $acc], e: &mut [f32; $acc]) {
                // SAFETY: forwarded from the caller's contract.
                unsafe { $wait::<PENDING>(d, e) }
            }
        }
    };
}

/// The [`WgmmaAb`] and [`WgmmaFp8`]s of one pair of FP8 types, issuing
/// `$mma` (N = 256), `$mma128` (N = 128) and `$mma192` (N = 192).
macro_rules! fp8_pair {
    ($a:ident, $b:ident, $mma:ident, $mma128:ident, $mma192:ident) => {
        fp8_sum!($a, $b, 64, $mma128, fence_ss_64, wait_ss_64x2);
        fp8_sum!($a, $b, 96, $mma192, fence_ss_96, wait_ss_96x2);
        impl WgmmaAb for Fp8Pair<crate::elem::$a, crate::elem::$b> {
            type A = crate::elem::$a;
            type B = crate::elem::$b;
            #[inline(always)]
            unsafe fn mma_m64n256_ss<const TRANS_A: u32, const TRANS_B: u32>(
                d: &mut [f32; 128],
                a: u64,
                b: u64,
            ) {
                const {
                    assert!(
                        TRANS_A == 0 && TRANS_B == 0,
                        "FP8 wgmma reads K-major operands only"
                    )
                };
                // SAFETY: forwarded from the caller's contract.
                unsafe { $mma(d, a, b) }
            }
        }
    };
}

fp8_pair!(
    E4m3,
    E4m3,
    mma_m64n256k32_e4m3_e4m3_ss,
    mma_m64n128k32_e4m3_e4m3_ss,
    mma_m64n192k32_e4m3_e4m3_ss
);
fp8_pair!(
    E5m2,
    E4m3,
    mma_m64n256k32_e5m2_e4m3_ss,
    mma_m64n128k32_e5m2_e4m3_ss,
    mma_m64n192k32_e5m2_e4m3_ss
);
fp8_pair!(
    E4m3,
    E5m2,
    mma_m64n256k32_e4m3_e5m2_ss,
    mma_m64n128k32_e4m3_e5m2_ss,
    mma_m64n192k32_e4m3_e5m2_ss
);
fp8_pair!(
    E5m2,
    E5m2,
    mma_m64n256k32_e5m2_e5m2_ss,
    mma_m64n128k32_e5m2_e5m2_ss,
    mma_m64n192k32_e5m2_e5m2_ss
);

with_d! {
    /// `wgmma.wait_group.sync.aligned PENDING` with D as operands, for
    /// groups of [`mma_m64n256k8_tf32_ss`], the 16-bit
    /// [`mma_m64n256k16_bf16_ss`] or the FP8
    /// [`mma_m64n256k32_e4m3_e4m3_ss`] (no register A to name).
    ///
    /// # Safety
    /// Rule 1.
    fn wait_ss_128<const PENDING: u32>(d: [f32; 128])
    template: ("wgmma.wait_group.sync.aligned {n}; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]))
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
    operands: (n = const PENDING, options(nostack))
}

with_d! {
    /// `wgmma.wait_group.sync.aligned PENDING` with D as operands, for
    /// groups of [`mma_m64n128k8_tf32_ss`] writing one 64-register
    /// accumulator (steps 17-18's 128-row tiles; step 24 keeps two,
    /// [`wait_ss_64x2`]).
    ///
    /// # Safety
    /// Rule 1.
    fn wait_ss_64<const PENDING: u32>(d: [f32; 64])
    template: ("wgmma.wait_group.sync.aligned {n}; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]))
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
    operands: (n = const PENDING, options(nostack))
}

/// The TF32 `wgmma` of a consumer warpgroup whose operands both come
/// from shared memory (steps 17 and 18), with D of 64 x (2 `ACC`): a
/// tile of `2 ACC` rows of C per block. `m64n256k8` ([`fence_ss_128`],
/// [`mma_m64n256k8_tf32_ss`], [`wait_ss_128`]) for `ACC` = 128,
/// `m64n128k8` ([`fence_ss_64`], [`mma_m64n128k8_tf32_ss`],
/// [`wait_ss_64`]) for 64.
pub trait Tf32Ss<const ACC: usize> {
    /// The fence before a group, with D and the group's descriptors of A
    /// (`a`) and B (`b`) as operands.
    ///
    /// # Safety
    /// Rule 1.
    unsafe fn fence(d: &mut [f32; ACC], a: &mut [u64; 4], b: &mut [u64; 4]);
    /// `d += A * B` over 8 of K, A and B the K-major tiles `a` and `b`
    /// describe.
    ///
    /// # Safety
    /// Rules 1-3.
    unsafe fn mma(d: &mut [f32; ACC], a: u64, b: u64);
    /// Waits until at most `PENDING` groups are in flight.
    ///
    /// # Safety
    /// Rule 1.
    unsafe fn wait<const PENDING: u32>(d: &mut [f32; ACC]);
}

/// TF32 operands, as a [`Tf32Ss`].
pub struct Tf32;

impl Tf32Ss<128> for Tf32 {
    #[inline(always)]
    unsafe fn fence(d: &mut [f32; 128], a: &mut [u64; 4], b: &mut [u64; 4]) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { fence_ss_128(d, a, b) }
    }
    #[inline(always)]
    unsafe fn mma(d: &mut [f32; 128], a: u64, b: u64) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { mma_m64n256k8_tf32_ss(d, a, b) }
    }
    #[inline(always)]
    unsafe fn wait<const PENDING: u32>(d: &mut [f32; 128]) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { wait_ss_128::<PENDING>(d) }
    }
}

impl Tf32Ss<64> for Tf32 {
    #[inline(always)]
    unsafe fn fence(d: &mut [f32; 64], a: &mut [u64; 4], b: &mut [u64; 4]) {
        let mut s = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
        // SAFETY: forwarded from the caller's contract.
        unsafe { fence_ss_64(d, &mut s) };
        // The fenced values, so that nothing computes them after it.
        *a = [s[0], s[1], s[2], s[3]];
        *b = [s[4], s[5], s[6], s[7]];
    }
    #[inline(always)]
    unsafe fn mma(d: &mut [f32; 64], a: u64, b: u64) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { mma_m64n128k8_tf32_ss::<1>(d, a, b) }
    }
    #[inline(always)]
    unsafe fn wait<const PENDING: u32>(d: &mut [f32; 64]) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { wait_ss_64::<PENDING>(d) }
    }
}

with_d! {
    /// `wgmma.fence.sync.aligned` for a group of [`mma_m64n128k8_tf32_ss`]
    /// (step 24): the two 64-register accumulators the group may write or
    /// that were last touched by the threads (`d`, `e`) and the group's 16
    /// descriptors (`s`) as operands, for the reasons of [`fence_128`].
    ///
    /// # Safety
    /// Rule 1.
    fn fence_ss_64x2(d: [f32; 64], e: &mut [f32; 64], s: &mut [u64; 16])
    template: ("wgmma.fence.sync.aligned; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]),
        " {e0} {e1} {e2} {e3} {e4} {e5} {e6} {e7} {e8} {e9} {e10} {e11} {e12} {e13} {e14} {e15} {e16} {e17} {e18} {e19} {e20} {e21} {e22} {e23} {e24} {e25} {e26} {e27} {e28} {e29} {e30} {e31} {e32} {e33} {e34} {e35} {e36} {e37} {e38} {e39} {e40} {e41} {e42} {e43} {e44} {e45} {e46} {e47} {e48} {e49} {e50} {e51} {e52} {e53} {e54} {e55} {e56} {e57} {e58} {e59} {e60} {e61} {e62} {e63}",
        " {s0} {s1} {s2} {s3} {s4} {s5} {s6} {s7} {s8} {s9} {s10} {s11} {s12} {s13} {s14} {s15}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
    operands: (
        e0 = inout(reg32) e[0], e1 = inout(reg32) e[1], e2 = inout(reg32) e[2], e3 = inout(reg32) e[3],
        e4 = inout(reg32) e[4], e5 = inout(reg32) e[5], e6 = inout(reg32) e[6], e7 = inout(reg32) e[7],
        e8 = inout(reg32) e[8], e9 = inout(reg32) e[9], e10 = inout(reg32) e[10], e11 = inout(reg32) e[11],
        e12 = inout(reg32) e[12], e13 = inout(reg32) e[13], e14 = inout(reg32) e[14],
        e15 = inout(reg32) e[15], e16 = inout(reg32) e[16], e17 = inout(reg32) e[17],
        e18 = inout(reg32) e[18], e19 = inout(reg32) e[19], e20 = inout(reg32) e[20],
        e21 = inout(reg32) e[21], e22 = inout(reg32) e[22], e23 = inout(reg32) e[23],
        e24 = inout(reg32) e[24], e25 = inout(reg32) e[25], e26 = inout(reg32) e[26],
        e27 = inout(reg32) e[27], e28 = inout(reg32) e[28], e29 = inout(reg32) e[29],
        e30 = inout(reg32) e[30], e31 = inout(reg32) e[31], e32 = inout(reg32) e[32],
        e33 = inout(reg32) e[33], e34 = inout(reg32) e[34], e35 = inout(reg32) e[35],
        e36 = inout(reg32) e[36], e37 = inout(reg32) e[37], e38 = inout(reg32) e[38],
        e39 = inout(reg32) e[39], e40 = inout(reg32) e[40], e41 = inout(reg32) e[41],
        e42 = inout(reg32) e[42], e43 = inout(reg32) e[43], e44 = inout(reg32) e[44],
        e45 = inout(reg32) e[45], e46 = inout(reg32) e[46], e47 = inout(reg32) e[47],
        e48 = inout(reg32) e[48], e49 = inout(reg32) e[49], e50 = inout(reg32) e[50],
        e51 = inout(reg32) e[51], e52 = inout(reg32) e[52], e53 = inout(reg32) e[53],
        e54 = inout(reg32) e[54], e55 = inout(reg32) e[55], e56 = inout(reg32) e[56],
        e57 = inout(reg32) e[57], e58 = inout(reg32) e[58], e59 = inout(reg32) e[59],
        e60 = inout(reg32) e[60], e61 = inout(reg32) e[61], e62 = inout(reg32) e[62],
        e63 = inout(reg32) e[63],
        s0 = inout(reg64) s[0], s1 = inout(reg64) s[1], s2 = inout(reg64) s[2], s3 = inout(reg64) s[3],
        s4 = inout(reg64) s[4], s5 = inout(reg64) s[5], s6 = inout(reg64) s[6], s7 = inout(reg64) s[7],
        s8 = inout(reg64) s[8], s9 = inout(reg64) s[9], s10 = inout(reg64) s[10], s11 = inout(reg64) s[11],
        s12 = inout(reg64) s[12], s13 = inout(reg64) s[13], s14 = inout(reg64) s[14],
        s15 = inout(reg64) s[15],
        options(nostack),
    )
}

with_d! {
    /// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`, both
    /// operands from shared memory: `d = A * B + (ACCUMULATE ? d : 0)`,
    /// with A the 64 x 8 K-major tile `a` describes and B the 8 x 128
    /// K-major tile `b` describes (the `scale-d` predicate: 0 starts a
    /// fresh sum without zeroing `d` first). Retire it with
    /// [`commit_group`] and [`wait_ss_64x2`].
    ///
    /// # Safety
    /// Rules 1-3 (rule 3 for both tiles); `ACCUMULATE` is 0 or 1.
    fn mma_m64n128k8_tf32_ss<const ACCUMULATE: u32>(d: [f32; 64], a: u64, b: u64)
    template: ("{{ .reg .pred p; setp.ne.b32 p, {acc}, 0; ",
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]),
        "}}, {a}, {b}, p, 1, 1; }}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
    operands: (
        a = in(reg64) a,
        b = in(reg64) b,
        acc = in(reg32) ACCUMULATE,
        options(nostack),
    )
}

with_d! {
    /// `wgmma.wait_group.sync.aligned PENDING` for groups of
    /// [`mma_m64n128k8_tf32_ss`] (or of the FP8
    /// [`mma_m64n128k32_e4m3_e4m3_ss`], with its partial sum and the
    /// promoted sums as `d` and `e`), with both accumulators as operands:
    /// once it returns, the retired groups' writes of `d` and `e` are
    /// there (rule 2).
    ///
    /// # Safety
    /// Rule 1.
    fn wait_ss_64x2<const PENDING: u32>(d: [f32; 64], e: &mut [f32; 64])
    template: ("wgmma.wait_group.sync.aligned {n}; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]),
        " {e0} {e1} {e2} {e3} {e4} {e5} {e6} {e7} {e8} {e9} {e10} {e11} {e12} {e13} {e14} {e15} {e16} {e17} {e18} {e19} {e20} {e21} {e22} {e23} {e24} {e25} {e26} {e27} {e28} {e29} {e30} {e31} {e32} {e33} {e34} {e35} {e36} {e37} {e38} {e39} {e40} {e41} {e42} {e43} {e44} {e45} {e46} {e47} {e48} {e49} {e50} {e51} {e52} {e53} {e54} {e55} {e56} {e57} {e58} {e59} {e60} {e61} {e62} {e63}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
    operands: (
        n = const PENDING,
        e0 = inout(reg32) e[0], e1 = inout(reg32) e[1], e2 = inout(reg32) e[2], e3 = inout(reg32) e[3],
        e4 = inout(reg32) e[4], e5 = inout(reg32) e[5], e6 = inout(reg32) e[6], e7 = inout(reg32) e[7],
        e8 = inout(reg32) e[8], e9 = inout(reg32) e[9], e10 = inout(reg32) e[10], e11 = inout(reg32) e[11],
        e12 = inout(reg32) e[12], e13 = inout(reg32) e[13], e14 = inout(reg32) e[14],
        e15 = inout(reg32) e[15], e16 = inout(reg32) e[16], e17 = inout(reg32) e[17],
        e18 = inout(reg32) e[18], e19 = inout(reg32) e[19], e20 = inout(reg32) e[20],
        e21 = inout(reg32) e[21], e22 = inout(reg32) e[22], e23 = inout(reg32) e[23],
        e24 = inout(reg32) e[24], e25 = inout(reg32) e[25], e26 = inout(reg32) e[26],
        e27 = inout(reg32) e[27], e28 = inout(reg32) e[28], e29 = inout(reg32) e[29],
        e30 = inout(reg32) e[30], e31 = inout(reg32) e[31], e32 = inout(reg32) e[32],
        e33 = inout(reg32) e[33], e34 = inout(reg32) e[34], e35 = inout(reg32) e[35],
        e36 = inout(reg32) e[36], e37 = inout(reg32) e[37], e38 = inout(reg32) e[38],
        e39 = inout(reg32) e[39], e40 = inout(reg32) e[40], e41 = inout(reg32) e[41],
        e42 = inout(reg32) e[42], e43 = inout(reg32) e[43], e44 = inout(reg32) e[44],
        e45 = inout(reg32) e[45], e46 = inout(reg32) e[46], e47 = inout(reg32) e[47],
        e48 = inout(reg32) e[48], e49 = inout(reg32) e[49], e50 = inout(reg32) e[50],
        e51 = inout(reg32) e[51], e52 = inout(reg32) e[52], e53 = inout(reg32) e[53],
        e54 = inout(reg32) e[54], e55 = inout(reg32) e[55], e56 = inout(reg32) e[56],
        e57 = inout(reg32) e[57], e58 = inout(reg32) e[58], e59 = inout(reg32) e[59],
        e60 = inout(reg32) e[60], e61 = inout(reg32) e[61], e62 = inout(reg32) e[62],
        e63 = inout(reg32) e[63],
        options(nostack),
    )
}

with_d! {
    /// [`wait_ss_64x2`] for groups of [`mma_m64n192k32_e4m3_e4m3_ss`]:
    /// the 96-register partial sum and the promoted sums as `d` and `e`.
    ///
    /// # Safety
    /// Rule 1.
    fn wait_ss_96x2<const PENDING: u32>(d: [f32; 96], e: &mut [f32; 96])
    template: ("wgmma.wait_group.sync.aligned {n}; // ", d_list!([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95]),
        " {e0} {e1} {e2} {e3} {e4} {e5} {e6} {e7} {e8} {e9} {e10} {e11} {e12} {e13} {e14} {e15} {e16} {e17} {e18} {e19} {e20} {e21} {e22} {e23} {e24} {e25} {e26} {e27} {e28} {e29} {e30} {e31} {e32} {e33} {e34} {e35} {e36} {e37} {e38} {e39} {e40} {e41} {e42} {e43} {e44} {e45} {e46} {e47} {e48} {e49} {e50} {e51} {e52} {e53} {e54} {e55} {e56} {e57} {e58} {e59} {e60} {e61} {e62} {e63} {e64} {e65} {e66} {e67} {e68} {e69} {e70} {e71} {e72} {e73} {e74} {e75} {e76} {e77} {e78} {e79} {e80} {e81} {e82} {e83} {e84} {e85} {e86} {e87} {e88} {e89} {e90} {e91} {e92} {e93} {e94} {e95}")
    regs: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95]
    operands: (
        n = const PENDING,
        e0 = inout(reg32) e[0], e1 = inout(reg32) e[1], e2 = inout(reg32) e[2],
        e3 = inout(reg32) e[3], e4 = inout(reg32) e[4], e5 = inout(reg32) e[5],
        e6 = inout(reg32) e[6], e7 = inout(reg32) e[7], e8 = inout(reg32) e[8],
        e9 = inout(reg32) e[9], e10 = inout(reg32) e[10], e11 = inout(reg32) e[11],
        e12 = inout(reg32) e[12], e13 = inout(reg32) e[13], e14 = inout(reg32) e[14],
        e15 = inout(reg32) e[15], e16 = inout(reg32) e[16], e17 = inout(reg32) e[17],
        e18 = inout(reg32) e[18], e19 = inout(reg32) e[19], e20 = inout(reg32) e[20],
        e21 = inout(reg32) e[21], e22 = inout(reg32) e[22], e23 = inout(reg32) e[23],
        e24 = inout(reg32) e[24], e25 = inout(reg32) e[25], e26 = inout(reg32) e[26],
        e27 = inout(reg32) e[27], e28 = inout(reg32) e[28], e29 = inout(reg32) e[29],
        e30 = inout(reg32) e[30], e31 = inout(reg32) e[31], e32 = inout(reg32) e[32],
        e33 = inout(reg32) e[33], e34 = inout(reg32) e[34], e35 = inout(reg32) e[35],
        e36 = inout(reg32) e[36], e37 = inout(reg32) e[37], e38 = inout(reg32) e[38],
        e39 = inout(reg32) e[39], e40 = inout(reg32) e[40], e41 = inout(reg32) e[41],
        e42 = inout(reg32) e[42], e43 = inout(reg32) e[43], e44 = inout(reg32) e[44],
        e45 = inout(reg32) e[45], e46 = inout(reg32) e[46], e47 = inout(reg32) e[47],
        e48 = inout(reg32) e[48], e49 = inout(reg32) e[49], e50 = inout(reg32) e[50],
        e51 = inout(reg32) e[51], e52 = inout(reg32) e[52], e53 = inout(reg32) e[53],
        e54 = inout(reg32) e[54], e55 = inout(reg32) e[55], e56 = inout(reg32) e[56],
        e57 = inout(reg32) e[57], e58 = inout(reg32) e[58], e59 = inout(reg32) e[59],
        e60 = inout(reg32) e[60], e61 = inout(reg32) e[61], e62 = inout(reg32) e[62],
        e63 = inout(reg32) e[63], e64 = inout(reg32) e[64], e65 = inout(reg32) e[65],
        e66 = inout(reg32) e[66], e67 = inout(reg32) e[67], e68 = inout(reg32) e[68],
        e69 = inout(reg32) e[69], e70 = inout(reg32) e[70], e71 = inout(reg32) e[71],
        e72 = inout(reg32) e[72], e73 = inout(reg32) e[73], e74 = inout(reg32) e[74],
        e75 = inout(reg32) e[75], e76 = inout(reg32) e[76], e77 = inout(reg32) e[77],
        e78 = inout(reg32) e[78], e79 = inout(reg32) e[79], e80 = inout(reg32) e[80],
        e81 = inout(reg32) e[81], e82 = inout(reg32) e[82], e83 = inout(reg32) e[83],
        e84 = inout(reg32) e[84], e85 = inout(reg32) e[85], e86 = inout(reg32) e[86],
        e87 = inout(reg32) e[87], e88 = inout(reg32) e[88], e89 = inout(reg32) e[89],
        e90 = inout(reg32) e[90], e91 = inout(reg32) e[91], e92 = inout(reg32) e[92],
        e93 = inout(reg32) e[93], e94 = inout(reg32) e[94], e95 = inout(reg32) e[95],
        options(nostack),
    )
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: this warpgroup gives registers
/// back, keeping `N` per thread, for a warpgroup that needs few (a TMA
/// producer) so that others can take them with [`take_registers`].
/// ptxas honours it only in a kernel with a register cap at entry (the
/// host's launch bounds) where each warpgroup's role is one branch of an
/// if/else; otherwise it warns (C7508).
///
/// # Safety
/// Rule 1 (warpgroup-collective); `N` is a multiple of 8 in 24..=256.
#[inline(always)]
pub unsafe fn release_registers<const N: u32>() {
    // SAFETY: the caller upholds rule 1; changes only this warpgroup's
    // register allocation, which ptxas compiled the code after it for.
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack)) }
}

/// `setmaxnreg.inc.sync.aligned.u32 N`: this warpgroup takes registers
/// up to `N` per thread, waiting until others have released enough.
///
/// # Safety
/// As [`release_registers`].
#[inline(always)]
pub unsafe fn take_registers<const N: u32>() {
    // SAFETY: as release_registers.
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack)) }
}

/// `wgmma.commit_group.sync.aligned`: the `wgmma`s this thread issued
/// since the last commit become one group.
///
/// # Safety
/// Rule 1.
#[inline(always)]
pub unsafe fn commit_group() {
    // SAFETY: the caller upholds rule 1; no operands.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
}

/// `fence.proxy.async.shared::cta`: this thread's earlier writes to shared
/// memory become visible to the asynchronous proxy, which `wgmma` (and
/// TMA) read through. A tile the threads wrote themselves (not TMA) is
/// ready for `wgmma` once every writer has run this fence and met the
/// issuing warps at a barrier (rule 3).
#[inline(always)]
pub fn fence_proxy_async() {
    // SAFETY: a fence; no operands. The memory clobber keeps the writes
    // before it.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}
