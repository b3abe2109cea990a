//! The commit the harness's reports name (`GEMM_GIT_COMMIT`, read by
//! `harness::GIT_COMMIT`): `git rev-parse`, `-dirty` when tracked files
//! differ from it, `unknown` outside a git checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let commit = git_commit(manifest_dir.parent().unwrap());
    println!("cargo::rustc-env=GEMM_GIT_COMMIT={commit}");
}

/// The commit the binary is built from (`-dirty` with local changes), so
/// results written by the bench name the code that produced them. Watches
/// what moves HEAD or the index; `--no-optional-locks` keeps `git status`
/// from refreshing (rewriting) the index it watches, which would make
/// every next build rerun this script.
fn git_commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .arg("--no-optional-locks")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) else {
        return "unknown".into();
    };
    let git_dir = PathBuf::from(git_dir);
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("index")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git_dir.join(branch));
        watched.push(git_dir.join("packed-refs"));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        None => "unknown".into(),
    }
}
