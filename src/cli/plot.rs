//! `sarcasmd plot`: pictures of saved `bench --json` / `eval --json` runs.

use std::path::{Path, PathBuf};

use sarcasmd::tools::plot;

use super::check_outputs::check_outputs;
use super::exit;

/// Draw saved `bench --json` / `eval --json` runs as SVG (several bench runs are
/// overlaid, e.g. two machines or two profiles).
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Latency CDFs and stage stacks of one or more `sarcasmd bench --json` files, each
    /// labelled by its file name.
    Bench {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Title above the picture (default: the file names).
        #[arg(long)]
        title: Option<String>,
    },
    /// ROC curves and reliability diagram of a `sarcasmd eval --json` file.
    Eval {
        file: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
    },
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(match self.cmd {
            Cmd::Bench { files, out, title } => bench(&files, &out, title),
            Cmd::Eval { file, out } => eval(&file, &out),
        })
    }
}

fn bench(files: &[PathBuf], out: &Path, title: Option<String>) -> anyhow::Result<i32> {
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let inputs: Vec<(&str, Option<&Path>)> = paths.iter().map(|&p| ("an input", Some(p))).collect();
    check_outputs(&[("-o", Some(out))], &inputs)?;
    let series = plot::bench::load(&paths)?;
    let title = title.unwrap_or_else(|| {
        let names: Vec<String> = files.iter().map(|f| plot::file_label(f)).collect();
        format!("sarcasmd bench: {}", names.join(" vs "))
    });
    plot::write_svg(out, &plot::bench::render_svg(&series, &title)?)?;
    Ok(0)
}

fn eval(file: &Path, out: &Path) -> anyhow::Result<i32> {
    check_outputs(&[("-o", Some(out))], &[("the input", Some(file))])?;
    let pic = plot::eval::load(file)?;
    plot::write_svg(out, &plot::eval::render_svg(&pic)?)?;
    Ok(0)
}
