//! Cachegrind's superblocks ([`Superblock`]): Cachegrind runs VEX with
//! chasing on, so its translations differ; only its conditional-branch
//! counts tell (VEX folds more exits), the blocks reported stay Callgrind's.
//! VEX 3.19 (`guest_generic_bb_to_IR.c`, `bb_to_IR`) disassembles a first
//! basic block of at most `guest_max_insns` (60) instructions, then extends
//! it at most once (its extension loop breaks after any extension, so a
//! second chase never happens; checked with `--trace-flags=10000000`):
//!
//! - when the block ends with a direct `jmp` or `call` (`Ijk_Boring` or
//!   `Ijk_Call` to a constant, the instruction having no other exit) and at
//!   least 3 instructions of the budget are left, the block at the target
//!   is appended, with the remaining budget as its instruction limit;
//! - when it ends with a `jcc`, the "&&-idiom" recovery may append the
//!   3-instruction-or-shorter block one arm leads to, guarded (not
//!   modelled here, see [`Superblock`]).
//!
//! Constants flow through the whole superblock, so a `rep stos` whose count
//! was set before a chased `call` or `jmp` loses its first count check.

use crate::flow::{Flow, MAX_BLOCK_INSTRUCTIONS};

use super::branches::Branch;
use super::decoded::Decoded;

/// Where a thread is in Cachegrind's VEX superblocks (see the module
/// documentation): the basic block being executed, whether it was reached
/// by the superblock's chase, and the registers holding constants of the
/// superblock.
///
/// Not modelled: the "&&-idiom" extension after a `jcc` (Cachegrind then
/// drops the first `jcc`'s branch, evaluates the second one on every pass
/// through the superblock, and counts the guarded block's instructions
/// even when it does not run); instructions VEX flags as verbose (some AVX
/// ones), which halve the budget; targets VEX may not chase into
/// (redirected functions, outside the client's code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// Instructions executed in the current basic block.
    count: u32,
    /// The current basic block's instruction limit.
    limit: u32,
    /// The current basic block is the superblock's chased extension.
    chased: bool,
    /// The general-purpose registers that hold constants of the superblock.
    pub known: u16,
}

impl Superblock {
    /// At the start of a superblock.
    pub fn start() -> Superblock {
        Superblock {
            count: 0,
            limit: MAX_BLOCK_INSTRUCTIONS,
            chased: false,
            known: 0,
        }
    }

    /// Follows the execution of `decoded` at `at` that went to `now`
    /// (`known`: the registers holding constants after it).
    pub fn executed(&mut self, decoded: &Decoded, at: u64, now: u64, known: u16) {
        self.count += 1;
        self.known = known;
        let next = at.wrapping_add(u64::from(decoded.len));
        let ends = match decoded.flow {
            _ if decoded.rep.is_some() => true,
            Flow::Next => false,
            // A taken side exit leaves the superblock; its IR goes on.
            Flow::SideExit => now != next,
            _ => true,
        };
        let direct = decoded.branch != Branch::Indirect
            && matches!(decoded.flow, Flow::Jump { direct: true } | Flow::Call);
        if ends && direct && decoded.rep.is_none() && !self.chased {
            let left = self.limit.saturating_sub(self.count);
            if left >= 3 {
                *self = Superblock {
                    count: 0,
                    limit: left,
                    chased: true,
                    known: self.known,
                };
                return;
            }
        }
        if ends || self.count >= self.limit {
            *self = Superblock::start();
        }
    }
}
