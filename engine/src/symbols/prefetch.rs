//! Object files parsed ahead, on threads beside the tracer, before
//! [`super::Symbols`] needs them (libc's DWARF takes tens of milliseconds
//! to inflate and parse, longer than a short program runs): the libraries
//! a program will map, from when it starts ([`prefetch_needed`]), and each
//! file the tracer sees mapped executable ([`prefetch`]). Each file (by
//! [`FileKey`]) is parsed ahead at most once per run of the process; the
//! first `Symbols` that needs it takes the result, waiting for a parse
//! under way, or parses it itself when its turn has not come yet. The
//! result is the object with its symbols; its line tables follow on the
//! same thread once the thread has no symbols left to read (translating
//! needs an object's symbols at its first block, the call graph its lines
//! only when it replays that block, later).

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::elf::{ElfObject, LinesToRead};
use super::needed::{needed_libraries, started_with};
use super::{FileKey, SymbolsError};

/// What parsing an object gives: the object and a problem with its DWARF,
/// or why it cannot be read.
pub(super) type Parsed = Result<(ElfObject, Option<SymbolsError>), SymbolsError>;

/// Where the parse of a file stands.
enum State {
    /// Waiting for a thread of [`prefetch_needed`].
    Queued(PathBuf),
    /// A thread parses it.
    Parsing,
    /// Parsed, not yet taken.
    Parsed(Box<Parsed>),
    /// Taken, or given up (left to the `Symbols` that needs it).
    Taken,
}

/// The files parsed ahead, in the order they are to be parsed.
static FILES: Mutex<Vec<(FileKey, State)>> = Mutex::new(Vec::new());

/// Signalled when a parse ends.
static PARSED: Condvar = Condvar::new();

/// At most this many threads parse the libraries of [`prefetch_needed`].
const MAX_THREADS: usize = 4;

fn files() -> MutexGuard<'static, Vec<(FileKey, State)>> {
    FILES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts parsing the object file at `path` on a thread of its own,
/// unless it was started or queued before (or cannot be looked at, or no
/// thread can be started: then it is parsed when needed, as without this).
pub fn prefetch(path: &str) {
    let Ok(key) = FileKey::of(path) else {
        return;
    };
    {
        let mut files = files();
        if files.iter().any(|(known, _)| *known == key) {
            return;
        }
        files.push((key.clone(), State::Parsing));
    }
    let beside = crate::launch::pinned_cpu();
    let (parsed, owned) = (key.clone(), PathBuf::from(path));
    if !start_beside(beside, move || {
        read_lines(parse(&parsed, &owned).into_iter().collect())
    }) {
        set(&key, State::Taken);
    }
}

/// Starts parsing, beside the tracer, the objects the program at `program`
/// maps as it starts, in the order they are needed: the dynamic loader and
/// the program (see [`started_with`]; queued before this returns), then
/// the shared libraries, deepest dependencies first (see
/// [`needed_libraries`], found on the thread that parses). As many threads
/// parse as there are CPUs beside the caller's (up to four).
pub fn prefetch_needed(program: &Path) {
    queue(&started_with(program));
    let beside = crate::launch::pinned_cpu();
    let program = program.to_path_buf();
    let threads = std::thread::available_parallelism()
        .map_or(1, |cpus| cpus.get().saturating_sub(1))
        .clamp(1, MAX_THREADS);
    // Without a thread, nothing is parsed ahead: as without this.
    start_beside(beside, move || {
        for _ in 1..threads {
            if !start_beside(beside, parse_queued) {
                break;
            }
        }
        // The loader and the program first; the libraries are found
        // meanwhile. Every symbol table before any line table.
        let first = next_queued().and_then(|(key, path)| parse(&key, &path));
        queue(&needed_libraries(&program));
        parse_queued_with(first.into_iter().collect());
    });
}

/// Starts `work` on a thread of its own beside CPU `beside` (the
/// tracer's); whether it could be started.
fn start_beside(beside: Option<usize>, work: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name("cgx-symbols".into())
        .spawn(move || {
            crate::launch::run_beside(beside);
            work();
        })
        .is_ok()
}

/// Queues the files of `paths` not known yet.
fn queue(paths: &[PathBuf]) {
    let keys: Vec<(FileKey, PathBuf)> = paths
        .iter()
        .filter_map(|path| Some((FileKey::of(path.to_str()?).ok()?, path.clone())))
        .collect();
    let mut files = files();
    for (key, path) in keys {
        if !files.iter().any(|(known, _)| *known == key) {
            files.push((key, State::Queued(path)));
        }
    }
}

/// Parses the queued files, first queued first, until none is left;
/// then reads their line tables.
fn parse_queued() {
    parse_queued_with(Vec::new());
}

/// [`parse_queued`], then the line tables of `lines` too.
fn parse_queued_with(mut lines: Vec<LinesToRead>) {
    while let Some((key, path)) = next_queued() {
        lines.extend(parse(&key, &path));
    }
    read_lines(lines);
}

/// The first queued file, now to be parsed by the caller.
fn next_queued() -> Option<(FileKey, PathBuf)> {
    let mut files = files();
    let (key, state) = files
        .iter_mut()
        .find(|(_, state)| matches!(state, State::Queued(_)))?;
    match std::mem::replace(state, State::Parsing) {
        State::Queued(path) => Some((key.clone(), path)),
        _ => None,
    }
}

/// Parses the file `key` at `path`: keeps the object with its symbols
/// for [`take`] and gives what reads its line tables, to be read after;
/// its first question about a source line waits for them.
fn parse(key: &FileKey, path: &Path) -> Option<LinesToRead> {
    let mut lines = None;
    keep(key, || {
        ElfObject::load_symbols_first(path).map(|(object, to_read)| {
            lines = Some(to_read);
            (object, None)
        })
    });
    lines
}

/// Reads the line tables of `objects` and sends them to their objects. A
/// broken DWARF section found now is not reported (the object was taken:
/// it has no line tables, as when it is reported).
fn read_lines(objects: Vec<LinesToRead>) {
    for lines in objects {
        let _ = lines.read();
    }
}

/// Keeps what `parse` gives for the file `key`; a parse that panics leaves
/// the file to the `Symbols` that needs it.
fn keep(key: &FileKey, parse: impl FnOnce() -> Parsed) {
    /// Gives the file up unless the parse ended.
    struct Unfinished<'a>(Option<&'a FileKey>);
    impl Drop for Unfinished<'_> {
        fn drop(&mut self) {
            if let Some(key) = self.0 {
                set(key, State::Taken);
            }
        }
    }
    let mut unfinished = Unfinished(Some(key));
    let parsed = parse();
    unfinished.0 = None;
    set(key, State::Parsed(Box::new(parsed)));
}

/// Sets the state of the file `key` and wakes those waiting for a parse.
fn set(key: &FileKey, state: State) {
    let mut files = files();
    if let Some((_, old)) = files.iter_mut().find(|(known, _)| known == key) {
        *old = state;
    }
    drop(files);
    PARSED.notify_all();
}

/// The parse of the file `key` done ahead, when there is one not yet
/// taken (waiting for one under way). `None` leaves the parse to the
/// caller: the file was not parsed ahead, or was taken before, or its turn
/// in the queue has not come (then it is not parsed ahead any more).
pub(super) fn take(key: &FileKey) -> Option<Parsed> {
    let mut files = files();
    loop {
        let (_, state) = files.iter_mut().find(|(known, _)| known == key)?;
        match std::mem::replace(state, State::Taken) {
            State::Parsed(parsed) => return Some(*parsed),
            State::Queued(_) | State::Taken => return None,
            State::Parsing => {
                *state = State::Parsing;
                files = PARSED
                    .wait(files)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of its own (not an object: it parses at once, to an error).
    fn file(dir: &tempfile::TempDir, name: &str) -> (FileKey, PathBuf) {
        let path = dir.path().join(name);
        std::fs::write(&path, "not an object").unwrap();
        (FileKey::of(path.to_str().unwrap()).unwrap(), path)
    }

    fn is_taken(key: &FileKey) -> bool {
        files()
            .iter()
            .any(|(known, state)| known == key && matches!(state, State::Taken))
    }

    #[test]
    fn a_file_parsed_ahead_is_taken_once_after_waiting_for_its_parse() {
        let dir = tempfile::tempdir().unwrap();
        let (key, path) = file(&dir, "mapped");
        prefetch(path.to_str().unwrap());
        assert!(matches!(take(&key), Some(Err(SymbolsError::Elf { .. }))));
        assert!(take(&key).is_none(), "taken before");
        // Not parsed ahead again.
        prefetch(path.to_str().unwrap());
        assert!(take(&key).is_none());
    }

    #[test]
    fn a_queued_file_whose_turn_has_not_come_is_left_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let (first, first_path) = file(&dir, "first");
        let (second, second_path) = file(&dir, "second");
        queue(&[first_path, second_path.clone(), second_path]);
        assert_eq!(
            files().iter().filter(|(known, _)| *known == second).count(),
            1,
            "queued once"
        );
        assert!(take(&second).is_none());
        assert!(is_taken(&second), "no longer parsed ahead");
        parse_queued();
        assert!(matches!(take(&first), Some(Err(SymbolsError::Elf { .. }))));
        assert!(take(&second).is_none());
    }

    #[test]
    fn a_parse_that_panics_leaves_the_file_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let (key, _) = file(&dir, "panics");
        files().push((key.clone(), State::Parsing));
        let panicked = std::panic::catch_unwind(|| keep(&key, || panic!("a broken parser")));
        assert!(panicked.is_err());
        assert!(is_taken(&key));
        assert!(take(&key).is_none());
    }

    #[test]
    fn a_parse_ahead_gives_the_object_whose_line_tables_follow() {
        // A copy of the test program: a file no other test parses ahead.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("program");
        std::fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
        let key = FileKey::of(path.to_str().unwrap()).unwrap();
        prefetch(path.to_str().unwrap());
        let Some(Ok((ahead, None))) = take(&key) else {
            panic!("not parsed ahead");
        };
        let (loaded, _) = ElfObject::load(&path).unwrap();
        let addresses = (0..4096).map(|page| page << 12);
        let lines: Vec<_> = addresses.map(|a| (a, loaded.source_line(a))).collect();
        assert!(lines.iter().any(|(_, (file, _))| file.is_some()));
        for (addr, line) in lines {
            assert_eq!(ahead.source_line(addr), line, "{addr:#x}");
        }
    }

    #[test]
    fn a_file_never_queued_is_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let (key, _) = file(&dir, "unknown");
        assert!(take(&key).is_none());
    }
}
