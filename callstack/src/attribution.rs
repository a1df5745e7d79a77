//! Cachegrind's attribution with simulation: each executed instruction is
//! charged to a slot of its own function's self costs, which the events
//! that follow it reach without a lookup; a direct-mapped cache finds the
//! slot of an instruction that ran recently without hashing. A block's
//! whole runs, once its slots are known, are charged from a list
//! ([`OwnRun`]).

use crate::context::Centre;
use crate::costs::Costs;
use crate::simulation::FetchPoint;

/// Where the last instruction was charged, for the events that follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Charged {
    /// The key of the cost table.
    pub key: u32,
    /// The centre charged.
    pub centre: Centre,
    /// The instruction's address.
    pub addr: u64,
    /// Its slot in the table, with the table's generation it is valid in.
    pub slot: Option<(u64, usize)>,
}

/// A direct-mapped cache of [`Charged`] by instruction address.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecentSlots {
    /// [`RECENT`] entries, empty until the first one is kept.
    entries: Vec<Option<Charged>>,
}

/// The entries of the cache (a power of two).
const RECENT: usize = 8192;

/// The entry an instruction at `addr` maps to.
#[inline]
fn entry_of(addr: u64) -> usize {
    (addr ^ (addr >> 13)) as usize & (RECENT - 1)
}

impl RecentSlots {
    /// The slot of the instruction at `addr` in the table of `key` at
    /// `generation`, if it is cached.
    #[inline]
    pub fn get(&self, addr: u64, key: u32, generation: u64) -> Option<Charged> {
        let charged = (*self.entries.get(entry_of(addr))?)?;
        let current = charged.addr == addr
            && charged.key == key
            && charged.slot.is_some_and(|(known, _)| known == generation);
        current.then_some(charged)
    }

    /// Keeps `charged` (which has a slot).
    pub fn put(&mut self, charged: Charged) {
        if self.entries.is_empty() {
            self.entries = vec![None; RECENT];
        }
        self.entries[entry_of(charged.addr)] = Some(charged);
    }
}

/// What every run of a block charges under Cachegrind's attribution, once
/// known: each instruction's slot, the events every run counts there
/// (`Ir`, `Dr`, `Dw`, `Bc`, `Bi`; not the misses), and the fetches the I1
/// simulation sees.
#[derive(Clone, Debug)]
pub(crate) struct OwnRun {
    /// The block's address and instruction count (a check).
    addr: u64,
    count: usize,
    /// The cost table's key and the generation the slots are valid in.
    key: u32,
    generation: u64,
    /// The slot of each instruction.
    pub slots: Box<[usize]>,
    /// The slots' counts every run adds 1 to ([`Costs::slot_cell`]).
    cells: Box<[usize]>,
    /// Their sum per event column (the columns counted only).
    pub total: Box<[(u32, u64)]>,
    /// The fetches the I1 simulation sees.
    pub fetches: Box<[FetchPoint]>,
    /// Where the block's last instruction is charged.
    pub last: Charged,
}

impl OwnRun {
    /// The run of a block at `addr` whose instructions were charged
    /// `charged` in `table`, each run counting `every` (position, column);
    /// `None` unless every instruction has a slot in the table as it is.
    pub fn new(
        addr: u64,
        charged: &[Charged],
        every: &[(u32, u32)],
        table: &Costs,
        fetches: Box<[FetchPoint]>,
    ) -> Option<OwnRun> {
        let generation = table.generation;
        let slots = charged
            .iter()
            .map(|charged| match charged.slot {
                Some((known, slot)) if known == generation => Some(slot),
                _ => None,
            })
            .collect::<Option<Box<[usize]>>>()?;
        let cells = every
            .iter()
            .map(|&(position, column)| {
                let slot = *slots.get(position as usize)?;
                table.slot_cell(slot, column as usize)
            })
            .collect::<Option<Box<[usize]>>>()?;
        let mut total: Vec<(u32, u64)> = Vec::new();
        for &(_, column) in every {
            match total.iter_mut().find(|(known, _)| *known == column) {
                Some((_, sum)) => *sum += 1,
                None => total.push((column, 1)),
            }
        }
        let last = *charged.last()?;
        Some(OwnRun {
            addr,
            count: charged.len(),
            key: last.key,
            generation,
            slots,
            cells,
            total: total.into_boxed_slice(),
            fetches,
            last,
        })
    }

    /// Whether it describes a block at `addr` of `count` instructions
    /// charged in `table` (numbered `key`) as it is now.
    #[inline]
    pub fn fits(&self, (addr, count): (u64, usize), key: u32, table: &Costs) -> bool {
        self.addr == addr
            && self.count == count
            && self.key == key
            && self.generation == table.generation
    }

    /// Counts the events of `runs` more runs in `table`'s slots.
    #[inline]
    pub fn charge(&self, table: &mut Costs, runs: u64) {
        table.count_in_cells(&self.cells, runs);
    }
}
