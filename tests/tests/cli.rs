//! The `host` command line, without a GPU. Bad inputs and faults are in
//! `faults.rs`; here, what a user sees first.

use assert_cmd::Command;
use kernels_gpu::registry::{EXPERIMENTS, KERNELS, TRANSPOSED};

fn host() -> Command {
    Command::new(env!("CARGO_BIN_FILE_HOST_host"))
}

#[test]
fn list_kernels_names_every_kernel_with_its_launch_shape() {
    let out = host()
        .arg("--list-kernels")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let every: Vec<_> = KERNELS
        .iter()
        .chain(TRANSPOSED)
        .chain(EXPERIMENTS)
        .collect();
    assert_eq!(text.lines().count(), every.len());
    for (line, k) in text.lines().zip(every) {
        assert!(line.contains(k.name), "{line}");
        let (tx, ty) = k.launch.block_threads;
        assert!(line.contains(&format!("block {tx}x{ty} threads")), "{line}");
        assert!(
            line.contains(&format!("{} B shared", k.launch.shared_bytes)),
            "{line}"
        );
    }
}

#[test]
fn help_documents_every_flag() {
    let out = host()
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let help = String::from_utf8(out).unwrap();
    for flag in [
        "--n",
        "--m",
        "--k",
        "--kernel",
        "--warmup",
        "--reps",
        "--seed",
        "--json",
        "--list-kernels",
        "--ptx",
        "--device",
        "--no-flush",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}

/// The README quotes the emulator's report, source lines and columns
/// included: it must be what the program prints today (a kernel edit that
/// moves a line fails here until the README is updated).
#[test]
fn readme_emulator_example_is_what_the_host_prints() {
    let readme = include_str!("../../README.md");
    let command = "$ cargo run --release -p host -- --n 64 --kernel tiled16,mma_64x128x32_w32x64_s2 --emulate\n";
    let start = readme
        .find(command)
        .expect("the README shows the emulator example")
        + command.len();
    let quoted = &readme[start..start + readme[start..].find("```").expect("closed block")];
    let out = host()
        .args([
            "--n",
            "64",
            "--kernel",
            "tiled16,mma_64x128x32_w32x64_s2",
            "--emulate",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(out).unwrap(), quoted);
}
