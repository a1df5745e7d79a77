//! Where an object's separate debug file is, as Valgrind 3.19 looks for
//! it: by the object's build id under `/usr/lib/debug/.build-id`, else by
//! the file its `.gnu_debuglink` names in Valgrind's places (each with the
//! checksum the link gives), the `--extra-debuginfo-path` folder among
//! them; and, with `--allow-mismatched-debuginfo=yes`, when those find
//! nothing, the file at the object's own path under that folder, taken
//! unchecked.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use object::{Object, ReadRef};

/// Where debug files are looked for besides Valgrind's standard places
/// (its `--extra-debuginfo-path` and `--allow-mismatched-debuginfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugPlaces {
    /// A folder under which a debug file lies at its object's folder
    /// (`EXTRA/usr/bin/prog.debug` for `/usr/bin/prog` linked to
    /// `prog.debug`).
    pub extra: Option<PathBuf>,
    /// When nothing else is found, the file at the object's own path
    /// under `extra` is its debug file, checked neither by build id nor
    /// by checksum.
    pub allow_mismatched: bool,
}

/// The places every object of this process is looked up in
/// ([`look_for_debug_files`]).
static PLACES: RwLock<DebugPlaces> = RwLock::new(DebugPlaces {
    extra: None,
    allow_mismatched: false,
});

/// From now on, debug files are also looked for in `places` (set before
/// the first object is parsed: objects parsed already keep what they had).
pub fn look_for_debug_files(places: DebugPlaces) {
    *PLACES
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = places;
}

/// The places set by [`look_for_debug_files`].
pub(super) fn debug_places() -> DebugPlaces {
    PLACES
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// The separate debug file of `file` (at `path`), in Valgrind's order:
/// `/usr/lib/debug/.build-id/xx/yyyy.debug` by its build id, else the
/// first of [`debug_link_candidates`] with the checksum its
/// `.gnu_debuglink` gives, else, with `places.allow_mismatched`, the file
/// at `path` under `places.extra`.
pub(super) fn separate_debug_file<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
    path: &Path,
    places: &DebugPlaces,
) -> Option<PathBuf> {
    by_build_id(file)
        .or_else(|| by_debug_link(file, path, places.extra.as_deref()))
        .or_else(|| mismatched(path, places))
}

/// `/usr/lib/debug/.build-id/xx/yyyy.debug` when it exists.
fn by_build_id<'data, R: ReadRef<'data>>(file: &object::File<'data, R>) -> Option<PathBuf> {
    let id = file.build_id().ok()??;
    let (first, rest) = id.split_first()?;
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let p = PathBuf::from(format!("/usr/lib/debug/.build-id/{first:02x}/{hex}.debug"));
    p.is_file().then_some(p)
}

/// The first of [`debug_link_candidates`] for the file `.gnu_debuglink`
/// names that has the checksum it gives (never `path` itself).
fn by_debug_link<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
    path: &Path,
    extra: Option<&Path>,
) -> Option<PathBuf> {
    let (name, crc) = file.gnu_debuglink().ok()??;
    debug_link_candidates(path, Path::new(std::ffi::OsStr::from_bytes(name)), extra)
        .into_iter()
        .find(|candidate| candidate != path && crc32_of(candidate) == Some(crc))
}

/// The files Valgrind tries, in its order, for the debug file `name` of
/// the object at `object`, strings joined as Valgrind joins them: `name`
/// itself when absolute; then `DIR/name`, `DIR/.debug/name`,
/// `/usr/lib/debug` + `DIR/name`, and with an `extra` folder `extra` +
/// `DIR/name`, each for the object's folder and then for its "usrmerge"
/// folder: what follows the first `usr` in the folder's name
/// (`/lib/x86_64-linux-gnu` for `/usr/lib/x86_64-linux-gnu`).
fn debug_link_candidates(object: &Path, name: &Path, extra: Option<&Path>) -> Vec<PathBuf> {
    let object = object.as_os_str().as_bytes();
    let name = name.as_os_str().as_bytes();
    let folder = match object.iter().rposition(|&byte| byte == b'/') {
        Some(at) => &object[..at],
        None => object,
    };
    let merged = (folder.windows(3).position(|three| three == b"usr")).map(|at| &folder[at + 3..]);
    let folders: Vec<&[u8]> = std::iter::once(folder).chain(merged).collect();
    let joined = |parts: &[&[u8]]| PathBuf::from(OsString::from_vec(parts.concat()));
    let mut candidates = Vec::new();
    if name.starts_with(b"/") {
        candidates.push(joined(&[name]));
    }
    for prefix in [&b""[..], b"/.debug"] {
        candidates.extend(folders.iter().map(|dir| joined(&[dir, prefix, b"/", name])));
    }
    let before: Vec<&[u8]> = std::iter::once(&b"/usr/lib/debug"[..])
        .chain(extra.map(|extra| extra.as_os_str().as_bytes()))
        .collect();
    for before in before {
        candidates.extend(folders.iter().map(|dir| joined(&[before, dir, b"/", name])));
    }
    candidates
}

/// With `places.allow_mismatched`, the file at `path` under
/// `places.extra` (`EXTRA/` + `path`), when there is one.
fn mismatched(path: &Path, places: &DebugPlaces) -> Option<PathBuf> {
    let extra = places.extra.as_ref().filter(|_| places.allow_mismatched)?;
    let parts = [
        extra.as_os_str().as_bytes(),
        b"/",
        path.as_os_str().as_bytes(),
    ];
    let candidate = PathBuf::from(OsString::from_vec(parts.concat()));
    candidate.is_file().then_some(candidate)
}

/// The CRC-32 of the file at `path` (`.gnu_debuglink`'s checksum).
fn crc32_of(path: &Path) -> Option<u32> {
    let mut file = flate2::CrcReader::new(std::fs::File::open(path).ok()?);
    std::io::copy(&mut file, &mut std::io::sink()).ok()?;
    Some(file.crc().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debug_link_checksum_is_the_crc_32_of_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("check");
        // The CRC-32 check value of "123456789".
        std::fs::write(&path, b"123456789").unwrap();
        assert_eq!(crc32_of(&path), Some(0xcbf4_3926));
        assert_eq!(crc32_of(&dir.path().join("absent")), None);
    }

    /// `debug_link_candidates` of (object, name, extra), as strings.
    fn candidates(object: &str, name: &str, extra: Option<&str>) -> Vec<String> {
        let extra = extra.map(Path::new);
        debug_link_candidates(Path::new(object), Path::new(name), extra)
            .iter()
            .map(|path| path.display().to_string())
            .collect()
    }

    #[test]
    fn a_debug_link_is_looked_for_in_valgrinds_places_in_its_order() {
        let table: [(&str, &str, Option<&str>, &[&str]); 4] = [
            // No "usr" in the folder: three places, and the extra one.
            (
                "/opt/app/prog",
                "prog.debug",
                Some("/x"),
                &[
                    "/opt/app/prog.debug",
                    "/opt/app/.debug/prog.debug",
                    "/usr/lib/debug/opt/app/prog.debug",
                    "/x/opt/app/prog.debug",
                ],
            ),
            // The usrmerge folder after each, without the extra one.
            (
                "/usr/lib/x86_64-linux-gnu/libz.so.1",
                "libz.debug",
                None,
                &[
                    "/usr/lib/x86_64-linux-gnu/libz.debug",
                    "/lib/x86_64-linux-gnu/libz.debug",
                    "/usr/lib/x86_64-linux-gnu/.debug/libz.debug",
                    "/lib/x86_64-linux-gnu/.debug/libz.debug",
                    "/usr/lib/debug/usr/lib/x86_64-linux-gnu/libz.debug",
                    "/usr/lib/debug/lib/x86_64-linux-gnu/libz.debug",
                ],
            ),
            // "usr" inside a name: what follows it, relative.
            (
                "/home/usrx/bin/p",
                "p.debug",
                Some("/x"),
                &[
                    "/home/usrx/bin/p.debug",
                    "x/bin/p.debug",
                    "/home/usrx/bin/.debug/p.debug",
                    "x/bin/.debug/p.debug",
                    "/usr/lib/debug/home/usrx/bin/p.debug",
                    "/usr/lib/debugx/bin/p.debug",
                    "/x/home/usrx/bin/p.debug",
                    "/xx/bin/p.debug",
                ],
            ),
            // An absolute name first, then joined as the others.
            (
                "/opt/p",
                "/d/p.debug",
                None,
                &[
                    "/d/p.debug",
                    "/opt//d/p.debug",
                    "/opt/.debug//d/p.debug",
                    "/usr/lib/debug/opt//d/p.debug",
                ],
            ),
        ];
        for (object, name, extra, expected) in table {
            assert_eq!(candidates(object, name, extra), expected, "{object} {name}");
        }
    }

    #[test]
    fn a_mismatched_file_is_taken_only_when_allowed_and_present() {
        let dir = tempfile::tempdir().unwrap();
        let object = Path::new("/opt/app/prog");
        let under = dir.path().join("opt/app");
        std::fs::create_dir_all(&under).unwrap();
        std::fs::write(under.join("prog"), b"debug").unwrap();
        let places = |allow_mismatched| DebugPlaces {
            extra: Some(dir.path().to_path_buf()),
            allow_mismatched,
        };
        let expected = PathBuf::from(format!("{}//opt/app/prog", dir.path().display()));
        assert_eq!(mismatched(object, &places(true)), Some(expected));
        assert_eq!(mismatched(object, &places(false)), None);
        assert_eq!(mismatched(Path::new("/opt/app/other"), &places(true)), None);
        assert_eq!(mismatched(object, &DebugPlaces::default()), None);
    }
}
