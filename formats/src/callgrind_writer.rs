//! The Callgrind writer.
//!
//! It writes what Valgrind's Callgrind writes, so that KCachegrind and
//! callgrind_annotate read it: a header per part, then per function `ob=`/`fl=` when
//! they change, `fn=`, and its records; `fi=`/`fe=` switch to inlined files; calls
//! are `cob=`/`cfi=`/`cfn=`, `calls=COUNT TARGET` and the call site with its
//! inclusive cost. Names are compressed (`fn=(3) main` once, `fn=(3)` after) and
//! positions written relative to the previous cost line unless switched off.

use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::model::{Part, Position, PositionKinds, Profile};
use crate::names::{NameId, Names};
use crate::records::Record;

/// Choices of the Callgrind writer (Valgrind's `--compress-strings`, `--compress-pos`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallgrindOptions {
    /// Define each name once per part with an id and refer to it by the id after.
    pub compress_strings: bool,
    /// Write positions relative to the previous cost line where that is shorter.
    pub compress_positions: bool,
}

impl Default for CallgrindOptions {
    /// Both compressions on, as Valgrind does by default.
    fn default() -> Self {
        CallgrindOptions {
            compress_strings: true,
            compress_positions: true,
        }
    }
}

/// Writes `profile` in the Callgrind format.
pub fn write_callgrind(
    profile: &Profile,
    options: CallgrindOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    if let Some(creator) = &profile.creator {
        writeln!(out, "creator: {creator}")?;
    }
    for part in &profile.parts {
        PartWriter::new(&profile.names, part, options, out).write()?;
    }
    Ok(())
}

/// The id spaces of name compression.
#[derive(Clone, Copy)]
enum Space {
    Object = 0,
    File = 1,
    Function = 2,
}

struct PartWriter<'a, W: Write> {
    names: &'a Names,
    part: &'a Part,
    options: CallgrindOptions,
    out: &'a mut W,
    ids: [FxHashMap<NameId, usize>; 3],
    base: Position,
}

impl<'a, W: Write> PartWriter<'a, W> {
    fn new(names: &'a Names, part: &'a Part, options: CallgrindOptions, out: &'a mut W) -> Self {
        PartWriter {
            names,
            part,
            options,
            out,
            ids: Default::default(),
            base: Position::default(),
        }
    }

    fn write(mut self) -> io::Result<()> {
        self.write_header()?;
        let empty = self.names.find("");
        let (mut object, mut fn_file) = (empty, empty);
        let events = self.part.events.len();
        for (function, records) in self.part.functions() {
            if object != Some(function.object) {
                self.name_line("ob=", Space::Object, function.object)?;
                object = Some(function.object);
            }
            if fn_file != Some(function.file) {
                self.name_line("fl=", Space::File, function.file)?;
                fn_file = Some(function.file);
            }
            self.name_line("fn=", Space::Function, function.name)?;
            let mut file = function.file;
            let mut cursor = records.cursor(events);
            while let Some(record) = cursor.next_record() {
                let (Record::Cost { file: at_file, .. }
                | Record::Call { file: at_file, .. }
                | Record::Jump { file: at_file, .. }) = record;
                if at_file != file {
                    let key = if at_file == function.file {
                        "fe="
                    } else {
                        "fi="
                    };
                    self.name_line(key, Space::File, at_file)?;
                    file = at_file;
                }
                match record {
                    Record::Cost { at, costs, .. } => self.cost_line(at, costs)?,
                    Record::Call {
                        at,
                        callee,
                        target,
                        count,
                        inclusive,
                        ..
                    } => {
                        if callee.object != function.object {
                            self.name_line("cob=", Space::Object, callee.object)?;
                        }
                        if callee.file != file {
                            self.name_line("cfi=", Space::File, callee.file)?;
                        }
                        self.name_line("cfn=", Space::Function, callee.name)?;
                        write!(self.out, "calls={count} ")?;
                        self.position(target, false)?;
                        writeln!(self.out)?;
                        self.cost_line(at, inclusive)?;
                    }
                    Record::Jump {
                        at,
                        target_file,
                        target_fn,
                        target,
                        executed,
                        followed,
                        ..
                    } => {
                        if target_file != file {
                            self.name_line("jfi=", Space::File, target_file)?;
                        }
                        if target_fn != function.name {
                            self.name_line("jfn=", Space::Function, target_fn)?;
                        }
                        match followed {
                            Some(followed) => write!(self.out, "jcnd={followed}/{executed} ")?,
                            None => write!(self.out, "jump={executed} ")?,
                        }
                        self.position(target, false)?;
                        writeln!(self.out)?;
                        self.cost_line(at, &[])?;
                    }
                }
            }
            // Back to the function's own file before the next fn=, as Valgrind does:
            // callgrind_annotate names the next function after the current file.
            if file != function.file {
                self.name_line("fe=", Space::File, function.file)?;
            }
            writeln!(self.out)?;
        }
        if let Some(totals) = &self.part.totals {
            write!(self.out, "totals:")?;
            write_costs(self.out, totals)?;
            writeln!(self.out)?;
        }
        writeln!(self.out)
    }

    fn write_header(&mut self) -> io::Result<()> {
        let header = &self.part.header;
        let PositionKinds { instr, line } = self.part.positions;
        let positions = match (instr, line) {
            (true, true) => "instr line",
            (true, false) => "instr",
            _ => "line",
        };
        // Readers start a new part at pid:, thread:, part: or positions:, so a part
        // must begin with one of them: the lines before would belong to the part
        // before. Valgrind's order (pid: first) does that; without pid: or thread:,
        // positions: comes first.
        let positions_first = header.pid.is_none() && header.thread.is_none();
        if positions_first {
            writeln!(self.out, "positions: {positions}")?;
        }
        if let Some(pid) = header.pid {
            writeln!(self.out, "pid: {pid}")?;
        }
        if let Some(thread) = header.thread {
            writeln!(self.out, "thread: {thread}")?;
        }
        if let Some(cmd) = header.cmd_line() {
            // Callgrind's form: a space before the command.
            writeln!(self.out, "cmd:  {cmd}")?;
        }
        if let Some(part) = header.part {
            writeln!(self.out, "part: {part}")?;
        }
        for (key, value) in &header.extra {
            writeln!(self.out, "{key}: {value}")?;
        }
        for desc in &header.desc {
            writeln!(self.out, "desc: {desc}")?;
        }
        // Valgrind writes the positions before the events' long names.
        if !positions_first {
            writeln!(self.out, "positions: {positions}")?;
        }
        for def in &self.part.events.defs {
            write!(self.out, "event: {}", def.name)?;
            if let Some(formula) = &def.formula {
                write!(self.out, " = {formula}")?;
            }
            if let Some(long_name) = &def.long_name {
                write!(self.out, " : {long_name}")?;
            }
            writeln!(self.out)?;
        }
        writeln!(self.out, "events: {}", self.part.events.names.join(" "))?;
        if let Some(summary) = &self.part.summary {
            write!(self.out, "summary:")?;
            write_costs(self.out, summary)?;
            writeln!(self.out)?;
        }
        writeln!(self.out)
    }

    fn name_line(&mut self, key: &str, space: Space, id: NameId) -> io::Result<()> {
        let name = self.names.get(id);
        // A literal name that looks like a compressed one must be compressed; one
        // that starts with a blank cannot be (readers skip blanks after "(N)").
        let looks_compressed =
            name.starts_with('(') && name[1..].starts_with(|c: char| c.is_ascii_digit());
        let blank_first = name.starts_with([' ', '\t']);
        if name.is_empty() || blank_first || (!self.options.compress_strings && !looks_compressed) {
            return writeln!(self.out, "{key}{name}");
        }
        let ids = &mut self.ids[space as usize];
        match ids.get(&id) {
            Some(number) => writeln!(self.out, "{key}({number})"),
            None => {
                let number = ids.len() + 1;
                ids.insert(id, number);
                writeln!(self.out, "{key}({number}) {name}")
            }
        }
    }

    fn cost_line(&mut self, at: Position, costs: &[u64]) -> io::Result<()> {
        self.position(at, true)?;
        let stored = costs.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        write_costs(self.out, &costs[..stored])?;
        writeln!(self.out)
    }

    /// Writes the subpositions of `at`; a cost line's position becomes the base of
    /// the next relative one, a call's or jump's target does not.
    fn position(&mut self, at: Position, moves_base: bool) -> io::Result<()> {
        let kinds = self.part.positions;
        let base = self.base;
        if kinds.instr {
            self.subposition(at.instr, base.instr, true)?;
        }
        if kinds.line {
            if kinds.instr {
                write!(self.out, " ")?;
            }
            self.subposition(at.line, base.line, false)?;
        }
        if moves_base {
            self.base = at;
        }
        Ok(())
    }

    fn subposition(&mut self, value: u64, base: u64, hex: bool) -> io::Result<()> {
        if self.options.compress_positions {
            const RELATIVE_LIMIT: u64 = 1 << 20;
            if value == base {
                return write!(self.out, "*");
            } else if value > base && value - base < RELATIVE_LIMIT {
                return write!(self.out, "+{}", value - base);
            } else if value < base && base - value < RELATIVE_LIMIT {
                return write!(self.out, "-{}", base - value);
            }
        }
        if hex {
            write!(self.out, "{value:#x}")
        } else {
            write!(self.out, "{value}")
        }
    }
}

fn write_costs(out: &mut impl Write, costs: &[u64]) -> io::Result<()> {
    for cost in costs {
        write!(out, " {cost}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::model::PartHeader;
    use crate::reader::read;

    fn reread(profile: &Profile, options: CallgrindOptions) -> Profile {
        let mut out = Vec::new();
        write_callgrind(profile, options, &mut out).unwrap();
        read(Cursor::new(out), "written").unwrap()
    }

    fn all_options() -> impl Iterator<Item = CallgrindOptions> {
        [(true, true), (true, false), (false, true), (false, false)]
            .into_iter()
            .map(|(compress_strings, compress_positions)| CallgrindOptions {
                compress_strings,
                compress_positions,
            })
    }

    #[test]
    fn a_part_without_pid_or_thread_keeps_its_header_lines() {
        // Found by fuzzing: cmd: and desc: of the second part were written before its
        // positions: line, so they were read back as lines of the first part.
        let text = "# callgrind format\nevents: Ir\nfn=a\n1 1\n\
                    events: Dr\ncmd: ./b\ndesc: second\nx-key: value\nevent: Dr : Data reads\n\
                    fn=b\n2 2\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        assert_eq!(profile.parts[1].header.cmd.as_deref(), Some("./b"));
        // Callgrind's form of the line: a space before the command.
        let mut out = Vec::new();
        write_callgrind(&profile, CallgrindOptions::default(), &mut out).unwrap();
        assert!(String::from_utf8_lossy(&out).contains("\ncmd:  ./b\n"));
        for options in all_options() {
            let again = reread(&profile, options);
            assert_eq!(again.parts[0].header, PartHeader::default());
            assert!(again == profile, "{options:?}");
        }
    }

    #[test]
    fn names_starting_with_blanks_keep_them() {
        // Found by fuzzing: "fn=(1)  main" is read as "main", so a name starting with
        // a blank must be written literally, compressed or not.
        let text =
            "# callgrind format\nevents: Ir\nfl= a.c\nfn=\t f\n1 1\ncfn=  \ncalls=1 2\n3 4\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        for options in all_options() {
            assert!(reread(&profile, options) == profile, "{options:?}");
        }
    }
}
