//! Writing profile files safely: into a temporary file beside the target, renamed
//! over it only when complete, so no reader ever sees a truncated profile.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::cachegrind_writer::{cachegrind_part, write_cachegrind, CachegrindError};
use crate::callgrind_writer::{write_callgrind, CallgrindOptions};
use crate::error::Error;
use crate::model::Profile;

/// The file formats cgx reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Cachegrind's format (`cachegrind.out.PID`).
    Cachegrind,
    /// Callgrind's format (`callgrind.out.PID`), with name and position compression
    /// as chosen.
    Callgrind(CallgrindOptions),
}

/// Writes `profile` to `path` in `format`, atomically. A path ending in `.gz` gets a
/// gzip-compressed file.
pub fn write_path(profile: &Profile, format: Format, path: &Path) -> Result<(), Error> {
    if format == Format::Cachegrind {
        cachegrind_part(profile).map_err(|error| Error::Invalid {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
    }
    let gzip = path.to_string_lossy().ends_with(".gz");
    write_atomically(path, |mut out| {
        // The profile fits the format (checked above), so only writing can fail.
        let as_io = |error: CachegrindError| match error {
            CachegrindError::Io(error) => error,
            other => io::Error::other(other),
        };
        if gzip {
            let mut encoder = GzEncoder::new(out, Compression::default());
            write(profile, format, &mut encoder).map_err(as_io)?;
            encoder.finish().map(drop)
        } else {
            write(profile, format, &mut out).map_err(as_io)
        }
    })
}

/// Creates `path` with what `write` writes, whole or not at all: into a temporary
/// file beside it (rw-r--r-- less the umask, like any new file), renamed over it
/// only when complete. On failure nothing is left behind and an existing file is
/// untouched. A symbolic link is followed (the file it names is replaced, the
/// link stays); what is not a file nor a folder (`/dev/null`, `/dev/stdout`, a
/// pipe) is written to as it is, since renaming over it would replace it.
/// Errors name `path`.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Error> {
    let name = path.display().to_string();
    let io_error = |error: io::Error| Error::io(&name, error);
    let resolved;
    let path = match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => match fs::canonicalize(path) {
            Ok(target) => {
                resolved = target;
                resolved.as_path()
            }
            // A dangling link: replaced by the file.
            Err(_) => path,
        },
        _ => path,
    };
    if let Ok(metadata) = fs::metadata(path) {
        if !metadata.is_file() && !metadata.is_dir() {
            let file = fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_error)?;
            let mut out = BufWriter::with_capacity(1 << 18, &file);
            return write(&mut out).and_then(|()| out.flush()).map_err(io_error);
        }
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The folder is checked first: tempfile's errors name the temporary file.
    fs::metadata(dir).map_err(io_error)?;
    let temporary = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(io_error)?;
    let mut out = BufWriter::with_capacity(1 << 18, temporary.as_file());
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(io_error)?;
    drop(out);
    temporary.as_file().sync_all().map_err(io_error)?;
    temporary
        .persist(path)
        .map_err(|error| io_error(error.error))?;
    Ok(())
}

/// Writes `profile` to `out` in `format`.
pub fn write(
    profile: &Profile,
    format: Format,
    out: &mut impl Write,
) -> Result<(), CachegrindError> {
    match format {
        Format::Cachegrind => write_cachegrind(profile, out),
        Format::Callgrind(options) => Ok(write_callgrind(profile, options, out)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(out: &mut dyn Write) -> io::Result<()> {
        out.write_all(b"hello\n")
    }

    #[test]
    fn a_new_file_and_a_replaced_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        write_atomically(&path, hello).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "hello\n");
        fs::write(&path, "old and longer\n").unwrap();
        write_atomically(&path, hello).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "hello\n");
        // Nothing else is left in the folder.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_pipe_stays_what_it_is() {
        use std::io::Read;
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // A reader first, so that the writer's open does not wait.
        let mut reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        write_atomically(&fifo, hello).unwrap();
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello\n");
    }

    #[test]
    fn a_symbolic_link_stays_and_its_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, "old\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, hello).unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "hello\n");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        fs::write(&path, "old\n").unwrap();
        let failing = |_: &mut dyn Write| Err(io::Error::other("no"));
        assert!(write_atomically(&path, failing).is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
