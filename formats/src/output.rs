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
/// untouched. Errors name `path`.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Error> {
    let name = path.display().to_string();
    let io_error = |error: io::Error| Error::io(&name, error);
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
