//! `sarcasmd plot`: pictures of saved `bench --json` / `eval --json` runs.

use std::path::{Path, PathBuf};

use crate::PlotCmd;

pub(crate) fn plot_cmd(cmd: PlotCmd) -> anyhow::Result<i32> {
    use sarcasmd::tools::plot;
    match cmd {
        PlotCmd::Bench { files, out, title } => {
            let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            let inputs: Vec<(&str, Option<&Path>)> =
                paths.iter().map(|&p| ("an input", Some(p))).collect();
            super::check_outputs(&[("-o", Some(&out))], &inputs)?;
            let series = plot::bench::load(&paths)?;
            let title = title.unwrap_or_else(|| {
                let names: Vec<String> = files.iter().map(|f| plot::file_label(f)).collect();
                format!("sarcasmd bench: {}", names.join(" vs "))
            });
            plot::write_svg(&out, &plot::bench::render_svg(&series, &title)?)?;
        }
        PlotCmd::Eval { file, out } => {
            super::check_outputs(&[("-o", Some(&out))], &[("the input", Some(&file))])?;
            let pic = plot::eval::load(&file)?;
            plot::write_svg(&out, &plot::eval::render_svg(&pic)?)?;
        }
    }
    Ok(0)
}
