//! One address space of the traced program and the tracer's state of it:
//! its memory, its code cache and the protection of its code. The threads
//! of a process share one; a `vfork` child uses its parent's until it
//! calls `execve`; a forked child gets a copy (its memory is one).

use crate::error::Result;
use crate::ptrace::Regs;
use crate::refusals::Refusals;

use super::area::Area;
use super::cache::Cache;
use super::capture::Capture;
use super::inject;
use super::memory::Memory;
use super::protect::Protection;

/// An address space with a code cache.
pub(super) struct Space {
    /// Its memory.
    pub memory: Memory,
    /// Its translations.
    pub cache: Cache,
    /// Its code made non-executable.
    pub protection: Protection,
    /// Data areas of threads that left the space, for new threads (a
    /// program starting many threads maps only as many as run at once).
    pub free_areas: Vec<Area>,
}

impl Space {
    /// Sets up a code cache in the address space of `tid`, stopped with
    /// `regs` at an executable instruction (a new program's first), whose
    /// translations record what `capture` says (and make `cpuid` trap with
    /// `cpuid_trap`, and the system calls of `refusals`).
    pub fn new(
        tid: i32,
        regs: &Regs,
        capture: Capture,
        cpuid_trap: bool,
        refusals: Refusals,
    ) -> Result<Space> {
        let memory = Memory::open(tid)?;
        let layout = inject::map_region(tid, &memory, regs, None, regs.rip)?;
        let cache = Cache::new(layout, &memory, capture, cpuid_trap, refusals)?;
        Ok(Space {
            memory,
            cache,
            protection: Protection::default(),
            free_areas: Vec::new(),
        })
    }

    /// The space of `child`, forked from this one: the same state over the
    /// child's memory. `threads`: this space has threads besides the one
    /// that forked, which may have changed the code cache after the fork;
    /// it is then written into the child's memory again.
    pub fn fork(&self, child: i32, threads: bool) -> Result<Space> {
        let memory = Memory::open(child)?;
        if threads {
            self.cache.copy_code(&self.memory, &memory)?;
        }
        Ok(Space {
            memory,
            cache: self.cache.clone(),
            protection: self.protection.clone(),
            free_areas: self.free_areas.clone(),
        })
    }
}
