//! The retained status payloads of the `<prefix>/<device>/status` topic.

pub(super) const STATUS_ONLINE: &str = "online";
pub(super) const STATUS_OFFLINE: &str = "offline";
