//! Secret files (`http.token_file`, `mqtt.password_file`): read with the checks a careless
//! path or mode deserves. Only regular files are read (a directory, FIFO or `/dev/zero`
//! is refused by kind, never read without bound), at most [`MAX_SECRET_BYTES`], and a
//! file that others may read is used with a warning that says how to fix it.
//! A leaf module: it imports nothing of the crate.

use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Larger than any token or password; a bigger file is the wrong file.
pub const MAX_SECRET_BYTES: u64 = 4096;

/// The file's content without its trailing newline. The error's text says what is
/// wrong with the path (missing, a directory, not a regular file, too large).
pub fn read(path: &Path) -> Result<String, Error> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "is a directory, not a file holding the secret",
        ));
    }
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "is not a regular file (a device or a pipe?)",
        ));
    }
    if meta.len() > MAX_SECRET_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "holds {} bytes, more than a secret ({MAX_SECRET_BYTES} at most): is it the right file?",
                meta.len()
            ),
        ));
    }
    if let Some(w) = exposure(meta.permissions().mode()) {
        log::warn!("{}: {w}; `chmod 600 {}`", path.display(), path.display());
    }
    let mut s = String::new();
    std::fs::File::open(path)?
        .take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut s)?;
    Ok(s.trim_end_matches(['\n', '\r']).to_string())
}

/// Why a file with this mode exposes its secret, if it does.
pub fn exposure(mode: u32) -> Option<String> {
    let (group, other) = (mode & 0o040 != 0, mode & 0o004 != 0);
    let who = match (group, other) {
        (false, false) => return None,
        (true, false) => "its group",
        (false, true) => "every user",
        (true, true) => "its group and every user",
    };
    Some(format!(
        "readable by {who} (mode {:o}): the secret in it is not secret",
        mode & 0o777
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_readable_modes_pass_quietly() {
        assert_eq!(exposure(0o100600), None);
        assert_eq!(exposure(0o100400), None);
        assert!(exposure(0o100640).unwrap().contains("its group"));
        assert!(exposure(0o100644).unwrap().contains("group and every user"));
        assert!(exposure(0o100604).unwrap().contains("every user"));
    }

    #[test]
    fn paths_that_are_not_small_regular_files_are_refused_by_kind() {
        let d = tempfile::tempdir().unwrap();
        let e = read(d.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'x'; 5000]).unwrap();
        assert!(read(&big).unwrap_err().to_string().contains("5000 bytes"));
        let e = read(&d.path().join("missing")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let ok = d.path().join("token");
        std::fs::write(&ok, "s3cret-token-0123456789\n").unwrap();
        assert_eq!(read(&ok).unwrap(), "s3cret-token-0123456789");
    }
}
