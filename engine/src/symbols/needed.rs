//! The shared libraries a program maps as it starts, found before it runs
//! the way the dynamic loader finds them: the `DT_NEEDED` entries of the
//! program and of each library found, looked up in `DT_RPATH`,
//! `LD_LIBRARY_PATH`, `DT_RUNPATH`, `/etc/ld.so.cache` and the default
//! directories, and `LD_PRELOAD`. The answer is a guess for
//! [`super::prefetch`]: a library the loader finds elsewhere is parsed
//! ahead for nothing and parsed again when it is mapped.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use object::elf::{DT_NEEDED, DT_RPATH, DT_RUNPATH, EM_X86_64};
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::Endianness;

use super::window::read_cache;

/// At most this many libraries are looked for.
const LIMIT: usize = 64;

/// The directories the loader searches last (glibc's system directories on
/// x86-64: Debian's multiarch ones, then those of other distributions).
const DEFAULT_DIRS: [&str; 6] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The loader's cache of library names, `/etc/ld.so.cache`.
const CACHE: &str = "/etc/ld.so.cache";

/// The shared libraries `program` (an ELF executable, or a script whose
/// `#!` line names one) maps as it starts, by their canonical paths (as
/// `/proc/PID/maps` shows them), deepest dependencies first: the order in
/// which the loader relocates them and their code first runs. Empty for a
/// static program or one that cannot be read.
pub fn needed_libraries(program: &Path) -> Vec<PathBuf> {
    let environment = |name| std::env::var_os(name).unwrap_or_default();
    let search = Search {
        library_path: split_paths(&environment("LD_LIBRARY_PATH")),
        cache: std::fs::read(CACHE)
            .map(|bytes| parse_cache(&bytes))
            .unwrap_or_default(),
    };
    let program = interpreted_by(program).unwrap_or_else(|| program.to_path_buf());
    let preload: Vec<String> = environment("LD_PRELOAD")
        .as_bytes()
        .split(|&b| b == b' ' || b == b':')
        .filter(|name| !name.is_empty())
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect();
    search.closure(&program, &preload)
}

/// The object files the kernel maps when it starts `program` (a script's
/// interpreter for a script), by their canonical paths: the program's
/// interpreter (`PT_INTERP`, the dynamic loader), if it has one, then the
/// program.
pub fn started_with(program: &Path) -> Vec<PathBuf> {
    let program = interpreted_by(program).unwrap_or_else(|| program.to_path_buf());
    let interpreter = read_cache(&program).ok().and_then(|data| {
        let elf = ElfFile64::<Endianness, _>::parse(&data).ok()?;
        let endian = elf.endian();
        elf.elf_program_headers().iter().find_map(|header| {
            let path = header.interpreter(endian, &data).ok()??;
            Some(PathBuf::from(OsStr::from_bytes(path)))
        })
    });
    interpreter
        .into_iter()
        .chain([program])
        .filter_map(|path| path.canonicalize().ok())
        .collect()
}

/// The interpreter a script's `#!` line names, when `path` is a script.
fn interpreted_by(path: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let mut file = File::open(path).ok()?;
    let read = file.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let interpreter = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|word| !word.is_empty())?;
    Some(PathBuf::from(OsStr::from_bytes(interpreter)))
}

/// Colon-separated directories; empty ones are left out.
fn split_paths(list: &OsStr) -> Vec<PathBuf> {
    list.as_bytes()
        .split(|&b| b == b':' || b == b';')
        .filter(|dir| !dir.is_empty())
        .map(|dir| PathBuf::from(OsStr::from_bytes(dir)))
        .collect()
}

/// The x86-64 libraries of the loader's cache, by name (`libc.so.6`), in
/// the cache's order; those for processor capabilities (`hwcap` set) are
/// left out. Empty for bytes that are not a cache in glibc's format.
fn parse_cache(bytes: &[u8]) -> Vec<(String, PathBuf)> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    /// An x86-64 library for glibc: `FLAG_ELF_LIBC6 | FLAG_X8664_LIB64`.
    const X86_64_LIBC6: u32 = 0x0303;
    let Some(start) = bytes.windows(MAGIC.len()).position(|w| w == MAGIC) else {
        return Vec::new();
    };
    let cache = &bytes[start..];
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(cache.get(at..at + 4)?.try_into().ok()?))
    };
    let string = |at: u32| -> Option<&[u8]> {
        let tail = cache.get(at as usize..)?;
        Some(&tail[..tail.iter().position(|&b| b == 0)?])
    };
    let Some(count) = word(20) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for i in 0..count as usize {
        let at = HEADER + i * ENTRY;
        let (Some(flags), Some(key), Some(value)) = (word(at), word(at + 4), word(at + 8)) else {
            break;
        };
        let hwcap = cache
            .get(at + 16..at + 24)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes);
        if flags != X86_64_LIBC6 || hwcap != Some(0) {
            continue;
        }
        if let (Some(name), Some(path)) = (string(key), string(value)) {
            found.push((
                String::from_utf8_lossy(name).into_owned(),
                PathBuf::from(OsStr::from_bytes(path)),
            ));
        }
    }
    found
}

/// What the loader reads of an object to find its libraries.
#[derive(Debug, Default, PartialEq)]
struct Dynamic {
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
}

/// The dynamic entries of the x86-64 ELF object at `path`; `None` for
/// another machine's object or a file that is not one.
fn dynamic(path: &Path) -> Option<Dynamic> {
    let data = read_cache(path).ok()?;
    let elf = ElfFile64::<Endianness, _>::parse(&data).ok()?;
    let endian = elf.endian();
    if elf.elf_header().e_machine(endian) != EM_X86_64 {
        return None;
    }
    let mut found = Dynamic::default();
    let sections = elf.elf_section_table();
    // A static program, or one without section headers: no guess.
    let Ok(Some((entries, link))) = sections.dynamic(endian, &data) else {
        return Some(found);
    };
    let Ok(strings) = sections.strings(endian, &data, link) else {
        return Some(found);
    };
    for entry in entries {
        let list = match entry.tag32(endian) {
            Some(DT_NEEDED) => &mut found.needed,
            Some(DT_RPATH) => &mut found.rpath,
            Some(DT_RUNPATH) => &mut found.runpath,
            _ => continue,
        };
        let text = entry.val32(endian).and_then(|at| strings.get(at).ok());
        if let Some(text) = text {
            list.push(String::from_utf8_lossy(text).into_owned());
        }
    }
    Some(found)
}

/// The directories of a `DT_RPATH` or `DT_RUNPATH` of the object at
/// `object`: `$ORIGIN` is its directory; an entry with another variable
/// (`$LIB`, `$PLATFORM`) is left out.
fn expand(list: &[String], object: &Path) -> Vec<PathBuf> {
    let origin = object.parent().unwrap_or(Path::new("/"));
    list.iter()
        .flat_map(|entry| entry.split(':'))
        .filter(|dir| !dir.is_empty())
        .filter_map(|dir| {
            let dir = dir
                .replace("${ORIGIN}", "$ORIGIN")
                .replace("$ORIGIN", &origin.to_string_lossy());
            (!dir.contains('$')).then(|| PathBuf::from(dir))
        })
        .collect()
}

/// A library to look for, and the directories of the objects that need
/// it (their `DT_RPATH` and `DT_RUNPATH`, expanded).
struct Wanted {
    name: String,
    rpath: Vec<PathBuf>,
    runpath: Vec<PathBuf>,
}

/// Where the loader looks for libraries named without a slash.
struct Search {
    /// `LD_LIBRARY_PATH`.
    library_path: Vec<PathBuf>,
    /// The cache's x86-64 libraries.
    cache: Vec<(String, PathBuf)>,
}

impl Search {
    /// The libraries of `program` and `preload`, deepest first (see
    /// [`needed_libraries`]).
    fn closure(&self, program: &Path, preload: &[String]) -> Vec<PathBuf> {
        let Some(main) = dynamic(program) else {
            return Vec::new();
        };
        // The program's DT_RPATH applies to every library, unless it has a
        // DT_RUNPATH, which applies to its own only.
        let main_rpath = match main.runpath.is_empty() {
            true => expand(&main.rpath, program),
            false => Vec::new(),
        };
        let main_runpath = expand(&main.runpath, program);
        // Breadth first, as the loader maps them: the preloaded libraries,
        // then the program's, then theirs.
        let mut pending: VecDeque<Wanted> = preload
            .iter()
            .map(|name| Wanted {
                name: name.clone(),
                rpath: Vec::new(),
                runpath: Vec::new(),
            })
            .chain(main.needed.iter().map(|name| Wanted {
                name: name.clone(),
                rpath: main_rpath.clone(),
                runpath: main_runpath.clone(),
            }))
            .collect();
        let mut order: Vec<PathBuf> = Vec::new();
        let mut named: HashSet<String> = HashSet::new();
        while let Some(wanted) = pending.pop_front() {
            if order.len() >= LIMIT || !named.insert(wanted.name.clone()) {
                continue;
            }
            let Some((path, found)) = self.find(&wanted) else {
                continue;
            };
            let Ok(library) = path.canonicalize() else {
                continue;
            };
            if order.contains(&library) {
                continue;
            }
            let rpath: Vec<PathBuf> = match found.runpath.is_empty() {
                true => expand(&found.rpath, &library),
                false => Vec::new(),
            };
            let rpath: Vec<PathBuf> = rpath.into_iter().chain(main_rpath.clone()).collect();
            let runpath = expand(&found.runpath, &library);
            pending.extend(found.needed.iter().map(|name| Wanted {
                name: name.clone(),
                rpath: rpath.clone(),
                runpath: runpath.clone(),
            }));
            order.push(library);
        }
        order.reverse();
        order
    }

    /// The file the loader maps for `name`, and its dynamic entries.
    fn find(&self, wanted: &Wanted) -> Option<(PathBuf, Dynamic)> {
        let name = wanted.name.as_str();
        if name.contains('/') {
            let path = PathBuf::from(name);
            return dynamic(&path).map(|found| (path, found));
        }
        let in_dirs = |dirs: &mut dyn Iterator<Item = &Path>| {
            dirs.map(|dir| dir.join(name))
                .find_map(|path| dynamic(&path).map(|found| (path, found)))
        };
        let cached = self
            .cache
            .iter()
            .filter(|(cached, _)| cached == name)
            .map(|(_, path)| path.as_path());
        in_dirs(&mut wanted.rpath.iter().map(PathBuf::as_path))
            .or_else(|| in_dirs(&mut self.library_path.iter().map(PathBuf::as_path)))
            .or_else(|| in_dirs(&mut wanted.runpath.iter().map(PathBuf::as_path)))
            .or_else(|| {
                cached
                    .filter_map(|path| dynamic(path).map(|found| (path.to_path_buf(), found)))
                    .next()
            })
            .or_else(|| in_dirs(&mut DEFAULT_DIRS.iter().map(Path::new)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in glibc's format with `entries` (flags, name, path, hwcap),
    /// after `before` bytes of an older format.
    fn cache(before: usize, entries: &[(u32, &str, &str, u64)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let strings_at = 48 + 24 * entries.len();
        let mut table = Vec::new();
        for &(flags, name, path, hwcap) in entries {
            let key = strings_at + strings.len();
            strings.extend(name.as_bytes());
            strings.push(0);
            let value = strings_at + strings.len();
            strings.extend(path.as_bytes());
            strings.push(0);
            table.extend(flags.to_le_bytes());
            table.extend((key as u32).to_le_bytes());
            table.extend((value as u32).to_le_bytes());
            table.extend(0u32.to_le_bytes());
            table.extend(hwcap.to_le_bytes());
        }
        let mut bytes = vec![0xaa; before];
        bytes.extend(b"glibc-ld.so.cache1.1");
        bytes.extend((entries.len() as u32).to_le_bytes());
        bytes.extend((strings.len() as u32).to_le_bytes());
        // flags, padding, extension offset, unused.
        bytes.extend([0u8; 20]);
        bytes.extend(table);
        bytes.extend(strings);
        bytes
    }

    #[test]
    fn the_cache_gives_its_x86_64_libraries_without_those_for_capabilities() {
        let entries = [
            (
                0x0303,
                "libz.so.1",
                "/usr/lib/x86_64-linux-gnu/libz.so.1",
                0,
            ),
            // An i386 library, one for processor capabilities, an x32 one.
            (0x0003, "libz.so.1", "/usr/lib32/libz.so.1", 0),
            (0x0303, "libm.so.6", "/hwcaps/libm.so.6", 1 << 62),
            (0x0803, "libm.so.6", "/usr/libx32/libm.so.6", 0),
            (
                0x0303,
                "libm.so.6",
                "/usr/lib/x86_64-linux-gnu/libm.so.6",
                0,
            ),
        ];
        let expected = vec![
            (
                "libz.so.1".to_string(),
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libz.so.1"),
            ),
            (
                "libm.so.6".to_string(),
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libm.so.6"),
            ),
        ];
        assert_eq!(parse_cache(&cache(0, &entries)), expected);
        // After an old-format cache, offsets count from the new header.
        assert_eq!(parse_cache(&cache(36, &entries)), expected);
    }

    #[test]
    fn a_cache_cut_short_or_of_another_format_gives_what_it_holds() {
        let entries = [
            (0x0303, "liba.so", "/a/liba.so", 0),
            (0x0303, "libb.so", "/b/libb.so", 0),
        ];
        let whole = cache(0, &entries);
        // Cut inside the second entry: its strings are gone too.
        assert_eq!(parse_cache(&whole[..48 + 24 + 10]), vec![]);
        assert_eq!(parse_cache(b"ld.so-1.7.0\0\0\0\0"), vec![]);
        assert_eq!(parse_cache(&[]), vec![]);
    }

    #[test]
    fn origin_is_the_object_directory_and_other_variables_are_left_out() {
        let object = Path::new("/opt/app/bin/prog");
        let list = [
            "$ORIGIN/../lib:${ORIGIN}".to_string(),
            "/usr/$LIB/x:/fixed::".to_string(),
        ];
        assert_eq!(
            expand(&list, object),
            vec![
                PathBuf::from("/opt/app/bin/../lib"),
                PathBuf::from("/opt/app/bin"),
                PathBuf::from("/fixed"),
            ]
        );
    }

    #[test]
    fn library_paths_split_at_colons_and_semicolons() {
        assert_eq!(
            split_paths(OsStr::new("/a::/b;/c:")),
            vec![
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/c")
            ]
        );
        assert!(split_paths(OsStr::new("")).is_empty());
    }

    #[test]
    fn a_script_names_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!  /usr/bin/env python3 -u\nprint(1)\n").unwrap();
        assert_eq!(interpreted_by(&script), Some(PathBuf::from("/usr/bin/env")));
        std::fs::write(&script, "echo no interpreter\n").unwrap();
        assert_eq!(interpreted_by(&script), None);
        assert_eq!(interpreted_by(&dir.path().join("absent")), None);
    }

    /// A shared library built by gcc at `path`.
    fn library(path: &Path) {
        let source = path.with_extension("c");
        std::fs::write(&source, "int f(void) { return 1; }\n").unwrap();
        let built = std::process::Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(path)
            .arg(&source)
            .status()
            .unwrap();
        assert!(built.success());
    }

    #[test]
    fn a_name_is_looked_for_in_rpath_library_path_runpath_cache_in_that_order() {
        let dir = tempfile::tempdir().unwrap();
        let places = ["rpath", "library_path", "runpath", "cached"].map(|place| {
            let place = dir.path().join(place);
            std::fs::create_dir(&place).unwrap();
            library(&place.join("libx.so"));
            place
        });
        let [rpath, library_path, runpath, cached] = places.clone();
        let search = Search {
            library_path: vec![library_path],
            cache: vec![("libx.so".into(), cached.join("libx.so"))],
        };
        let mut wanted = Wanted {
            name: "libx.so".into(),
            rpath: vec![dir.path().join("absent"), rpath],
            runpath: vec![runpath],
        };
        // Each place found, then taken away for the next.
        for place in &places {
            let found = search.find(&wanted).map(|(path, _)| path);
            assert_eq!(found, Some(place.join("libx.so")));
            std::fs::remove_file(place.join("libx.so")).unwrap();
        }
        assert_eq!(search.find(&wanted).map(|(path, _)| path), None);
        // A name with a slash is a path.
        library(&dir.path().join("liby.so"));
        wanted.name = dir.path().join("liby.so").to_string_lossy().into_owned();
        assert!(search.find(&wanted).is_some());
    }

    #[test]
    fn a_library_of_another_machine_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let (other, ours) = (dir.path().join("other"), dir.path().join("ours"));
        for place in [&other, &ours] {
            std::fs::create_dir(place).unwrap();
            library(&place.join("libx.so"));
        }
        // e_machine: AArch64.
        let mut bytes = std::fs::read(other.join("libx.so")).unwrap();
        bytes[18..20].copy_from_slice(&183u16.to_le_bytes());
        std::fs::write(other.join("libx.so"), bytes).unwrap();
        let search = Search {
            library_path: vec![other, ours.clone()],
            cache: Vec::new(),
        };
        let wanted = Wanted {
            name: "libx.so".into(),
            rpath: Vec::new(),
            runpath: Vec::new(),
        };
        let found = search.find(&wanted).map(|(path, _)| path);
        assert_eq!(found, Some(ours.join("libx.so")));
    }

    #[test]
    fn a_file_that_is_not_an_elf_object_has_no_libraries() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("text");
        std::fs::write(&text, "not an object").unwrap();
        assert_eq!(dynamic(&text), None);
        assert!(needed_libraries(&text).is_empty());
    }
}
