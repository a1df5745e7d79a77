//! Cachegrind's attribution of whole blocks that run without a step of a
//! simulation in between (no simulation, or the backend's filter letting
//! through only what may miss): each instruction is charged to its own
//! function, which never changes, so a block's runs are counted, and each
//! of its instructions gets what every run counts there (its `Ir`, with
//! the filter also its data reads and writes) times the runs as the dump
//! reads the costs ([`crate::costs::Costs::self_costs_by_instruction`]): a
//! block costs one counter, not a row per instruction.

use std::ops::Range;

use rustc_hash::FxHashMap;

use crate::context::Centre;

/// The instruction sequences (whole blocks) seen in a process, each
/// instruction with the centre it is charged to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sequences {
    /// The sequence last seen starting at each address.
    by_start: FxHashMap<u64, usize>,
    /// A direct-mapped cache of `by_start` ([`RECENT`] slots, empty until
    /// the first sequence): most blocks run again soon.
    recent: Vec<(u64, usize)>,
    sequences: Vec<Sequence>,
    /// The instructions of all sequences, one sequence after another, each
    /// with its centre.
    instructions: Vec<(Centre, u64)>,
    /// The events every run counts of the sequences that count more than
    /// `Ir`, one sequence after another: (position of the instruction in
    /// its sequence, event column).
    events: Vec<(u32, u32)>,
    /// The number of the sequence of each block key of a block-based
    /// backend, once known ([`UNKNOWN`] before).
    keyed: Vec<u32>,
}

/// One instruction sequence: where its instructions are, and the events
/// each of its runs counts when more than each instruction's `Ir`.
#[derive(Clone, Debug)]
struct Sequence {
    instructions: Range<usize>,
    every: Option<Range<usize>>,
}

/// A block key whose sequence is not known yet.
const UNKNOWN: u32 = u32::MAX;

/// The slots of the cache of recent sequences (a power of two).
const RECENT: usize = 4096;

/// The slot of a sequence starting at `addr` in the cache.
fn recent_slot(addr: u64) -> usize {
    (addr ^ (addr >> 12)) as usize & (RECENT - 1)
}

impl Sequences {
    /// The number of the sequence of `instructions` (not empty) whose runs
    /// count their `Ir` only, and the centre of its last instruction, with
    /// `centre_of` giving the centre of an instruction of a sequence seen
    /// for the first time.
    #[inline]
    pub fn of(
        &mut self,
        instructions: &[(u64, u8)],
        centre_of: impl FnMut(u64) -> Centre,
    ) -> (usize, Option<Centre>) {
        let number = self.find_or_add(instructions, None, centre_of);
        (number, self.last_centre(number))
    }

    /// The number of the sequence of `instructions` whose runs count
    /// `every`: (position, column) of each event, each instruction's `Ir`
    /// among them ([`crate::simulation::Simulation::every_run_events`]).
    fn find_or_add(
        &mut self,
        instructions: &[(u64, u8)],
        every: Option<Vec<(u32, u32)>>,
        mut centre_of: impl FnMut(u64) -> Centre,
    ) -> usize {
        let start = instructions.first().map_or(0, |&(addr, _)| addr);
        let slot = recent_slot(start);
        let (cached, recent) = match self.recent.get(slot) {
            Some(&(at, number)) if at == start => (Some(number), true),
            _ => (self.by_start.get(&start).copied(), false),
        };
        if let Some(number) = cached {
            let known = self.instructions(number);
            let same = known.len() == instructions.len()
                && known
                    .iter()
                    .zip(instructions)
                    .all(|(&(_, known), &(addr, _))| known == addr)
                && self.every(number) == every.as_deref();
            if same {
                if !recent {
                    self.remember(slot, start, number);
                }
                return number;
            }
        }
        // New code, or other code at a known address: a sequence of its own
        // (the runs of the old one stay counted).
        let first = self.instructions.len();
        let centres = instructions
            .iter()
            .map(|&(addr, _)| (centre_of(addr), addr));
        self.instructions.extend(centres);
        let every = every.map(|every| {
            let first = self.events.len();
            self.events.extend(every);
            first..self.events.len()
        });
        self.sequences.push(Sequence {
            instructions: first..self.instructions.len(),
            every,
        });
        let number = self.sequences.len() - 1;
        self.by_start.insert(start, number);
        self.remember(slot, start, number);
        number
    }

    /// [`Sequences::of`] for the block a backend numbers `key` (a key
    /// always stands for the same instructions), found by indexing once
    /// known; returns the sequence's number.
    #[inline]
    pub fn of_key(
        &mut self,
        key: u32,
        instructions: &[(u64, u8)],
        centre_of: impl FnMut(u64) -> Centre,
    ) -> usize {
        self.of_key_counting(key, instructions, || None, centre_of)
    }

    /// [`Sequences::of_key`] for a block each of whose runs counts the
    /// events `every` gives, (position, column) each, each instruction's
    /// `Ir` among them (asked for a key seen for the first time only).
    #[inline]
    pub fn of_key_every(
        &mut self,
        key: u32,
        instructions: &[(u64, u8)],
        every: impl FnOnce() -> Vec<(u32, u32)>,
        centre_of: impl FnMut(u64) -> Centre,
    ) -> usize {
        self.of_key_counting(key, instructions, || Some(every()), centre_of)
    }

    /// [`Sequences::of_key`] with the events of each run, `None` for
    /// `Ir` alone.
    #[inline]
    fn of_key_counting(
        &mut self,
        key: u32,
        instructions: &[(u64, u8)],
        every: impl FnOnce() -> Option<Vec<(u32, u32)>>,
        centre_of: impl FnMut(u64) -> Centre,
    ) -> usize {
        let index = key as usize;
        if let Some(&number) = self.keyed.get(index).filter(|&&number| number != UNKNOWN) {
            // The key's block, unless the key was left to other code.
            let known = self.instructions(number as usize);
            let start = |instructions: &[(Centre, u64)]| instructions.first().map(|&(_, at)| at);
            if known.len() == instructions.len()
                && start(known) == instructions.first().map(|&(addr, _)| addr)
            {
                return number as usize;
            }
        }
        let number = self.find_or_add(instructions, every(), centre_of);
        if let Ok(kept) = u32::try_from(number) {
            if self.keyed.len() <= index {
                self.keyed.resize(index + 1, UNKNOWN);
            }
            self.keyed[index] = kept;
        }
        number
    }

    /// Puts sequence `number`, starting at `start`, in cache slot `slot`.
    fn remember(&mut self, slot: usize, start: u64, number: usize) {
        if self.recent.is_empty() {
            // No block starts at the last address of the address space.
            self.recent = vec![(u64::MAX, 0); RECENT];
        }
        self.recent[slot] = (start, number);
    }

    /// The centre of the last instruction of sequence `number`.
    pub fn last_centre(&self, number: usize) -> Option<Centre> {
        self.instructions(number).last().map(|&(centre, _)| centre)
    }

    /// The events each run of sequence `number` counts, (position,
    /// column) each, when more than each instruction's `Ir`.
    fn every(&self, number: usize) -> Option<&[(u32, u32)]> {
        let every = self.sequences.get(number)?.every.clone()?;
        self.events.get(every)
    }

    /// The column of each event a run of sequence `number` counts, when
    /// it counts more than `Ir` (none otherwise: a thread counts those runs'
    /// `Ir` itself).
    pub fn every_run_columns(&self, number: usize) -> impl Iterator<Item = u32> + '_ {
        let every = self.every(number).unwrap_or_default();
        every.iter().map(|&(_, column)| column)
    }

    /// The instructions of sequence `number`, each with its centre (none if
    /// there is no such sequence).
    pub fn instructions(&self, number: usize) -> &[(Centre, u64)] {
        self.sequences
            .get(number)
            .and_then(|sequence| self.instructions.get(sequence.instructions.clone()))
            .unwrap_or_default()
    }
    /// The centres of the instructions of sequence `number`, each where it
    /// starts a run of instructions of one centre (a centre the sequence
    /// leaves and enters again comes twice).
    pub fn centres(&self, number: usize) -> impl Iterator<Item = Centre> + '_ {
        let instructions = self.instructions(number);
        let first = instructions.first().map(|&(centre, _)| centre);
        let changes = instructions
            .windows(2)
            .filter(|pair| pair[0].0 != pair[1].0)
            .map(|pair| pair[1].0);
        first.into_iter().chain(changes)
    }

    /// Calls `each` with the instruction (centre, address) and the event
    /// column of each event a run of sequence `number` counts, in order.
    pub fn for_each_event(&self, number: usize, mut each: impl FnMut((Centre, u64), usize)) {
        let instructions = self.instructions(number);
        match self.every(number) {
            None => {
                for &instruction in instructions {
                    each(instruction, 0);
                }
            }
            Some(every) => {
                for &(position, column) in every {
                    if let Some(&instruction) = instructions.get(position as usize) {
                        each(instruction, column as usize);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn centre(cxt: u32) -> Centre {
        Centre { cxt, rec: 0 }
    }

    /// Instructions of 4 bytes at `addrs`.
    fn block(addrs: &[u64]) -> Vec<(u64, u8)> {
        addrs.iter().map(|&addr| (addr, 4)).collect()
    }

    /// Instructions below 0x100 are in centre 0, the others in centre 1.
    fn centre_of(addr: u64) -> Centre {
        centre(u32::from(addr >= 0x100))
    }

    #[test]
    fn a_key_keeps_its_sequence_until_other_code_takes_it() {
        let mut sequences = Sequences::default();
        let first = sequences.of_key(7, &block(&[0x10, 0x14]), centre_of);
        assert_eq!(sequences.of_key(7, &block(&[0x10, 0x14]), centre_of), first);
        // Another key for the same instructions: the same sequence.
        assert_eq!(sequences.of_key(9, &block(&[0x10, 0x14]), centre_of), first);
        // The key now stands for other code: a sequence of its own.
        let other = sequences.of_key(7, &block(&[0x10, 0x14, 0x18]), centre_of);
        assert_ne!(other, first);
        assert_eq!(sequences.instructions(other).len(), 3);
        assert_eq!(sequences.last_centre(first), Some(centre(0)));
    }

    #[test]
    fn the_same_instructions_counting_other_events_are_another_sequence() {
        let mut sequences = Sequences::default();
        let reads = || vec![(0, 0), (0, 3), (1, 0)];
        let writes = || vec![(0, 0), (1, 0), (1, 6)];
        let read = sequences.of_key_every(1, &block(&[0x10, 0x14]), reads, centre_of);
        assert_eq!(
            sequences.of_key_every(4, &block(&[0x10, 0x14]), reads, centre_of),
            read
        );
        let write = sequences.of_key_every(2, &block(&[0x10, 0x14]), writes, centre_of);
        let ir_only = sequences.of_key(3, &block(&[0x10, 0x14]), centre_of);
        assert_ne!(read, write);
        assert_ne!(ir_only, read);
        assert_ne!(ir_only, write);
        let counted: Vec<u32> = sequences.every_run_columns(read).collect();
        assert_eq!(counted, [0, 3, 0]);
        // Runs of `Ir` alone are the thread's business.
        assert_eq!(sequences.every_run_columns(ir_only).count(), 0);
    }

    #[test]
    fn each_event_of_a_run_is_at_its_instruction() {
        let mut sequences = Sequences::default();
        let ir_only = sequences.of_key(1, &block(&[0xf8, 0xfc, 0x100]), centre_of);
        let mut events = Vec::new();
        sequences.for_each_event(ir_only, |(centre, addr), column| {
            events.push((centre.cxt, addr, column))
        });
        assert_eq!(events, [(0, 0xf8, 0), (0, 0xfc, 0), (1, 0x100, 0)]);
        let every = || vec![(0, 0), (1, 0), (1, 6), (2, 0), (2, 3)];
        let counting = sequences.of_key_every(2, &block(&[0xf8, 0xfc, 0x100]), every, centre_of);
        events.clear();
        sequences.for_each_event(counting, |(centre, addr), column| {
            events.push((centre.cxt, addr, column))
        });
        let expected = [
            (0, 0xf8, 0),
            (0, 0xfc, 0),
            (0, 0xfc, 6),
            (1, 0x100, 0),
            (1, 0x100, 3),
        ];
        assert_eq!(events, expected);
    }

    #[test]
    fn a_sequence_names_each_centre_it_enters() {
        let mut sequences = Sequences::default();
        // Into centre 1 and back to centre 0 (a centre by address alone).
        let by_addr = |addr: u64| centre(u32::from((0x100..0x200).contains(&addr)));
        let number = sequences.of_key(1, &block(&[0xfc, 0x100, 0x200, 0x204]), by_addr);
        let centres: Vec<u32> = sequences.centres(number).map(|centre| centre.cxt).collect();
        assert_eq!(centres, [0, 1, 0]);
        assert_eq!(sequences.centres(number + 1).count(), 0);
    }
}
