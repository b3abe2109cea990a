//! Where the calling thread is: its index in the block and the block's
//! index in the grid, as `usize` so kernels index with them directly.
//!
//! Safety model: reading these special registers has no preconditions.

#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

macro_rules! special_register {
    ($(#[$doc:meta])* $name:ident => $intrinsic:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name() -> usize {
            // SAFETY: reads a read-only special register; always sound.
            unsafe { nvptx::$intrinsic() as usize }
        }
    };
}

special_register!(
    /// `threadIdx.x`: the thread's column in its block.
    thread_idx_x => _thread_idx_x
);
special_register!(
    /// `threadIdx.y`: the thread's row in its block.
    thread_idx_y => _thread_idx_y
);
special_register!(
    /// `blockIdx.x`: the block's column in the grid.
    block_idx_x => _block_idx_x
);
special_register!(
    /// `blockIdx.y`: the block's row in the grid.
    block_idx_y => _block_idx_y
);
special_register!(
    /// `blockIdx.z`: which product of a batch the block computes (read by
    /// `Gemm::from_raw` only: kernel bodies see one product).
    block_idx_z => _block_idx_z
);
special_register!(
    /// `gridDim.x`: blocks in a row of the grid (a persistent kernel's
    /// stride through its tiles, `Launch::persistent`).
    grid_dim_x => _grid_dim_x
);
special_register!(
    /// `gridDim.y`: blocks in a column of the grid (a kernel that orders
    /// its tiles itself, step 28).
    grid_dim_y => _grid_dim_y
);
special_register!(
    /// `gridDim.z`: how many products the launch computes.
    grid_dim_z => _grid_dim_z
);

// On the host: the indices of the CPU emulator's thread running the body.
#[cfg(not(target_arch = "nvptx64"))]
pub use crate::emu::backend::{
    block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, thread_idx_x, thread_idx_y,
};
