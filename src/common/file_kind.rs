//! What a path names, checked before it is opened: an input must be a regular file of
//! bounded size (a directory, FIFO or `/dev/zero` given as a config, manifest, head or
//! model is refused by kind instead of blocking or being read without end), and an
//! output must be a regular file that can be written, or a new one in a writable
//! directory, and never a file the same command reads ([`same_file`]: a report written
//! over its own events, an events file naming the input WAV). Errors are
//! `std::io::Error`s whose text says what is wrong with the path, so every caller's
//! typed error carries it. A leaf module: it imports nothing of the crate.

use std::ffi::CString;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Config files and head metadata are small; a larger file is the wrong file.
pub const MAX_TEXT_FILE_BYTES: u64 = 1 << 20;

/// Metadata of `path` when it is a regular file; otherwise an error naming its kind.
pub fn regular_file(path: &Path) -> Result<std::fs::Metadata, Error> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(meta);
    }
    Err(Error::new(
        ErrorKind::InvalidInput,
        format!("is {}, not a regular file", kind(&meta)),
    ))
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a pipe (FIFO)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// The whole of a regular file of at most `max_bytes` bytes, as UTF-8 text.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, Error> {
    let meta = regular_file(path)?;
    if meta.len() > max_bytes {
        return Err(too_large(meta.len(), max_bytes));
    }
    let mut s = String::new();
    std::fs::File::open(path)?
        .take(max_bytes + 1)
        .read_to_string(&mut s)?;
    // The file may have grown between the check and the read.
    if s.len() as u64 > max_bytes {
        return Err(too_large(s.len() as u64, max_bytes));
    }
    Ok(s)
}

/// The whole of a regular file of at most `max_bytes` bytes.
pub fn read_bytes(path: &Path, max_bytes: u64) -> Result<Vec<u8>, Error> {
    let meta = regular_file(path)?;
    if meta.len() > max_bytes {
        return Err(too_large(meta.len(), max_bytes));
    }
    let mut v = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)?
        .take(max_bytes + 1)
        .read_to_end(&mut v)?;
    if v.len() as u64 > max_bytes {
        return Err(too_large(v.len() as u64, max_bytes));
    }
    Ok(v)
}

fn too_large(len: u64, max_bytes: u64) -> Error {
    Error::new(
        ErrorKind::InvalidData,
        format!("holds {len} bytes, more than the {max_bytes} expected: is it the right file?"),
    )
}

/// Whether `path` can be opened for appending as an output file: an existing regular
/// file, pipe or character device (`/dev/null`) the process may write, or a missing file
/// in an existing writable directory (`ErrorKind::NotFound` when the directory is
/// missing). Checked with access(2), so nothing is created.
pub fn writable_output(path: &Path) -> Result<(), Error> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            let t = meta.file_type();
            if !(t.is_file() || t.is_fifo() || t.is_char_device()) {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("is {}, not a regular file", kind(&meta)),
                ));
            }
            if !may(path, libc::W_OK) {
                return Err(Error::new(
                    ErrorKind::PermissionDenied,
                    "is not writable by this user",
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            match std::fs::metadata(parent) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!("{} is not a directory", parent.display()),
                    ))
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("directory {} does not exist", parent.display()),
                    ))
                }
                Err(e) => return Err(e),
            }
            if !may(parent, libc::W_OK | libc::X_OK) {
                return Err(Error::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "directory {} is not writable by this user",
                        parent.display()
                    ),
                ));
            }
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(Error::new(
            ErrorKind::InvalidInput,
            "a part of its directory path is a file, not a directory",
        )),
        Err(e) => Err(e),
    }
}

/// Whether `a` and `b` are one file: the same device and inode when both exist (through
/// symlinks, hard links, `..` and relative paths alike), or, when one does not exist
/// yet, the same name in the same directory. Character devices (`/dev/null`) are never
/// "the same file": writing two outputs to one of them loses nothing that was not
/// meant to be lost.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => {
            x.dev() == y.dev() && x.ino() == y.ino() && !x.file_type().is_char_device()
        }
        (Err(_), Err(_)) | (Ok(_), Err(_)) | (Err(_), Ok(_)) => {
            let dir = |p: &Path| {
                let parent = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                std::fs::metadata(parent).ok().map(|m| (m.dev(), m.ino()))
            };
            a.file_name().is_some()
                && a.file_name() == b.file_name()
                && dir(a).is_some()
                && dir(a) == dir(b)
        }
    }
}

/// `Ok` unless `output` is one of `inputs` ([`same_file`]); the error names which, so
/// that a command never truncates, appends to or overwrites what it reads.
pub fn distinct_output<'a>(
    output: &Path,
    inputs: impl IntoIterator<Item = (&'a str, &'a Path)>,
) -> Result<(), Error> {
    for (what, input) in inputs {
        if same_file(output, input) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "is the same file as {what} ({}): writing it would destroy what is read; \
                     choose another output path",
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

fn may(path: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_must_be_regular_files_of_bounded_size() {
        let d = tempfile::tempdir().unwrap();
        let e = read_text(d.path(), 100).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = read_text(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("is a device"), "{e}");
        let fifo = d.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("pipe"), "{e}");
        let f = d.path().join("big");
        std::fs::write(&f, vec![b'a'; 101]).unwrap();
        assert!(read_text(&f, 100)
            .unwrap_err()
            .to_string()
            .contains("101 bytes"));
        assert_eq!(read_bytes(&f, 101).unwrap().len(), 101);
        let missing = read_text(&d.path().join("nope"), 100).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn the_same_file_is_found_through_links_and_names_and_devices_are_not_one() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("in.wav");
        std::fs::write(&f, "RIFF").unwrap();
        let link = d.path().join("link.wav");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let hard = d.path().join("hard.wav");
        std::fs::hard_link(&f, &hard).unwrap();
        let dotted = d.path().join("sub/../in.wav");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        for other in [&link, &hard, &dotted] {
            assert!(same_file(&f, other), "{}", other.display());
        }
        assert!(!same_file(&f, &d.path().join("other.wav")));
        // Not there yet: the same name in the same directory.
        let new = d.path().join("new.jsonl");
        assert!(same_file(&new, &d.path().join("sub/../new.jsonl")));
        assert!(!same_file(&new, &d.path().join("sub/new.jsonl")));
        assert!(!same_file(Path::new("/dev/null"), Path::new("/dev/null")));
        let e = distinct_output(&link, [("source.path", f.as_path())]).unwrap_err();
        assert!(e.to_string().contains("same file as source.path"), "{e}");
        assert!(distinct_output(&new, [("source.path", f.as_path())]).is_ok());
    }

    #[test]
    fn outputs_must_be_writable_regular_files_or_new_ones_in_a_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(writable_output(&d.path().join("new.jsonl")).is_ok());
        let e = writable_output(d.path()).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let e = writable_output(&d.path().join("no/such/dir/x.jsonl")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(writable_output(Path::new("/dev/null")).is_ok());
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        assert!(writable_output(&f).is_ok());
        let e = writable_output(&f.join("below-a-file")).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
