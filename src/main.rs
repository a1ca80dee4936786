//! `sarcasmd` command line: parses the arguments and runs the command, one file each in
//! `cli/`. Each command maps its own errors to its exit status: 0 success, 2 bad input
//! (config, audio), 3 models missing or corrupt, 1 anything else.

use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(
    name = "sarcasmd",
    version,
    about = "Real-time sarcasm detection from speech"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The commands in the order `--help` lists them.
#[derive(Subcommand)]
enum Cmd {
    Run(cli::run::Args),
    Replay(cli::replay::Args),
    Validate(cli::validate::Args),
    Devices(cli::devices::Args),
    Models(cli::models::Args),
    Prosody(cli::prosody::Args),
    Features(cli::features::Args),
    Bench(cli::bench::Args),
    Eval(cli::eval::Args),
    Plot(cli::plot::Args),
    Report(cli::report::Args),
    Feedback(cli::feedback::Args),
    Embed(cli::embed::Args),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(
        "info,whisper_rs=warn,whisper_rs::whisper_logging_hook=warn,whisper_rs::ggml_logging_hook=warn",
    ))
    .target(env_logger::Target::Stderr)
    .init();
    let status = match Cli::parse().cmd {
        Cmd::Run(a) => a.run(),
        Cmd::Replay(a) => a.run(),
        Cmd::Validate(a) => a.run(),
        Cmd::Devices(a) => a.run(),
        Cmd::Models(a) => a.run(),
        Cmd::Prosody(a) => a.run(),
        Cmd::Features(a) => a.run(),
        Cmd::Bench(a) => a.run(),
        Cmd::Eval(a) => a.run(),
        Cmd::Plot(a) => a.run(),
        Cmd::Report(a) => a.run(),
        Cmd::Feedback(a) => a.run(),
        Cmd::Embed(a) => a.run(),
    };
    std::process::exit(status);
}
