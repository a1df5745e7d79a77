//! The tracer's view of the code cache: which original addresses have a
//! translation (and where it enters), which blocks are refused (stepped),
//! which `int3` stub belongs to which exit, and where free space starts.

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};

use super::blocks::{self, DecodedBlock, End};
use super::layout::Layout;
use super::ptrace::Memory;
use super::translator::{self, ExitSlot, Refusal};

/// One translation.
#[derive(Debug)]
struct Translation {
    /// The block it translates.
    block: DecodedBlock,
    /// Its exits through slots.
    exits: Vec<ExitSlot>,
    /// Its instructions' addresses and lengths (for replay).
    instructions: Vec<(u64, u8)>,
    /// Its last instruction.
    last: End,
}

/// A translated block as the replay needs it: its address, its
/// instructions' addresses and lengths, its last instruction.
pub(super) type ReplayInfo<'a> = (u64, &'a [(u64, u8)], End);

/// What an `int3` of the code cache means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stub {
    /// Exit `exit` of translation `id` reached an address without a
    /// translation.
    Exit {
        /// The translation.
        id: u32,
        /// Its exit.
        exit: usize,
    },
    /// The lookup routine missed; the target is in the `target` slot.
    Miss,
}

/// The translations of one process.
pub(super) struct Cache {
    layout: Layout,
    /// Next free byte of the code area.
    free: u64,
    /// The lookup routine.
    lookup: u64,
    /// Its miss `int3`.
    miss: u64,
    translations: Vec<Translation>,
    /// Entry of each translated original address.
    entries: HashMap<u64, u64>,
    /// Translation id by entry (to find the translation holding an address).
    by_entry: BTreeMap<u64, u32>,
    /// Exit stubs.
    stubs: HashMap<u64, (u32, usize)>,
    /// Blocks that are stepped, with the reason.
    refused: HashMap<u64, (Option<DecodedBlock>, Refusal)>,
}

impl Cache {
    /// An empty cache in the region `layout` (mapped, writable through
    /// `memory`); writes the data slots and the lookup routine.
    pub fn new(layout: Layout, memory: &Memory) -> Result<Cache> {
        memory.write_u64(layout.cursor(), layout.buffer())?;
        memory.write_u64(layout.table_base(), layout.table())?;
        let lookup = layout.code();
        let (bytes, miss) =
            translator::lookup_routine(&layout, lookup).map_err(Error::Unexpected)?;
        memory.write(lookup, &bytes)?;
        Ok(Cache {
            layout,
            free: align(lookup + bytes.len() as u64),
            lookup,
            miss,
            translations: Vec::new(),
            entries: HashMap::new(),
            by_entry: BTreeMap::new(),
            stubs: HashMap::new(),
            refused: HashMap::new(),
        })
    }

    /// The region.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// What the replay of a record of translation `id` needs: the block's
    /// address, its instructions, its last instruction.
    pub fn replay_info(&self, id: u64) -> Option<ReplayInfo<'_>> {
        let index = usize::try_from(id).ok()?;
        self.translations
            .get(index)
            .map(|t| (t.block.addr, t.instructions.as_slice(), t.last))
    }

    /// Translations made.
    pub fn translations(&self) -> usize {
        self.translations.len()
    }

    /// What the `int3` at `addr` is, if it is one of the cache's.
    pub fn stub(&self, addr: u64) -> Option<Stub> {
        if addr == self.miss {
            return Some(Stub::Miss);
        }
        self.stubs
            .get(&addr)
            .map(|&(id, exit)| Stub::Exit { id, exit })
    }

    /// The original target of exit `exit` of translation `id`.
    pub fn exit_target(&self, id: u32, exit: usize) -> Option<u64> {
        let translation = self.translations.get(id as usize)?;
        translation.exits.get(exit).map(|exit| exit.target)
    }

    /// The entry of the translation whose code holds `addr`.
    pub fn entry_holding(&self, addr: u64) -> Option<u64> {
        self.by_entry
            .range(..=addr)
            .next_back()
            .map(|(&entry, _)| entry)
    }

    /// The block at `addr` if it is refused (to be stepped): its decoding
    /// (`None` when it does not decode).
    pub fn refused(&self, addr: u64) -> Option<&Option<DecodedBlock>> {
        self.refused.get(&addr).map(|(block, _)| block)
    }

    /// The entry of the translation of `addr`, translating it if needed;
    /// `None` when the block is refused (see [`Cache::refused`]).
    pub fn get_or_translate(&mut self, memory: &Memory, addr: u64) -> Result<Option<u64>> {
        if let Some(&entry) = self.entries.get(&addr) {
            return Ok(Some(entry));
        }
        if self.refused.contains_key(&addr) {
            return Ok(None);
        }
        let Some(block) = blocks::decode(memory, addr) else {
            self.refused.insert(addr, (None, "does not decode".into()));
            return Ok(None);
        };
        let id = u32::try_from(self.translations.len())
            .ok()
            .filter(|&id| id < i32::MAX as u32)
            .ok_or_else(|| Error::Unexpected("translate: too many translations".into()))?;
        let entries = &self.entries;
        let linked = |target: u64| entries.get(&target).copied();
        let emitted = match translator::translate(
            &block,
            id,
            self.free,
            &self.layout,
            self.lookup,
            &linked,
        ) {
            Ok(emitted) => emitted,
            Err(reason) => {
                self.refused.insert(addr, (Some(block), reason));
                return Ok(None);
            }
        };
        let end = emitted.at + emitted.bytes.len() as u64;
        if end > self.layout.end() {
            return Err(Error::Unexpected(
                "translate: the code cache is full".into(),
            ));
        }
        memory.write(emitted.at, &emitted.bytes)?;
        self.free = align(end);
        for (index, exit) in emitted.exits.iter().enumerate() {
            self.stubs.insert(exit.stub, (id, index));
        }
        self.entries.insert(addr, emitted.entry);
        self.by_entry.insert(emitted.entry, id);
        let instructions = block.insns.iter().map(|i| (i.addr, i.len)).collect();
        let last = block.last().end();
        self.translations.push(Translation {
            block,
            exits: emitted.exits,
            instructions,
            last,
        });
        Ok(Some(emitted.entry))
    }

    /// Links exit `exit` of translation `id` to `entry`.
    pub fn link(&self, memory: &Memory, id: u32, exit: usize, entry: u64) -> Result<()> {
        let Some(slot) = self
            .translations
            .get(id as usize)
            .and_then(|translation| translation.exits.get(exit))
        else {
            return Ok(());
        };
        memory.write(slot.slot, &translator::slot_jump(slot.slot, entry))
    }

    /// Enters `target` → `entry` in the indirect-branch table.
    pub fn enter_indirect(&self, memory: &Memory, target: u64, entry: u64) -> Result<()> {
        let at = self.layout.table_entry(target);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&target.to_le_bytes());
        bytes[8..].copy_from_slice(&entry.to_le_bytes());
        memory.write(at, &bytes)
    }
}

/// Rounds up to 16 bytes.
fn align(addr: u64) -> u64 {
    (addr + 15) & !15
}
