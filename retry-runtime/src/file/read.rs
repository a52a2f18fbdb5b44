//! Reading a configuration file from disk, refusing what would hang the
//! reader or fill its memory.
//!
//! The path comes from an operator, and a mistake there must not stop a
//! service: a FIFO with no writer would block start-up (or the reload
//! task) forever, and `/dev/zero` or a huge file would be read whole into
//! memory. So only a regular file is read (links followed), at most
//! [`MAX_FILE_BYTES`] of it, and every refusal is an error naming the path
//! and what it found; nothing of the running configuration changes.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

use super::problems::{ConfigFileError, Cursor, Problem};

/// The largest configuration file read: 1 MiB, hundreds of times what any
/// set of guards and operations needs.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// The text of the file at `path` and the name its errors give it.
pub(super) fn read(path: &Path) -> Result<(String, String), ConfigFileError> {
    let name = path.display().to_string();
    let whole_file = |message: String| ConfigFileError {
        file: name.clone(),
        problems: vec![Problem { line: 0, column: 0, field: None, message }],
    };
    let cannot_read = |error: std::io::Error| whole_file(format!("cannot read the file: {error}"));
    let file = open(path).map_err(cannot_read)?;
    let metadata = file.metadata().map_err(cannot_read)?;
    if !metadata.is_file() {
        return Err(whole_file(format!(
            "cannot read the file: it is {}, not a regular file",
            kind(&metadata)
        )));
    }
    let too_large = |size: &str| {
        whole_file(format!(
            "cannot read the file: it is {size} bytes, over the bound of {MAX_FILE_BYTES} bytes"
        ))
    };
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_large(&metadata.len().to_string()));
    }
    // The size may have changed since: read one byte past the bound at most.
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot_read)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(&format!("more than {MAX_FILE_BYTES}")));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, name)),
        Err(error) => {
            let valid = error.utf8_error().valid_up_to();
            // The prefix before the bad byte is valid UTF-8: count in it.
            let prefix = std::str::from_utf8(&error.as_bytes()[..valid]).unwrap_or_default();
            let (line, column) = Cursor::new(prefix).advance_to(valid);
            Err(ConfigFileError {
                file: name.clone(),
                problems: vec![Problem {
                    line,
                    column,
                    field: None,
                    message: format!("the file is not UTF-8: the byte at offset {valid} is not valid UTF-8"),
                }],
            })
        }
    }
}

/// Opens `path` for reading without blocking on a FIFO that has no writer
/// (it is refused by its type once open; a regular file reads as usual).
#[cfg(unix)]
fn open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

/// Opens `path` for reading, after refusing what is not a regular file
/// (no FIFOs to block on elsewhere, but the same rule).
#[cfg(not(unix))]
fn open(path: &Path) -> std::io::Result<File> {
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(std::io::Error::other(format!("it is {}, not a regular file", kind(&metadata))));
    }
    File::open(path)
}

/// What a path that is not a regular file is, in words.
fn kind(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "something else"
}
