//! What every program of the workspace does with its command line and its
//! output, so that they behave alike: an argument error is one line
//! (`error: ...`, then `(see --help)`) and exit code 2, and output piped
//! into `head` or a closed pager ends the program quietly.

use std::process::ExitCode;

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
