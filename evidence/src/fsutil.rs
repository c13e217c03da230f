//! Bounded, non-blocking file reading: the one reader of files kvwitness
//! did not write itself.
//!
//! A verifier reads files it does not trust, and an operator names files
//! (`--key`, `--keys-file`, `--model-check`, a narrative folder) that may be
//! a FIFO, a device or a link to one. Reading one must not be able to
//! exhaust memory, block forever or wander out of a folder. Every such read
//! in the workspace goes through [`read_limited`] (or [`read_text`]) or
//! [`read_no_follow`], which
//!
//! * refuse anything but a regular file *before* opening it (a FIFO would
//!   block `open` forever, a device would never end), and open with
//!   `O_NONBLOCK` so a file swapped for a FIFO in between cannot block either;
//! * check the opened file's type and size again (`fstat`), refusing a file
//!   over its limit before (and while) reading it;
//! * for bundle files ([`read_no_follow`]), refuse symbolic links, also at
//!   open time (`O_NOFOLLOW`).
//!
//! The link policy of operator files ([`read_limited`]): a symbolic link is
//! followed, and what it leads to must itself be a regular file under the
//! limit, so a link to `/dev/zero` or a FIFO is refused like the device or
//! FIFO itself.

use std::fs::{File, Metadata};
use std::io::Read as _;
use std::path::Path;

use crate::error::EvidenceError;

/// What kind of file system object `meta` describes, in a word.
pub(crate) fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Refuse `meta` unless it is a regular file.
pub(crate) fn require_regular(path: &Path, meta: &Metadata) -> Result<(), EvidenceError> {
    if meta.file_type().is_file() {
        Ok(())
    } else {
        Err(EvidenceError::NotRegularFile {
            kind: kind_of(meta),
        }
        .in_file(path))
    }
}

/// Read all of the regular file `path` (following symbolic links), refusing
/// it if it holds more than `limit` bytes or is not a regular file.
pub fn read_limited(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, EvidenceError> {
    read(path, limit, what, true)
}

/// [`read_limited`] as UTF-8 text; other bytes are refused, naming the file.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, EvidenceError> {
    let bytes = read_limited(path, limit, what)?;
    String::from_utf8(bytes).map_err(|_| EvidenceError::NotText { what }.in_file(path))
}

/// Like [`read_limited`], but a symbolic link is refused, never followed.
pub fn read_no_follow(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, EvidenceError> {
    read(path, limit, what, false)
}

fn read(
    path: &Path,
    limit: u64,
    what: &'static str,
    follow: bool,
) -> Result<Vec<u8>, EvidenceError> {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    }
    .map_err(|e| EvidenceError::io("open", path, e))?;
    require_regular(path, &meta)?;
    let file = open_nonblocking(path, follow)?;
    let meta = file
        .metadata()
        .map_err(|e| EvidenceError::io("read", path, e))?;
    require_regular(path, &meta)?;
    let size = meta.len();
    if size > limit {
        return Err(EvidenceError::TooLarge { what, size, limit }.in_file(path));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(size as usize)
        .map_err(|_| EvidenceError::TooLarge { what, size, limit }.in_file(path))?;
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| EvidenceError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(EvidenceError::TooLarge {
            what,
            size: bytes.len() as u64,
            limit,
        }
        .in_file(path));
    }
    Ok(bytes)
}

fn open_nonblocking(path: &Path, follow: bool) -> Result<File, EvidenceError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut flags = libc::O_NONBLOCK;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        options.custom_flags(flags);
    }
    #[cfg(not(unix))]
    let _ = follow;
    options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return EvidenceError::NotRegularFile {
                kind: "a symbolic link",
            }
            .in_file(path);
        }
        EvidenceError::io("open", path, e)
    })
}
