//! `sarcasmd devices`: the microphones and cameras this machine has.

use super::exit;

/// List audio inputs (index, id, name, formats) and cameras, as `source.device`
/// takes them. Exits 0 even when there are none.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.list())
    }

    fn list(self) -> anyhow::Result<i32> {
        let list = sarcasmd::sources::devices::list();
        if self.json {
            println!("{}", serde_json::to_string_pretty(&list)?);
        } else {
            print!("{}", list.render());
        }
        Ok(0)
    }
}
