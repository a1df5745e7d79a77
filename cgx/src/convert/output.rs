//! Writing an output file whole or not at all: into a temporary file beside it,
//! renamed over it only when complete.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Creates `path` with what `write` writes; on failure nothing is left behind and
/// an existing file is untouched. Errors name `path`.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let name = path.display().to_string();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The folder is checked first: tempfile's errors name the temporary file.
    fs::metadata(dir).with_context(|| name.clone())?;
    let temporary = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        // Like any new file: rw-r--r-- less the umask.
        .permissions(fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .with_context(|| name.clone())?;
    let mut out = BufWriter::with_capacity(1 << 18, temporary.as_file());
    write(&mut out)
        .and_then(|()| out.flush())
        .with_context(|| name.clone())?;
    drop(out);
    temporary
        .as_file()
        .sync_all()
        .with_context(|| name.clone())?;
    temporary
        .persist(path)
        .map_err(|error| error.error)
        .with_context(|| name.clone())?;
    Ok(())
}
