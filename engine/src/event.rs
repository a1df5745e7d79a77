//! The events a backend produces for the collector.

/// Receives the execution events of a traced program, in execution order.
///
/// Minimal for now: one call per executed instruction. A backend that works on
/// whole basic blocks (the `translate` backend) produces the very same sequence of
/// events: for each executed block it replays the block's instructions (address
/// and length, known from decoding the block once) up to the instruction where
/// the block was left, so a sink cannot tell the backends apart. Later events
/// (data accesses, branch outcomes, calls and returns with the stack pointer)
/// will be added as further methods with empty default bodies.
pub trait EventSink {
    /// One execution of the instruction of `len` bytes at `addr`.
    ///
    /// A REP string instruction is reported once per iteration plus once for
    /// the final `rcx == 0` check, as Valgrind counts it (`rep movsb` with
    /// rcx = N: N + 1 events; rcx = 0: one event).
    fn instruction(&mut self, addr: u64, len: u8);
}

/// An [`EventSink`] that only counts instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstructionCounter {
    /// Instructions executed so far (Valgrind's `Ir`).
    pub instructions: u64,
}

impl EventSink for InstructionCounter {
    fn instruction(&mut self, _addr: u64, _len: u8) {
        self.instructions += 1;
    }
}

impl<S: EventSink + ?Sized> EventSink for &mut S {
    fn instruction(&mut self, addr: u64, len: u8) {
        (**self).instruction(addr, len);
    }
}
