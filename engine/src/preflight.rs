//! What cgx can trace, checked before anything runs: the file the program
//! starts from must be an x86-64 ELF program (64-bit, not x32), or a `#!`
//! script whose interpreter is one; and not a set-user-ID or set-group-ID
//! program that ptrace would start without its privileges. Anything else
//! would run under cgx as something other than it runs natively (or be
//! decoded as the wrong instruction set), so it is refused with its reason.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How many `#!` interpreters deep the check follows (the kernel's limit
/// is about as deep).
const MAX_INTERPRETERS: usize = 4;

/// ELF's `e_machine` for x86-64.
const EM_X86_64: u16 = 0x3e;

/// What the first bytes of a file say it is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Start {
    /// An ELF file of `class` (1: 32-bit, 2: 64-bit) for `machine`.
    Elf { class: u8, machine: u16 },
    /// A script run by `interpreter`.
    Script { interpreter: PathBuf },
    /// Anything else (`execve` decides).
    Other,
}

/// Refuses the program at `path` (resolved, executable) if cgx cannot trace
/// it as it runs natively.
pub(crate) fn check(path: &Path) -> Result<()> {
    let refuse = |reason: String| Error::Untraceable {
        path: path.to_path_buf(),
        reason,
    };
    let mut current = path.to_path_buf();
    for _ in 0..MAX_INTERPRETERS {
        if let Some(reason) = privileges_lost(&current) {
            return Err(refuse(reason));
        }
        match start_of(&current) {
            Start::Script { interpreter } => current = interpreter,
            Start::Elf { class, machine } => {
                return match elf_refusal(class, machine) {
                    Some(reason) if current == path => Err(refuse(reason)),
                    Some(reason) => Err(refuse(format!(
                        "its interpreter {} is {reason}",
                        current.display()
                    ))),
                    None => Ok(()),
                };
            }
            Start::Other => return Ok(()),
        }
    }
    Ok(())
}

/// What the first bytes of the file at `path` say it is (`Other` if it
/// cannot be read).
fn start_of(path: &Path) -> Start {
    let mut header = [0u8; 256];
    let read = File::open(path).and_then(|mut file| {
        let mut got = 0;
        while got < header.len() {
            match file.read(&mut header[got..])? {
                0 => break,
                n => got += n,
            }
        }
        Ok(got)
    });
    match read {
        Ok(got) => parse_start(&header[..got]),
        Err(_) => Start::Other,
    }
}

/// What `header`, a file's first bytes, says it is.
fn parse_start(header: &[u8]) -> Start {
    if header.len() >= 20 && header.starts_with(b"\x7fELF") {
        let machine = match header[5] {
            // Big-endian.
            2 => u16::from_be_bytes([header[18], header[19]]),
            _ => u16::from_le_bytes([header[18], header[19]]),
        };
        return Start::Elf {
            class: header[4],
            machine,
        };
    }
    if let Some(rest) = header.strip_prefix(b"#!") {
        let line = rest.split(|&byte| byte == b'\n').next().unwrap_or(rest);
        let interpreter = line
            .split(|byte| byte.is_ascii_whitespace())
            .find(|word| !word.is_empty());
        if let Some(interpreter) = interpreter {
            use std::os::unix::ffi::OsStrExt;
            return Start::Script {
                interpreter: PathBuf::from(std::ffi::OsStr::from_bytes(interpreter)),
            };
        }
    }
    Start::Other
}

/// Why an ELF program of `class` for `machine` cannot be traced, if it
/// cannot.
fn elf_refusal(class: u8, machine: u16) -> Option<String> {
    match (class, machine) {
        (2, EM_X86_64) => None,
        (1, EM_X86_64) => Some("an x32 program; cgx traces 64-bit x86-64 programs".into()),
        (1, 3) => Some("a 32-bit x86 program; cgx traces 64-bit x86-64 programs".into()),
        (_, machine) => Some(format!(
            "a program for {}; cgx traces x86-64 programs",
            machine_name(machine)
        )),
    }
}

/// A processor's name from ELF's `e_machine`.
fn machine_name(machine: u16) -> String {
    let name = match machine {
        0x03 => "i386",
        0x08 => "MIPS",
        0x14 => "PowerPC",
        0x15 => "PowerPC 64",
        0x16 => "s390",
        0x28 => "ARM",
        0xb7 => "AArch64",
        0xf3 => "RISC-V",
        0x102 => "LoongArch",
        other => return format!("another processor (ELF machine {other:#x})"),
    };
    name.to_string()
}

/// Why the program at `path` would lose its privileges under ptrace, if it
/// would: set-user-ID or set-group-ID for someone else, and cgx not root
/// (a root tracer keeps them).
fn privileges_lost(path: &Path) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    // SAFETY: plain queries of this process's ids.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    setid_refusal(
        metadata.mode(),
        (metadata.uid(), metadata.gid()),
        (euid, egid),
    )
}

/// Why a file of `mode` owned by `owner` (uid, gid) run by `runner` (uid,
/// gid) would lose its privileges under ptrace, if it would.
fn setid_refusal(mode: u32, owner: (u32, u32), runner: (u32, u32)) -> Option<String> {
    if runner.0 == 0 {
        return None;
    }
    if mode & 0o4000 != 0 && owner.0 != runner.0 {
        return Some("a set-user-ID program: under ptrace it runs without its privileges".into());
    }
    if mode & 0o2000 != 0 && owner.1 != runner.1 {
        return Some("a set-group-ID program: under ptrace it runs without its privileges".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF header of `class` and `data` (1 little-, 2 big-endian) for
    /// `machine`.
    fn elf(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[4] = class;
        header[5] = data;
        let bytes = match data {
            2 => machine.to_be_bytes(),
            _ => machine.to_le_bytes(),
        };
        header[18..20].copy_from_slice(&bytes);
        header
    }

    #[test]
    fn x86_64_programs_pass_and_others_say_what_they_are() {
        let start = |header: &[u8]| match parse_start(header) {
            Start::Elf { class, machine } => elf_refusal(class, machine),
            other => panic!("{other:?}"),
        };
        assert_eq!(start(&elf(2, 1, 0x3e)), None);
        assert!(start(&elf(1, 1, 3)).is_some_and(|reason| reason.starts_with("a 32-bit x86")));
        assert!(start(&elf(1, 1, 0x3e)).is_some_and(|reason| reason.starts_with("an x32")));
        assert!(start(&elf(2, 1, 0xb7)).is_some_and(|reason| reason.contains("AArch64")));
        assert!(start(&elf(2, 2, 0x15)).is_some_and(|reason| reason.contains("PowerPC 64")));
        assert!(start(&elf(2, 1, 0x1234)).is_some_and(|reason| reason.contains("0x1234")));
    }

    #[test]
    fn scripts_name_their_interpreter() {
        let script = |text: &[u8]| parse_start(text);
        assert_eq!(
            script(b"#!/bin/sh\nexec true\n"),
            Start::Script {
                interpreter: "/bin/sh".into()
            }
        );
        assert_eq!(
            script(b"#! /usr/bin/env python3 -u\n"),
            Start::Script {
                interpreter: "/usr/bin/env".into()
            }
        );
        assert_eq!(script(b"#!\n"), Start::Other);
        assert_eq!(script(b"\x7fELF"), Start::Other);
        assert_eq!(script(b"plain text"), Start::Other);
        assert_eq!(script(b""), Start::Other);
    }

    #[test]
    fn set_id_programs_of_others_lose_their_privileges_unless_root_traces() {
        let (user, group) = (1000, 1000);
        assert!(setid_refusal(0o4755, (0, 0), (user, group)).is_some());
        assert!(setid_refusal(0o2755, (user, 42), (user, group)).is_some());
        // One's own, plain, or traced by root.
        assert_eq!(setid_refusal(0o4755, (user, group), (user, group)), None);
        assert_eq!(setid_refusal(0o0755, (0, 0), (user, group)), None);
        assert_eq!(setid_refusal(0o6755, (0, 0), (0, 0)), None);
    }
}
