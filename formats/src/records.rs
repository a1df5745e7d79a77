//! The cost records of one function, stored compactly.
//!
//! A profile of a large program holds tens of millions of cost lines, so records are
//! kept as a byte stream of LEB128 varints rather than as structs: positions are
//! stored as differences to the previous record, the file only when it changes and
//! costs without their trailing zeros. A record of a typical `+3 * 1` line takes five
//! bytes, less than its text.

use crate::model::{FunctionId, Position};
use crate::names::NameId;

/// One record of a function, as the Callgrind format expresses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// Self cost at a position (a cost line).
    Cost {
        /// The source file of the position (the function's file, or an inlined one).
        file: NameId,
        /// Where the cost was spent.
        at: Position,
        /// One count per event; missing trailing events are zero.
        costs: &'a [u64],
    },
    /// A call arc (`calls=` and the line after it).
    Call {
        /// The source file of the call site.
        file: NameId,
        /// The call site.
        at: Position,
        /// The called function.
        callee: FunctionId,
        /// The position called (usually the callee's first instruction or line).
        target: Position,
        /// How many calls were made.
        count: u64,
        /// The inclusive cost of these calls, one count per event.
        inclusive: &'a [u64],
    },
    /// A jump (`jump=` or `jcnd=` and the line after it).
    Jump {
        /// The source file of the jump instruction.
        file: NameId,
        /// The jump instruction.
        at: Position,
        /// The source file of the target.
        target_file: NameId,
        /// The function the target belongs to (same object as the jump).
        target_fn: NameId,
        /// The jump target.
        target: Position,
        /// How often the jump instruction was executed.
        executed: u64,
        /// For conditional jumps: how often the jump was taken.
        followed: Option<u64>,
    },
}

const KIND_COST: u8 = 0;
const KIND_CALL: u8 = 1;
const KIND_JUMP: u8 = 2;
const KIND_COND_JUMP: u8 = 3;
const KIND_MASK: u8 = 3;
const FILE_CHANGED: u8 = 4;

/// The records of one function in the order they were added.
#[derive(Clone, Debug, Default)]
pub struct Records {
    bytes: Vec<u8>,
    count: usize,
    last_file: Option<NameId>,
    last_at: Position,
}

impl Records {
    /// Appends a record.
    pub fn push(&mut self, record: &Record<'_>) {
        let (kind, file, at) = match *record {
            Record::Cost { file, at, .. } => (KIND_COST, file, at),
            Record::Call { file, at, .. } => (KIND_CALL, file, at),
            Record::Jump {
                file, at, followed, ..
            } => (
                if followed.is_some() {
                    KIND_COND_JUMP
                } else {
                    KIND_JUMP
                },
                file,
                at,
            ),
        };
        let file_changed = self.last_file != Some(file);
        self.bytes
            .push(kind | if file_changed { FILE_CHANGED } else { 0 });
        if file_changed {
            put_varint(&mut self.bytes, file.index() as u64);
        }
        put_position_delta(&mut self.bytes, self.last_at, at);
        match *record {
            Record::Cost { costs, .. } => put_costs(&mut self.bytes, costs),
            Record::Call {
                callee,
                target,
                count,
                inclusive,
                ..
            } => {
                put_varint(&mut self.bytes, callee.object.index() as u64);
                put_varint(&mut self.bytes, callee.file.index() as u64);
                put_varint(&mut self.bytes, callee.name.index() as u64);
                put_position_delta(&mut self.bytes, at, target);
                put_varint(&mut self.bytes, count);
                put_costs(&mut self.bytes, inclusive);
            }
            Record::Jump {
                target_file,
                target_fn,
                target,
                executed,
                followed,
                ..
            } => {
                put_varint(&mut self.bytes, target_file.index() as u64);
                put_varint(&mut self.bytes, target_fn.index() as u64);
                put_position_delta(&mut self.bytes, at, target);
                put_varint(&mut self.bytes, executed);
                if let Some(followed) = followed {
                    put_varint(&mut self.bytes, followed);
                }
            }
        }
        self.last_file = Some(file);
        self.last_at = at;
        self.count += 1;
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// How many bytes the encoded records take.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// Reads the records back in order. Cost slices are padded with zeros to at
    /// least `events` entries.
    pub fn cursor(&self, events: usize) -> Cursor<'_> {
        Cursor {
            bytes: &self.bytes,
            events,
            file: None,
            at: Position::default(),
            costs: Vec::new(),
        }
    }

    /// Calls `f` for every record.
    pub fn for_each(&self, events: usize, mut f: impl FnMut(Record<'_>)) {
        let mut cursor = self.cursor(events);
        while let Some(record) = cursor.next_record() {
            f(record);
        }
    }
}

/// Reads [`Records`] back one at a time (a lending iterator: each record borrows
/// the cursor's cost buffer).
pub struct Cursor<'a> {
    bytes: &'a [u8],
    events: usize,
    file: Option<NameId>,
    at: Position,
    costs: Vec<u64>,
}

impl Cursor<'_> {
    /// The next record, or `None` at the end.
    pub fn next_record(&mut self) -> Option<Record<'_>> {
        let (&tag, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        if tag & FILE_CHANGED != 0 || self.file.is_none() {
            self.file = Some(self.name());
        }
        let file = self.file?;
        let at = self.position_from(self.at);
        self.at = at;
        Some(match tag & KIND_MASK {
            KIND_COST => {
                self.read_costs();
                Record::Cost {
                    file,
                    at,
                    costs: &self.costs,
                }
            }
            KIND_CALL => {
                let callee = FunctionId {
                    object: self.name(),
                    file: self.name(),
                    name: self.name(),
                };
                let target = self.position_from(at);
                let count = self.varint();
                self.read_costs();
                Record::Call {
                    file,
                    at,
                    callee,
                    target,
                    count,
                    inclusive: &self.costs,
                }
            }
            kind => {
                let target_file = self.name();
                let target_fn = self.name();
                let target = self.position_from(at);
                let executed = self.varint();
                let followed = (kind == KIND_COND_JUMP).then(|| self.varint());
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
        })
    }

    fn varint(&mut self) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        while let Some((&byte, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        value
    }

    fn name(&mut self) -> NameId {
        // Names were stored from valid ids, so the value fits.
        NameId::from_index(self.varint() as usize)
    }

    fn position_from(&mut self, base: Position) -> Position {
        let instr = base.instr.wrapping_add(unzigzag(self.varint()));
        let line = base.line.wrapping_add(unzigzag(self.varint()));
        Position { instr, line }
    }

    fn read_costs(&mut self) {
        let stored = self.varint() as usize;
        self.costs.clear();
        for _ in 0..stored {
            let cost = self.varint();
            self.costs.push(cost);
        }
        if self.costs.len() < self.events {
            self.costs.resize(self.events, 0);
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn zigzag(delta: u64) -> u64 {
    let signed = delta as i64;
    ((signed << 1) ^ (signed >> 63)) as u64
}

fn unzigzag(value: u64) -> u64 {
    ((value >> 1) as i64 ^ -((value & 1) as i64)) as u64
}

fn put_position_delta(out: &mut Vec<u8>, from: Position, to: Position) {
    put_varint(out, zigzag(to.instr.wrapping_sub(from.instr)));
    put_varint(out, zigzag(to.line.wrapping_sub(from.line)));
}

fn put_costs(out: &mut Vec<u8>, costs: &[u64]) {
    let stored = costs.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    put_varint(out, stored as u64);
    for &cost in &costs[..stored] {
        put_varint(out, cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Names;

    #[test]
    fn records_come_back_as_pushed() {
        let mut names = Names::default();
        let a = names.intern("a.c").unwrap();
        let b = names.intern("b.h").unwrap();
        let f = names.intern("f").unwrap();
        let callee = FunctionId {
            object: names.intern("lib.so").unwrap(),
            file: b,
            name: f,
        };
        let pushed = [
            Record::Cost {
                file: a,
                at: Position {
                    instr: 0x401000,
                    line: 10,
                },
                costs: &[3, 0, 7],
            },
            Record::Cost {
                file: b,
                at: Position {
                    instr: 0x400ff0,
                    line: 2,
                },
                costs: &[u64::MAX, 0, 0],
            },
            Record::Call {
                file: b,
                at: Position {
                    instr: 0x400ff4,
                    line: 2,
                },
                callee,
                target: Position {
                    instr: 0x1000,
                    line: 1,
                },
                count: 5,
                inclusive: &[100, 1, 0],
            },
            Record::Jump {
                file: a,
                at: Position {
                    instr: 0x401004,
                    line: 11,
                },
                target_file: a,
                target_fn: f,
                target: Position {
                    instr: 0x401000,
                    line: 10,
                },
                executed: 9,
                followed: Some(4),
            },
            Record::Jump {
                file: a,
                at: Position {
                    instr: u64::MAX,
                    line: 0,
                },
                target_file: b,
                target_fn: f,
                target: Position {
                    instr: 0,
                    line: u64::MAX,
                },
                executed: 1,
                followed: None,
            },
        ];
        let mut records = Records::default();
        for record in &pushed {
            records.push(record);
        }
        assert_eq!(records.len(), pushed.len());
        let mut read = Vec::new();
        records.for_each(3, |record| read.push(format!("{record:?}")));
        let expected: Vec<String> = pushed.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn a_short_cost_line_takes_few_bytes() {
        let mut names = Names::default();
        let file = names.intern("a.c").unwrap();
        let mut records = Records::default();
        for i in 0..100u64 {
            records.push(&Record::Cost {
                file,
                at: Position {
                    instr: 0x1000 + 3 * i,
                    line: 7,
                },
                costs: &[1],
            });
        }
        // Tag, two position deltas, cost count and one cost: five bytes a record.
        assert!(records.encoded_len() <= 5 * 100 + 2);
    }
}
