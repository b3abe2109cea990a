//! Device helpers: the only code in the project that touches
//! `core::arch::nvptx`, inline `asm!` and the block's shared memory.
//!
//! Kernels are written against this module, one concept per submodule:
//!
//! - [`thread`]: where a thread is (thread, block and grid indices);
//! - [`barrier`]: `sync_threads`, the block-wide barrier (with a vote:
//!   `sync_threads_or`; and, GPU only, a warpgroup's named barrier and
//!   the warp barrier);
//! - [`atomic`]: between the blocks of a launch: a device-wide fence,
//!   tile counters (`atom.add`), reads from L2 of other blocks' stores;
//! - [`shared`]: tiles carved out of the block's launch-sized shared memory;
//! - [`global`]: typed views of the kernel's global-memory buffers;
//! - [`math`]: fused multiply-add (rustc never contracts `a * b + c`);
//! - [`warp`]: lanes, and `shfl.sync` exchanges between them (the sum
//!   across a warp);
//! - [`mma`]: TF32 tensor cores, `mma.sync` m16n8k8 (sm_80+);
//! - [`async_copy`]: `cp.async` global-to-shared copies in groups (sm_80+);
//! - [`mbarrier`], [`tma`], [`wgmma`]: Hopper's transaction barriers, copy
//!   engine and warpgroup tensor-core instructions (sm_90a; GPU only: the
//!   emulator has no model of their asynchronous proxy).
//!
//! On the host the same functions run the kernel bodies on the CPU
//! emulator ([`crate::emu`]), which checks every access; only the
//! nvptx side is what the GPU runs, and it stays a bare pointer access.
//!
//! Safety model, in one paragraph: the launch contract (grid, block and
//! shared-memory size taken from the kernel's own [`KernelSpec`], buffers
//! of the sizes [`Gemm`] states) is upheld by the host. Given that, an
//! index is the only thing a kernel can get wrong, so every access to
//! global or shared memory is an `unsafe fn` whose caller states, in a
//! `// SAFETY:` line, why the index is in bounds and (for shared memory)
//! why no other thread touches the same word between the same barriers.
//!
//! [`KernelSpec`]: crate::launch::KernelSpec
//! [`Gemm`]: crate::gemm::Gemm

pub mod async_copy;
pub mod atomic;
pub mod barrier;
pub mod global;
pub mod math;
#[cfg(target_arch = "nvptx64")]
pub mod mbarrier;
pub mod mma;
pub mod shared;
pub mod thread;
#[cfg(target_arch = "nvptx64")]
pub mod tma;
pub mod warp;
#[cfg(target_arch = "nvptx64")]
pub mod wgmma;

pub use barrier::{sync_threads, sync_threads_or};
pub use global::{GlobalIn, GlobalOut};
pub use math::fma;
pub use shared::SharedTile;
pub use thread::{block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, thread_idx_x, thread_idx_y};
#[cfg(target_arch = "nvptx64")]
pub use thread::{block_idx_z, grid_dim_z};
