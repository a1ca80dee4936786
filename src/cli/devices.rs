//! `sarcasmd devices`: the microphones and cameras this machine has.

pub(crate) fn devices(json: bool) -> anyhow::Result<i32> {
    let list = sarcasmd::sources::devices::list();
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print!("{}", list.render());
    }
    Ok(0)
}
