//! Errors of the symbolizer. None of them is fatal for a lookup: an object that
//! cannot be read or parsed only loses its names ("???").

use std::io;

/// Something that went wrong while reading a memory map or an object file.
#[derive(Debug, thiserror::Error)]
pub enum SymbolsError {
    /// A file (the memory map, an object, a debug file) could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that could not be read.
        path: String,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// A line of a `/proc/PID/maps` file has an unexpected shape.
    #[error("malformed memory map line {line}: {text:?}")]
    BadMapsLine {
        /// One-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// An object file is not a readable ELF file.
    #[error("cannot parse {path} as ELF: {source}")]
    Elf {
        /// The object file.
        path: String,
        /// What the ELF parser said.
        source: object::Error,
    },
    /// The DWARF debug info of an object is malformed (its symbols still work).
    #[error("cannot read the DWARF debug info of {path}: {source}")]
    Dwarf {
        /// The object file (or its separate debug file).
        path: String,
        /// What the DWARF parser said.
        source: gimli::Error,
    },
    /// An executable mapping's file offset lies in no `PT_LOAD` segment, so the
    /// load bias is unknown.
    #[error("{path}: no loadable segment covers file offset {offset:#x}")]
    NoSegment {
        /// The object file.
        path: String,
        /// The mapping's file offset.
        offset: u64,
    },
}
