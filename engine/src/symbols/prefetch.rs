//! Object files parsed ahead, on a thread of their own, as soon as the
//! tracer sees them mapped executable: ld.so maps a library well before
//! its code first runs, which is when [`super::Symbols`] needs its symbols
//! and line tables (libc's DWARF takes tens of milliseconds to inflate and
//! parse). Each file (by [`FileKey`]) is parsed ahead at most once per
//! run of the process; the first `Symbols` that needs it takes the result.

use std::path::Path;
use std::sync::Mutex;
use std::thread::JoinHandle;

use super::elf::ElfObject;
use super::{FileKey, SymbolsError};

/// What parsing an object gives: the object and a problem with its DWARF,
/// or why it cannot be read.
pub(super) type Parsed = Result<(ElfObject, Option<SymbolsError>), SymbolsError>;

/// The files parsed ahead, with the parse not yet taken.
static STARTED: Mutex<Vec<(FileKey, Option<JoinHandle<Parsed>>)>> = Mutex::new(Vec::new());

/// Starts parsing the object file at `path` on a thread of its own,
/// unless it was started before (or cannot be looked at, or no thread can
/// be started: then it is parsed when needed, as without this).
pub fn prefetch(path: &str) {
    let Ok(key) = FileKey::of(path) else {
        return;
    };
    let mut started = STARTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if started.iter().any(|(started, _)| *started == key) {
        return;
    }
    let owned = path.to_owned();
    let spawned = std::thread::Builder::new()
        .name("cgx-symbols".into())
        .spawn(move || {
            // Beside the tracer, not on its CPU.
            crate::launch::unpin_current_thread();
            ElfObject::load(Path::new(&owned))
        });
    if let Ok(handle) = spawned {
        started.push((key, Some(handle)));
    }
}

/// The parse of the file `key` started ahead, when there is one not yet
/// taken (waiting for it to end).
pub(super) fn take(key: &FileKey) -> Option<Parsed> {
    let handle = {
        let mut started = STARTED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (_, handle) = started.iter_mut().find(|(started, _)| started == key)?;
        handle.take()?
    };
    // A parse that panicked is done again by the caller.
    handle.join().ok()
}
