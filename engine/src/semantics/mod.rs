//! What an instruction is for Valgrind's simulations, shared by both
//! backends: its data accesses (`accesses`), the branch it is and VEX's
//! constant folding (`branches`), Cachegrind's superblocks
//! (`superblock`), all kept per decoded instruction ([`Decoded`]), and the
//! events one execution reports (`report`), given what the backend saw of
//! the execution ([`Dynamic`]).

mod accesses;
mod branches;
mod decoded;
mod report;
mod superblock;

pub(crate) use accesses::{address_in, Accesses};
pub(crate) use branches::{bit as register_bit, Branch, Effect, RCX};
pub(crate) use decoded::{with_info_factory, Decoded};
pub(crate) use report::{report, BranchRules, Dynamic, InstructionAt, Pass, Registers};
pub(crate) use superblock::Superblock;
