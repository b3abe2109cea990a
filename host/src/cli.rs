//! What every program of the workspace does with its command line and its
//! output, so that they behave alike: an argument error is one line
//! (`error: ...`, then `(see --help)`) and exit code 2, and output piped
//! into `head` or a closed pager ends the program quietly.

use std::process::ExitCode;

use rust_gemm::HostError;
use rust_gemm::blas::GemmError;

/// What the `host` program adds to a library error it prints: the flag
/// or mode that answers it (the library's messages name none).
pub fn hint(e: &HostError) -> String {
    match e {
        HostError::NoDriver | HostError::NoGpu => {
            ", or run the kernels on the CPU emulator with `host --n 64 --emulate`".into()
        }
        HostError::NoSuchDevice { count, .. } => {
            format!(" (choose --device 0..{})", count.saturating_sub(1))
        }
        HostError::NeedsNewerGpu { .. }
        | HostError::TooMuchShared { .. }
        | HostError::NotEmulated { .. }
        | HostError::UnknownKernel { .. } => " (see --list-kernels)".into(),
        _ => String::new(),
    }
}

/// [`hint`] for an error of the library's checks of a call.
pub fn gemm_hint(e: &GemmError) -> String {
    match e {
        GemmError::Gpu(e) => hint(e),
        GemmError::UnknownKernel { .. } | GemmError::KernelUnsupported { .. } => {
            " (see --list-kernels)".into()
        }
        _ => String::new(),
    }
}

/// Parses the command line into `T`. `--help` and `--version` print and
/// give `Err(SUCCESS)`; an argument error prints clap's first line (which
/// names the argument and the problem) and gives `Err(2)`.
pub fn parse<T: clap::Parser>() -> Result<T, ExitCode> {
    match T::try_parse() {
        Ok(args) => Ok(args),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            let text = e.render().to_string();
            eprintln!(
                "{} (see --help)",
                text.lines().next().unwrap_or("error: bad arguments")
            );
            Err(ExitCode::from(2))
        }
    }
}

/// Restores the default action of SIGPIPE (end the process), which the
/// Rust runtime sets to "ignore" before `main`: otherwise the first
/// `println!` after the reader has gone panics with "failed printing to
/// stdout: Broken pipe". Call first thing in `main`.
pub fn quiet_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: called before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/faults.md rows 8, 10, 11 and 23-24: what `host` prints is the
    /// library's message and the CLI's hint after it.
    #[test]
    fn the_cli_adds_its_flags_to_library_errors() {
        let printed = |e: HostError| format!("{e}{}", hint(&e));
        assert_eq!(
            printed(HostError::NoSuchDevice {
                ordinal: 4096,
                count: 1
            }),
            "GPU 4096 does not exist: this machine has 1 (choose --device 0..0)"
        );
        assert_eq!(
            printed(HostError::NoGpu),
            "the NVIDIA driver found no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES, \
             or run the kernels on the CPU emulator with `host --n 64 --emulate`"
        );
        let spec = &kernels_gpu::k11_mma::SPEC_128X128X32_W64X64_S2;
        assert!(
            printed(HostError::needs_newer_gpu(spec, "NVIDIA T4", (7, 5)))
                .ends_with(": choose another kernel (see --list-kernels)")
        );
        assert_eq!(hint(&HostError::NotPtx("x".into())), "");
    }
}
