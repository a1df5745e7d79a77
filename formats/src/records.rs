//! The cost records of a part, stored compactly.
//!
//! A profile of a large program holds tens of millions of cost lines, so records are
//! kept as a byte stream of LEB128 varints rather than as structs: positions are
//! stored as differences to the previous record, the file only when it changes,
//! costs without their trailing zeros and their number in the tag byte. A record of
//! a typical `+3 * 1` line takes four bytes, less than its text.
//!
//! All records of a part go into one [`RecordStore`], in the order they are added;
//! a function's [`Records`] are the chunks of the store that hold its records (one
//! chunk per run of consecutive records of the function). One growing buffer
//! instead of one per function keeps memory close to the encoded size: a large
//! buffer grows in place, without copies or unused capacity that takes memory.

use std::ops::Range;

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
/// The tag's top five bits hold the number of stored costs plus one, or zero when
/// the number does not fit and follows as a varint.
const COUNT_SHIFT: u32 = 3;
const MAX_INLINE_COUNT: usize = 30;

/// The records of all functions of a part, in one byte stream.
#[derive(Clone, Debug, Default)]
pub struct RecordStore {
    bytes: Vec<u8>,
    open: Option<OpenChunk>,
}

/// The chunk at the end of the store, which the next record of its function extends.
#[derive(Clone, Debug)]
struct OpenChunk {
    function: usize,
    last_file: NameId,
    last_at: Position,
}

/// Where the records of one function are in its part's [`RecordStore`].
#[derive(Clone, Debug, Default)]
pub struct Records {
    chunks: Vec<Range<usize>>,
    count: usize,
}

impl Records {
    /// How many records there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl RecordStore {
    /// Appends `record` to the records of the function numbered `function`, whose
    /// chunks are `records`. Each function must have one number and one `records`.
    pub fn push(&mut self, function: usize, records: &mut Records, record: &Record<'_>) {
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
        let start = self.bytes.len();
        let open = match &mut self.open {
            Some(open) if open.function == function && !records.chunks.is_empty() => open,
            _ => {
                records.chunks.push(start..start);
                self.open.insert(OpenChunk {
                    function,
                    last_file: file,
                    last_at: Position::default(),
                })
            }
        };
        let (last_file, last_at) = (open.last_file, open.last_at);
        open.last_file = file;
        open.last_at = at;
        let chunk_starts = records.chunks.last().is_some_and(|chunk| chunk.is_empty());
        let file_changed = chunk_starts || last_file != file;
        let costs = match *record {
            Record::Cost { costs, .. }
            | Record::Call {
                inclusive: costs, ..
            } => costs,
            Record::Jump { .. } => &[],
        };
        let stored = costs.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        let inline_count = if stored <= MAX_INLINE_COUNT {
            (stored as u8 + 1) << COUNT_SHIFT
        } else {
            0
        };
        let out = &mut self.bytes;
        out.push(kind | inline_count | if file_changed { FILE_CHANGED } else { 0 });
        if file_changed {
            put_varint(out, file.index() as u64);
        }
        put_position_delta(out, last_at, at);
        if let Record::Call {
            callee,
            target,
            count,
            ..
        } = *record
        {
            put_varint(out, callee.object.index() as u64);
            put_varint(out, callee.file.index() as u64);
            put_varint(out, callee.name.index() as u64);
            put_position_delta(out, at, target);
            put_varint(out, count);
        }
        if let Record::Jump {
            target_file,
            target_fn,
            target,
            executed,
            followed,
            ..
        } = *record
        {
            put_varint(out, target_file.index() as u64);
            put_varint(out, target_fn.index() as u64);
            put_position_delta(out, at, target);
            put_varint(out, executed);
            if let Some(followed) = followed {
                put_varint(out, followed);
            }
        }
        if kind == KIND_COST || kind == KIND_CALL {
            if inline_count == 0 {
                put_varint(out, stored as u64);
            }
            for &cost in &costs[..stored] {
                put_varint(out, cost);
            }
        }
        if let Some(chunk) = records.chunks.last_mut() {
            chunk.end = self.bytes.len();
        }
        records.count += 1;
    }

    /// How many bytes the encoded records take.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// Reads the records of one function back in order. Cost slices are padded with
    /// zeros to at least `events` entries.
    pub fn cursor<'a>(&'a self, records: &'a Records, events: usize) -> Cursor<'a> {
        Cursor {
            store: &self.bytes,
            chunks: records.chunks.iter(),
            bytes: &[],
            events,
            file: None,
            at: Position::default(),
            costs: Vec::new(),
        }
    }
}

/// Reads the records of a function back one at a time (a lending iterator: each
/// record borrows the cursor's cost buffer).
pub struct Cursor<'a> {
    store: &'a [u8],
    chunks: std::slice::Iter<'a, Range<usize>>,
    bytes: &'a [u8],
    events: usize,
    file: Option<NameId>,
    at: Position,
    costs: Vec<u64>,
}

impl Cursor<'_> {
    /// The next record, or `None` at the end.
    pub fn next_record(&mut self) -> Option<Record<'_>> {
        while self.bytes.is_empty() {
            self.bytes = self.store.get(self.chunks.next()?.clone())?;
            self.at = Position::default();
        }
        let (&tag, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        if tag & FILE_CHANGED != 0 {
            self.file = Some(self.name());
        }
        let file = self.file?;
        let at = self.position_from(self.at);
        self.at = at;
        Some(match tag & KIND_MASK {
            KIND_COST => {
                self.read_costs(tag);
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
                self.read_costs(tag);
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

    /// Calls `f` for every remaining record.
    pub fn for_each(mut self, mut f: impl FnMut(Record<'_>)) {
        while let Some(record) = self.next_record() {
            f(record);
        }
    }

    fn varint(&mut self) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        while let Some((&byte, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
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

    fn read_costs(&mut self, tag: u8) {
        let stored = match tag >> COUNT_SHIFT {
            0 => self.varint() as usize,
            inline => inline as usize - 1,
        };
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
        // Two functions' records interleaved, so that each has several chunks.
        let mut store = RecordStore::default();
        let (mut first, mut second) = (Records::default(), Records::default());
        for (i, record) in pushed.iter().enumerate() {
            store.push(0, &mut first, record);
            if i % 2 == 0 {
                store.push(1, &mut second, record);
            }
        }
        assert_eq!((first.len(), second.len()), (pushed.len(), 3));
        assert_eq!(first.chunks.len(), 3);
        let read = |records: &Records| {
            let mut read = Vec::new();
            store
                .cursor(records, 3)
                .for_each(|record| read.push(format!("{record:?}")));
            read
        };
        let expected: Vec<String> = pushed.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(read(&first), expected);
        let every_other: Vec<String> = expected.iter().step_by(2).cloned().collect();
        assert_eq!(read(&second), every_other);
    }

    #[test]
    fn a_short_cost_line_takes_few_bytes() {
        let mut names = Names::default();
        let file = names.intern("a.c").unwrap();
        let (mut store, mut records) = (RecordStore::default(), Records::default());
        for i in 0..100u64 {
            store.push(
                0,
                &mut records,
                &Record::Cost {
                    file,
                    at: Position {
                        instr: 0x1000 + 3 * i,
                        line: 7,
                    },
                    costs: &[1],
                },
            );
        }
        // Tag with the cost count, two position deltas and one cost: four bytes a
        // record; the first names its file and has a two-byte address delta.
        assert_eq!(store.encoded_len(), 6 + 99 * 4);
    }
}
