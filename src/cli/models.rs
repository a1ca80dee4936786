//! `sarcasmd models dir | verify | fetch`: the model cache.

use std::path::{Path, PathBuf};

use anyhow::Context;

use sarcasmd::common::models::{self, ModelStore};

use super::exit;

/// Model cache: where it is and whether every file matches the pinned checksums.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Check every model against models.lock.json (size and SHA-256).
    Verify {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the model directory.
    Dir,
    /// Fetch and convert the models (runs scripts/fetch-models.sh from the source tree,
    /// or the installed package's copy).
    Fetch {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(match self.cmd {
            Cmd::Dir => {
                println!("{}", models::model_dir(None).display());
                Ok(0)
            }
            Cmd::Verify { dir } => verify(dir),
            Cmd::Fetch { dir } => fetch(dir),
        })
    }
}

/// Every model against its pin; 3 when one is missing or corrupt.
fn verify(dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let dir = models::model_dir(dir.as_deref());
    let store = ModelStore::new(dir.clone(), true)?;
    let mut bad = 0;
    println!("model dir: {}", dir.display());
    for (name, res) in store.verify_all() {
        match res {
            Ok(f) => println!("ok       {name:<22} {}", f.path.display()),
            Err(e) => {
                bad += 1;
                println!("FAILED   {name:<22} {e}");
            }
        }
    }
    if bad > 0 {
        eprintln!("{bad} model(s) missing or corrupt: run scripts/fetch-models.sh");
        return Ok(exit::MODELS);
    }
    Ok(0)
}

/// The fetch script's own status.
fn fetch(dir: Option<PathBuf>) -> anyhow::Result<i32> {
    // The source tree when built from it, else the installed package's copy.
    let mut script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-models.sh");
    if !script.exists() {
        script = PathBuf::from("/usr/share/sarcasmd/scripts/fetch-models.sh");
    }
    anyhow::ensure!(
        script.exists(),
        "{} not found: `models fetch` runs the fetch script from the source tree this binary was built from",
        script.display()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script);
    if let Some(d) = dir {
        cmd.arg("--dir").arg(d);
    }
    let status = cmd.status().context("running fetch-models.sh")?;
    Ok(status.code().unwrap_or(1))
}
