//! The reader of Cachegrind and Callgrind files.
//!
//! One line-driven parser reads both formats: Cachegrind's is the older, smaller one
//! and Callgrind's grew out of it. The parser decides which one it reads from the
//! header (`# callgrind format`, or any header line only Callgrind has, or else the
//! `cmd:` line every Cachegrind file has) at the first body line; the Cachegrind dialect has no name compression, no call graph,
//! allows `.` for zero counts and needs a `summary:` equal to the totals.
//!
//! The rules for positions follow KCachegrind's loader: relative subpositions
//! (`+N`, `-N`, `*`) are relative to the position of the previous cost line; the
//! target of `calls=`/`jump=`/`jcnd=` is relative to it too but does not move it.
//! Compressed names (`fn=(12) main`, then `fn=(12)`) have three id spaces (objects,
//! files, functions), all reset when a new part begins.

use std::io::Read;
use std::mem;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::Error;
use crate::input::LineReader;
use crate::model::{
    add_costs, EventDef, Events, FunctionId, Part, Position, PositionKinds, Profile,
};
use crate::names::NameId;
use crate::records::Record;

/// Reads the profile at `path` (plain or gzip-compressed).
pub fn read_path(path: &Path) -> Result<Profile, Error> {
    let name = path.display().to_string();
    let lines = LineReader::open(path).map_err(|error| Error::io(&name, error))?;
    Parser::new(name).run(lines)
}

/// Reads a profile from `input` (plain or gzip-compressed); `name` names it in errors.
pub fn read(input: impl Read + 'static, name: &str) -> Result<Profile, Error> {
    let lines = LineReader::new(input).map_err(|error| Error::io(name, error))?;
    Parser::new(name.to_string()).run(lines)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Undecided,
    Cachegrind,
    Callgrind,
}

/// The three id spaces of name compression.
#[derive(Clone, Copy)]
enum Space {
    Object = 0,
    File = 1,
    Function = 2,
}

impl Space {
    fn noun(self) -> &'static str {
        match self {
            Space::Object => "object",
            Space::File => "file",
            Space::Function => "function",
        }
    }
}

/// A `calls=`, `jump=` or `jcnd=` line waiting for the line with its source position.
enum Pending {
    Nothing,
    Call {
        line: u64,
        count: u64,
        callee: FunctionId,
        target: Option<Position>,
    },
    Jump {
        line: u64,
        executed: u64,
        followed: Option<u64>,
        target: Position,
    },
}

/// Where the body lines are: the current object, file, function and position.
struct Context {
    object: NameId,
    fn_file: NameId,
    file: NameId,
    function: Option<(FunctionId, usize)>,
    /// Cachegrind: a `fl=` line moved the current function to another file;
    /// it is selected there by the next cost line (not at once, which would
    /// add a function without costs, out of the file's order).
    refiled: bool,
    callee_object: Option<NameId>,
    callee_file: Option<NameId>,
    callee: Option<FunctionId>,
    jump_file: Option<NameId>,
    jump_fn: Option<NameId>,
    base: Position,
}

impl Context {
    fn new(empty: NameId) -> Context {
        Context {
            object: empty,
            fn_file: empty,
            file: empty,
            function: None,
            refiled: false,
            callee_object: None,
            callee_file: None,
            callee: None,
            jump_file: None,
            jump_fn: None,
            base: Position::default(),
        }
    }
}

type Failure = String;

struct Parser {
    path: String,
    line: u64,
    dialect: Dialect,
    profile: Profile,
    part: Part,
    part_has_events: bool,
    part_has_lines: bool,
    /// Whether the part has a `cmd:` line, even an empty one (`header.cmd` is None).
    part_has_cmd: bool,
    /// Whether the last line was `cmd:` or a line taken as its continuation.
    cmd_open: bool,
    /// Whether the line read now goes on with `cmd:` unless it is
    /// something else (see `Parser::line`).
    continuing: bool,
    part_totals: Vec<u64>,
    summary_line: u64,
    ids: [FxHashMap<u64, NameId>; 3],
    context: Context,
    pending: Pending,
    empty: NameId,
    costs: Vec<u64>,
}

impl Parser {
    fn new(path: String) -> Parser {
        let mut profile = Profile::default();
        // The first name of a fresh table always fits.
        let empty = profile.names.intern("").unwrap_or_else(|_| unreachable!());
        Parser {
            path,
            line: 0,
            dialect: Dialect::Undecided,
            profile,
            part: Part::default(),
            part_has_events: false,
            part_has_lines: false,
            part_has_cmd: false,
            cmd_open: false,
            continuing: false,
            part_totals: Vec::new(),
            summary_line: 0,
            ids: Default::default(),
            context: Context::new(empty),
            pending: Pending::Nothing,
            empty,
            costs: Vec::new(),
        }
    }

    fn run(mut self, mut lines: LineReader) -> Result<Profile, Error> {
        let mut line = Vec::with_capacity(256);
        loop {
            match lines.next_line(&mut line) {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => return Err(Error::io(self.path, error)),
            }
            self.line = lines.line_number();
            if let Err(message) = self.line(&line) {
                return Err(self.error(self.line, message));
            }
        }
        self.finish()
    }

    fn error(&self, line: u64, message: Failure) -> Error {
        Error::Syntax {
            path: self.path.clone(),
            line,
            message,
        }
    }

    fn finish(mut self) -> Result<Profile, Error> {
        self.end_part()
            .map_err(|(line, message)| self.error(line, message))?;
        if self.profile.parts.is_empty() {
            return Err(Error::Invalid {
                path: self.path,
                message: "not a profile: no events: line".into(),
            });
        }
        Ok(self.profile)
    }

    fn line(&mut self, line: &[u8]) -> Result<(), Failure> {
        // Carriage returns at the end are line-ending debris (CR CR LF, or a CR at
        // the end of the file): no name or value ends with one, which also lets the
        // writers write back every value read.
        let end = line.iter().rposition(|&b| b != b'\r').map_or(0, |i| i + 1);
        let line = &line[..end];
        // Cachegrind writes an argument's newlines as they are (Callgrind
        // escapes them): in a file not in the Callgrind format, a line right
        // after `cmd:` (or its continuation) and before `events:` that is
        // nothing else (or an unknown `key: value`) goes on with the
        // command, as `\n` and the line.
        self.continuing =
            self.cmd_open && !self.part_has_events && self.dialect != Dialect::Callgrind;
        self.cmd_open = false;
        let blank = trim_start(line).is_empty();
        match self.dispatch(line) {
            Err(_) if self.continuing => {
                self.continue_cmd(line);
                Ok(())
            }
            Ok(()) if self.continuing && blank => {
                self.continue_cmd(b"");
                Ok(())
            }
            result => result,
        }
    }

    /// `line` goes on with the command of `cmd:` after a newline.
    fn continue_cmd(&mut self, line: &[u8]) {
        let cmd = self.part.header.cmd.get_or_insert_with(String::new);
        cmd.push_str("\\n");
        cmd.push_str(&lossy(line));
        self.cmd_open = true;
    }

    /// Reads `line` (`Parser::line`'s rules apart).
    fn dispatch(&mut self, line: &[u8]) -> Result<(), Failure> {
        let line = trim_start(line);
        match line.first() {
            None => return Ok(()),
            Some(b'#') => {
                if self.line == 1 && line.starts_with(b"# callgrind format") {
                    self.dialect = Dialect::Callgrind;
                }
                return Ok(());
            }
            Some(b'0'..=b'9' | b'+' | b'-' | b'*') => return self.cost_line(line),
            Some(_) => {}
        }
        let equals = line.iter().position(|&b| b == b'=');
        let colon = line.iter().position(|&b| b == b':');
        match (equals, colon) {
            (Some(e), Some(c)) if c < e => self.header_line(&line[..c], &line[c + 1..]),
            (Some(e), _) => {
                if !matches!(self.pending, Pending::Nothing) {
                    return Err(self.pending_interrupted());
                }
                self.spec_line(&line[..e], &line[e + 1..])
            }
            (None, Some(c)) => self.header_line(&line[..c], &line[c + 1..]),
            (None, None) => Err(format!("unknown line '{}'", lossy(line))),
        }
    }

    fn pending_interrupted(&self) -> Failure {
        let line = match self.pending {
            Pending::Call { line, .. } | Pending::Jump { line, .. } => line,
            Pending::Nothing => self.line,
        };
        format!("the calls=/jump= line {line} must be followed by its position line")
    }

    fn decide_callgrind(&mut self, what: &str) -> Result<(), Failure> {
        match self.dialect {
            Dialect::Cachegrind => Err(format!("{what} is not part of the Cachegrind format")),
            _ => {
                self.dialect = Dialect::Callgrind;
                Ok(())
            }
        }
    }

    fn header_line(&mut self, key: &[u8], value: &[u8]) -> Result<(), Failure> {
        let value = trim_start(value);
        if !matches!(self.pending, Pending::Nothing) {
            return Err(self.pending_interrupted());
        }
        match key {
            b"version" => {
                self.decide_callgrind("version:")?;
                match parse_number(trim(value)) {
                    Some(1) => Ok(()),
                    _ => Err(format!(
                        "unsupported format version '{}' (cgx reads version 1)",
                        lossy(trim(value))
                    )),
                }
            }
            b"creator" => {
                self.decide_callgrind("creator:")?;
                self.profile.creator = Some(lossy(value));
                Ok(())
            }
            b"pid" | b"thread" | b"part" => {
                self.decide_callgrind(&format!("{}:", lossy(key)))?;
                self.maybe_new_part()?;
                let number = parse_number(trim(value)).ok_or_else(|| {
                    format!("{}: needs a number, not '{}'", lossy(key), lossy(value))
                })?;
                let header = &mut self.part.header;
                *match key {
                    b"pid" => &mut header.pid,
                    b"thread" => &mut header.thread,
                    _ => &mut header.part,
                } = Some(number);
                self.part_has_lines = true;
                Ok(())
            }
            b"cmd" => {
                self.part.header.cmd = (!value.is_empty()).then(|| lossy(value));
                self.part_has_cmd = true;
                self.cmd_open = true;
                self.part_has_lines = true;
                Ok(())
            }
            b"desc" => {
                self.part.header.desc.push(lossy(value));
                self.part_has_lines = true;
                Ok(())
            }
            b"positions" => {
                self.decide_callgrind("positions:")?;
                self.maybe_new_part()?;
                self.part.positions = parse_positions(value)?;
                self.part_has_lines = true;
                Ok(())
            }
            b"events" => {
                self.maybe_new_part()?;
                self.part.events.names = parse_event_names(value)?;
                self.part_totals = vec![0; self.part.events.len()];
                self.part_has_events = true;
                self.part_has_lines = true;
                Ok(())
            }
            b"event" => {
                self.decide_callgrind("event:")?;
                self.part.events.defs.push(parse_event_def(value)?);
                self.part_has_lines = true;
                Ok(())
            }
            b"summary" => {
                self.part.summary = Some(self.parse_totals("summary:", value)?);
                self.summary_line = self.line;
                Ok(())
            }
            b"totals" => {
                self.decide_callgrind("totals:")?;
                self.part.totals = Some(self.parse_totals("totals:", value)?);
                Ok(())
            }
            _ => {
                let graphic = key.iter().all(|b| b.is_ascii_graphic() || *b == b' ');
                if key.is_empty() || !graphic || self.continuing {
                    return Err(format!("unknown line '{}:{}'", lossy(key), lossy(value)));
                }
                self.part.header.extra.push((lossy(key), lossy(value)));
                self.part_has_lines = true;
                Ok(())
            }
        }
    }

    fn parse_totals(&mut self, what: &str, value: &[u8]) -> Result<Vec<u64>, Failure> {
        if !self.part_has_events {
            return Err(format!("{what} comes before the events: line"));
        }
        let mut fields = Fields(value);
        self.parse_costs(&mut fields)?;
        let mut totals = mem::take(&mut self.costs);
        totals.resize(self.part.events.len(), 0);
        Ok(totals)
    }

    /// Starts a new part if the current one is complete (has its events), as
    /// KCachegrind does on `part:`, `pid:`, `thread:`, `positions:` and `events:`.
    fn maybe_new_part(&mut self) -> Result<(), Failure> {
        if self.part_has_events {
            self.end_part().map_err(|(_, message)| message)?;
        }
        Ok(())
    }

    fn end_part(&mut self) -> Result<(), (u64, Failure)> {
        if let Pending::Call { line, .. } | Pending::Jump { line, .. } = self.pending {
            return Err((
                line,
                "a calls=/jump= line at the end of a part has no position line".into(),
            ));
        }
        if !self.part_has_events {
            if self.part_has_lines {
                return Err((self.line, "the part has no events: line".into()));
            }
            return Ok(());
        }
        if self.dialect == Dialect::Cachegrind {
            match &self.part.summary {
                None => return Err((self.line, "missing summary: line".into())),
                Some(summary) if *summary != self.part_totals => {
                    return Err((
                        self.summary_line,
                        format!(
                            "summary: {} does not equal the totals of the cost lines, {}",
                            join(summary),
                            join(&self.part_totals)
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        let positions = self.part.positions;
        let finished = mem::replace(&mut self.part, Part::new(Events::default(), positions));
        self.profile.parts.push(finished);
        self.part_has_events = false;
        self.part_has_lines = false;
        self.part_has_cmd = false;
        self.ids = Default::default();
        self.context = Context::new(self.empty);
        Ok(())
    }

    fn spec_line(&mut self, key: &[u8], value: &[u8]) -> Result<(), Failure> {
        if !self.part_has_events {
            return Err(format!("{}= comes before the events: line", lossy(key)));
        }
        if self.dialect == Dialect::Undecided {
            self.dialect = self.dialect_of_headerless_file(key);
        }
        let cachegrind = self.dialect == Dialect::Cachegrind;
        match key {
            b"fl" | b"fi" | b"fe" if cachegrind => {
                let file = self.name(Space::File, value)?;
                self.context.fn_file = file;
                self.context.file = file;
                self.context.refiled = self.context.function.is_some();
            }
            b"fl" => {
                let file = self.name(Space::File, value)?;
                self.context.fn_file = file;
                self.context.file = file;
            }
            b"fi" | b"fe" => self.context.file = self.name(Space::File, value)?,
            b"fn" => {
                let name = self.name(Space::Function, value)?;
                self.context.file = self.context.fn_file;
                self.context.refiled = false;
                self.select_function(self.context.fn_file, name);
            }
            _ if cachegrind => {
                return Err(format!(
                    "{}= is not part of the Cachegrind format",
                    lossy(key)
                ))
            }
            b"ob" => {
                self.context.object = self.name(Space::Object, value)?;
                self.context.function = None;
            }
            b"cob" => self.context.callee_object = Some(self.name(Space::Object, value)?),
            b"cfl" | b"cfi" => self.context.callee_file = Some(self.name(Space::File, value)?),
            b"cfn" => {
                let name = self.name(Space::Function, value)?;
                self.context.callee = Some(FunctionId {
                    object: self.context.callee_object.unwrap_or(self.context.object),
                    file: self.context.callee_file.unwrap_or(self.context.file),
                    name,
                });
            }
            b"jfi" => self.context.jump_file = Some(self.name(Space::File, value)?),
            b"jfn" => self.context.jump_fn = Some(self.name(Space::Function, value)?),
            b"calls" => {
                let callee = self
                    .context
                    .callee
                    .ok_or("calls= without a cfn= line before it")?;
                let mut fields = Fields(value);
                let count = fields
                    .next()
                    .and_then(parse_number)
                    .ok_or("calls= needs a call count")?;
                let target = match fields.peek() {
                    Some(_) => Some(self.parse_position(&mut fields)?),
                    None => None,
                };
                // More fields, as Xdebug writes them (`calls=1 0 0`), are
                // ignored, as KCachegrind ignores them.
                self.pending = Pending::Call {
                    line: self.line,
                    count,
                    callee,
                    target,
                };
            }
            b"jump" | b"jcnd" => {
                let mut fields = Fields(value);
                let counts = fields.next().ok_or("jump=/jcnd= needs a count")?;
                let (executed, followed) = if key == b"jump" {
                    (parse_number(counts), None)
                } else {
                    match counts.iter().position(|&b| b == b'/') {
                        Some(slash) => (
                            parse_number(&counts[slash + 1..]),
                            Some(
                                parse_number(&counts[..slash])
                                    .ok_or("jcnd= needs followed/executed counts")?,
                            ),
                        ),
                        None => return Err("jcnd= needs followed/executed counts".into()),
                    }
                };
                let executed = executed.ok_or("jump=/jcnd= needs a number of executions")?;
                if fields.peek().is_none() {
                    return Err("jump=/jcnd= needs a target position".into());
                }
                let target = self.parse_position(&mut fields)?;
                self.expect_end(&mut fields, "jump=/jcnd=")?;
                self.pending = Pending::Jump {
                    line: self.line,
                    executed,
                    followed,
                    target,
                };
            }
            _ => return Err(format!("unknown line '{}={}'", lossy(key), lossy(value))),
        }
        Ok(())
    }

    /// Decides the dialect at the first body line of a file whose header did not:
    /// Cachegrind files always have a `cmd:` line (both grammars require it), files
    /// without one are taken as Callgrind, the larger format (as callgrind_annotate
    /// and KCachegrind read them), and so are files whose body starts with a line
    /// only Callgrind has.
    fn dialect_of_headerless_file(&self, first_key: &[u8]) -> Dialect {
        let cachegrind_key = matches!(first_key, b"" | b"fl" | b"fi" | b"fe" | b"fn");
        if cachegrind_key && self.part_has_cmd {
            Dialect::Cachegrind
        } else {
            Dialect::Callgrind
        }
    }

    fn select_function(&mut self, file: NameId, name: NameId) {
        let function = FunctionId {
            object: self.context.object,
            file,
            name,
        };
        let index = self.part.function_index(function);
        self.context.function = Some((function, index));
    }

    fn name(&mut self, space: Space, value: &[u8]) -> Result<NameId, Failure> {
        let compressed = self.dialect == Dialect::Callgrind
            && value.len() >= 2
            && value[0] == b'('
            && value[1].is_ascii_digit();
        if !compressed {
            return self.intern(value);
        }
        let close = value
            .iter()
            .position(|&b| b == b')')
            .ok_or_else(|| format!("bad compressed {} name '{}'", space.noun(), lossy(value)))?;
        let id = std::str::from_utf8(&value[1..close])
            .ok()
            .and_then(|digits| digits.parse::<u64>().ok())
            .ok_or_else(|| format!("bad compressed {} id in '{}'", space.noun(), lossy(value)))?;
        let rest = trim_start(&value[close + 1..]);
        if rest.is_empty() {
            return self.ids[space as usize].get(&id).copied().ok_or_else(|| {
                format!(
                    "compressed {} id ({id}) is used before it is defined",
                    space.noun()
                )
            });
        }
        let name = self.intern(rest)?;
        match self.ids[space as usize].insert(id, name) {
            Some(old) if old != name => Err(format!(
                "compressed {} id ({id}) is redefined from '{}' to '{}'",
                space.noun(),
                self.profile.names.get(old),
                self.profile.names.get(name)
            )),
            _ => Ok(name),
        }
    }

    fn intern(&mut self, name: &[u8]) -> Result<NameId, Failure> {
        let name = String::from_utf8_lossy(name);
        self.profile
            .names
            .intern(&name)
            .map_err(|error| error.to_string())
    }

    fn cost_line(&mut self, line: &[u8]) -> Result<(), Failure> {
        if !self.part_has_events {
            return Err("cost line before the events: line".into());
        }
        if self.dialect == Dialect::Undecided {
            self.dialect = self.dialect_of_headerless_file(b"");
        }
        if self.context.refiled {
            self.context.refiled = false;
            if let Some((function, _)) = self.context.function {
                self.select_function(self.context.fn_file, function.name);
            }
        }
        let (function, index) = self
            .context
            .function
            .ok_or("cost line before any fn= line")?;
        let mut fields = Fields(line);
        let at = self.parse_position(&mut fields)?;
        self.parse_costs(&mut fields)?;
        let file = self.context.file;
        let record = match mem::replace(&mut self.pending, Pending::Nothing) {
            Pending::Nothing => {
                add_costs(&mut self.part_totals, &self.costs);
                Record::Cost {
                    file,
                    at,
                    costs: &self.costs,
                }
            }
            Pending::Call {
                count,
                callee,
                target,
                ..
            } => {
                self.context.callee_object = None;
                self.context.callee_file = None;
                Record::Call {
                    file,
                    at,
                    callee,
                    target: target.unwrap_or(at),
                    count,
                    inclusive: &self.costs,
                }
            }
            Pending::Jump {
                executed,
                followed,
                target,
                ..
            } => {
                if !self.costs.is_empty() {
                    return Err("the position line of a jump has no costs".into());
                }
                let target_file = self.context.jump_file.take().unwrap_or(file);
                let target_fn = self.context.jump_fn.take().unwrap_or(function.name);
                Record::Jump {
                    file,
                    at,
                    target_file,
                    target_fn,
                    target,
                    executed,
                    followed,
                }
            }
        };
        self.part.push_at(index, &record);
        self.part_has_lines = true;
        self.context.base = at;
        Ok(())
    }

    /// Parses the subpositions the part's `positions:` names, relative to the base.
    fn parse_position(&self, fields: &mut Fields<'_>) -> Result<Position, Failure> {
        let base = self.context.base;
        let kinds = self.part.positions;
        let mut position = Position::default();
        if kinds.instr {
            position.instr = parse_subposition(fields.next(), base.instr, "instruction address")?;
        }
        if kinds.line {
            position.line = parse_subposition(fields.next(), base.line, "line number")?;
        }
        Ok(position)
    }

    fn parse_costs(&mut self, fields: &mut Fields<'_>) -> Result<(), Failure> {
        self.costs.clear();
        let dots = self.dialect != Dialect::Callgrind;
        for field in fields {
            let cost = if dots && field == b"." {
                0
            } else {
                parse_number(field).ok_or_else(|| format!("bad count '{}'", lossy(field)))?
            };
            self.costs.push(cost);
        }
        let events = self.part.events.len();
        if self.costs.len() > events {
            return Err(format!(
                "{} counts for {} event{}",
                self.costs.len(),
                events,
                if events == 1 { "" } else { "s" }
            ));
        }
        Ok(())
    }

    fn expect_end(&self, fields: &mut Fields<'_>, what: &str) -> Result<(), Failure> {
        match fields.next() {
            None => Ok(()),
            Some(extra) => Err(format!("unexpected '{}' after {what}", lossy(extra))),
        }
    }
}

fn parse_subposition(field: Option<&[u8]>, base: u64, what: &str) -> Result<u64, Failure> {
    let field = field.ok_or_else(|| format!("missing {what}"))?;
    let bad = || format!("bad {what} '{}'", lossy(field));
    match field {
        b"*" => Ok(base),
        [b'+', digits @ ..] => parse_number(digits)
            .and_then(|delta| base.checked_add(delta))
            .ok_or_else(bad),
        [b'-', digits @ ..] => parse_number(digits)
            .and_then(|delta| base.checked_sub(delta))
            .ok_or_else(bad),
        _ => parse_number(field).ok_or_else(bad),
    }
}

fn parse_positions(value: &[u8]) -> Result<PositionKinds, Failure> {
    let mut kinds = PositionKinds {
        instr: false,
        line: false,
    };
    for field in Fields(value) {
        match field {
            b"instr" | b"addr" => kinds.instr = true,
            b"line" => kinds.line = true,
            other => return Err(format!("unknown position kind '{}'", lossy(other))),
        }
    }
    if !kinds.instr && !kinds.line {
        return Err("positions: names no position kind".into());
    }
    Ok(kinds)
}

fn parse_event_names(value: &[u8]) -> Result<Vec<String>, Failure> {
    let mut names: Vec<String> = Vec::new();
    for field in Fields(value) {
        let name = lossy(field);
        if names.contains(&name) {
            return Err(format!("event {name} is listed twice"));
        }
        names.push(name);
    }
    if names.is_empty() {
        return Err("events: names no event".into());
    }
    Ok(names)
}

/// `event: Name [= formula] [: long name]`
fn parse_event_def(value: &[u8]) -> Result<EventDef, Failure> {
    let value = trim(value);
    let name_end = value
        .iter()
        .position(|&b| b == b'=' || b == b':' || b == b' ' || b == b'\t')
        .unwrap_or(value.len());
    let name = &value[..name_end];
    if name.is_empty() {
        return Err("event: needs an event name".into());
    }
    let mut rest = trim_start(&value[name_end..]);
    let mut def = EventDef {
        name: lossy(name),
        ..EventDef::default()
    };
    if let [b'=', formula @ ..] = rest {
        let end = formula
            .iter()
            .position(|&b| b == b':')
            .unwrap_or(formula.len());
        def.formula = Some(lossy(trim(&formula[..end])));
        rest = &formula[end..];
    }
    match rest {
        [] => {}
        [b':', long @ ..] => def.long_name = Some(lossy(trim(long))),
        _ => return Err(format!("bad event: line after '{}'", def.name)),
    }
    Ok(def)
}

/// A decimal number, or a hexadecimal one starting with `0x`.
fn parse_number(text: &[u8]) -> Option<u64> {
    let (digits, radix) = match text {
        [b'0', b'x' | b'X', hex @ ..] => (hex, 16),
        _ => (text, 10),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &byte in digits {
        let digit = (byte as char).to_digit(radix)?;
        value = value.checked_mul(radix as u64)?.checked_add(digit as u64)?;
    }
    Some(value)
}

/// Whitespace-separated fields of a line.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn peek(&self) -> Option<&'a [u8]> {
        let rest = trim_start(self.0);
        (!rest.is_empty()).then_some(rest)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = trim_start(self.0);
        if rest.is_empty() {
            self.0 = rest;
            return None;
        }
        let end = rest.iter().position(|&b| is_space(b)).unwrap_or(rest.len());
        self.0 = &rest[end..];
        Some(&rest[..end])
    }
}

fn is_space(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(bytes.len());
    &bytes[start..]
}

fn trim(bytes: &[u8]) -> &[u8] {
    let bytes = trim_start(bytes);
    let end = bytes
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(0, |i| i + 1);
    &bytes[..end]
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn join(costs: &[u64]) -> String {
    costs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn a_cachegrind_command_with_newlines_goes_on_to_the_events_line() {
        // Cachegrind writes an argument's newlines as they are; lines of any
        // form up to `events:` are the command's.
        let text = "desc: I1 cache: 32768 B\ncmd: python3 -c n = 0\n\nfor i in x:\n  f(i)\n\
                    events: Ir\nfl=a.c\nfn=f\n1 5\nsummary: 5\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let header = &profile.parts[0].header;
        assert_eq!(
            header.cmd.as_deref(),
            Some("python3 -c n = 0\\n\\nfor i in x:\\n  f(i)")
        );
        assert!(header.extra.is_empty(), "{:?}", header.extra);
        assert_eq!(profile.parts[0].events.names, ["Ir"]);
    }

    #[test]
    fn a_callgrind_header_line_after_cmd_is_its_own() {
        let text = "# callgrind format\ncmd:  ./b\nx-key: value\nevents: Ir\nfn=b\n2 2\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let header = &profile.parts[0].header;
        assert_eq!(header.cmd.as_deref(), Some("./b"));
        assert_eq!(header.extra, [("x-key".to_string(), "value".to_string())]);
        // And an unknown line there is an error, as anywhere.
        let text = "# callgrind format\ncmd: ./b\nprint(1)\nevents: Ir\n";
        assert!(read(Cursor::new(text.as_bytes().to_vec()), "test").is_err());
    }

    #[test]
    fn carriage_returns_at_the_end_of_a_line_are_dropped() {
        // Found by fuzzing: "fn=a\r\r\n" was read as the name "a\r" and a last line
        // "cmd: x\r" as "x\r", which no writer can write back.
        let text = "# callgrind format\ncmd: x\r\r\nevents: Ir\r\nfn=a\r\r\n1 1\r\ndesc: d\r";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let part = &profile.parts[0];
        assert_eq!(part.header.cmd.as_deref(), Some("x"));
        assert_eq!(part.header.desc, ["d"]);
        assert_eq!(part.events.names, ["Ir"]);
        let names: Vec<_> = part
            .functions()
            .map(|(f, _)| profile.names.get(f.name))
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn a_cachegrind_file_line_before_another_function_adds_no_function() {
        // Found by a round trip of a converted profile: `fl=` moved the current
        // function to the new file at once, so `(below main)` at `???` was
        // added before `f`, out of the file's order.
        let text = "cmd: x\nevents: Ir\nfl=a.h\nfn=(below main)\n29 7\nfl=???\nfn=f\n0 1\n\
                    fl=???\nfn=(below main)\n0 11\nfl=b.h\n3 1\nsummary: 20\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let functions: Vec<_> = profile.parts[0]
            .functions()
            .map(|(f, _)| (profile.names.get(f.file), profile.names.get(f.name)))
            .collect();
        assert_eq!(
            functions,
            [
                ("a.h", "(below main)"),
                ("???", "f"),
                ("???", "(below main)"),
                ("b.h", "(below main)")
            ]
        );
    }

    #[test]
    fn fields_after_a_call_target_are_ignored_as_kcachegrind_ignores_them() {
        // Xdebug writes `calls=COUNT 0 0` and its summary after the body.
        let text = "version: 1\ncreator: xdebug 3.2.0\ncmd: /w.php\npart: 1\npositions: line\n\n\
                    events: Time_(10ns) Memory_(bytes)\n\nfl=(1) /w.php\nfn=(1) f\n2 5 0\n\n\
                    fl=(1)\nfn=(2) {main}\n1 3 0\ncfl=(1)\ncfn=(1)\ncalls=1 0 0\n4 5 0\n\n\
                    summary: 8 0\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let part = &profile.parts[0];
        assert_eq!(part.summary.as_deref(), Some(&[8, 0][..]));
        let mut calls = Vec::new();
        for (_, records) in part.functions() {
            records.for_each(2, |record| {
                if let Record::Call {
                    count,
                    target,
                    inclusive,
                    ..
                } = record
                {
                    calls.push((count, target.line, inclusive.to_vec()));
                }
            });
        }
        assert_eq!(calls, [(1, 0, vec![5, 0])]);
    }

    #[test]
    fn an_empty_cmd_line_makes_a_cachegrind_file() {
        // Found by fuzzing: the Cachegrind writer writes "cmd: " for a profile without
        // a command; the file was then read as Callgrind, and "fn=(1) x" as "x".
        let text = "cmd: \nevents: Ir\nfl=a\nfn=(1) x\n1 1\nsummary: 1\n";
        let profile = read(Cursor::new(text.as_bytes().to_vec()), "test").unwrap();
        let part = &profile.parts[0];
        assert_eq!(part.header.cmd, None);
        let names: Vec<_> = part
            .functions()
            .map(|(f, _)| profile.names.get(f.name))
            .collect();
        assert_eq!(names, ["(1) x"]);
    }
}
