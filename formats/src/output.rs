//! Writing profile files safely: into a temporary file beside the target, renamed
//! over it only when complete, so no reader ever sees a truncated profile.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::cachegrind_writer::{write_cachegrind, CachegrindError};
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
        // Like any new file: rw-r--r-- less the umask (temporary files default to rw-------).
        .permissions(fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(io_error)?;
    let gzip = file_name.ends_with(".gz");
    let mut out = BufWriter::with_capacity(1 << 18, temporary.as_file());
    let result = if gzip {
        let mut encoder = GzEncoder::new(&mut out, Compression::default());
        let written = write(profile, format, &mut encoder);
        written.and_then(|()| encoder.finish().map(drop).map_err(CachegrindError::Io))
    } else {
        write(profile, format, &mut out)
    };
    result
        .and_then(|()| out.flush().map_err(CachegrindError::Io))
        .map_err(|error| match error {
            CachegrindError::Io(source) => io_error(source),
            other => Error::Invalid {
                path: name.clone(),
                message: other.to_string(),
            },
        })?;
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
