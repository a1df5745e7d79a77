//! Self-modifying and remapped code under the step backend: decoded
//! instructions are dropped when the tracee rewrites them (plain and REP
//! stores) or maps other code at their address (munmap + mmap, mmap with
//! MAP_FIXED, mremap). Each program calls seven versions of a function at the
//! same address (programs/smc.h) and exits with the sum of their results;
//! the exit code, the instruction count (against Cachegrind, whose default
//! `--smc-check=all-non-file` catches self-modifying code in anonymous
//! memory) and the lengths of the instructions reported at the rewritten
//! address must all be right.

mod common;

use std::process::Command as Process;

use cgx_engine::{step, Command, Exit, RunOptions};
use common::{build, valgrind_total, Event, Recorder};

/// The sum of the seven versions' results: 1 + 2 + ... + 7.
const SUM: i32 = 28;

/// Where the versions' instructions start and their lengths (offsets in the
/// page), one version after the other, as executed.
const LENGTHS: &[(u64, u8)] = &[
    // push $0 x5; push $0x1001; mov %rsp,%rax; client request; add $48,%rsp;
    // mov $1,%eax; ret
    (0, 2),
    (2, 2),
    (4, 2),
    (6, 2),
    (8, 2),
    (10, 5),
    (15, 3),
    (18, 19),
    (37, 4),
    (41, 5),
    (46, 1),
    // jmp 18; mov $2,%eax; ret
    (0, 2),
    (18, 5),
    (23, 1),
    // jmp 48; xor %ecx,%ecx; rep stosb (the count check only); mov $3,%eax; ret
    (0, 2),
    (48, 2),
    (50, 2),
    (52, 5),
    (57, 1),
    // jmp 48; nop; nop; xor %ecx,%ecx; mov $4,%eax; ret
    (0, 2),
    (48, 1),
    (49, 1),
    (50, 2),
    (52, 5),
    (57, 1),
    // mov $5,%eax; ret
    (0, 5),
    (5, 1),
    // mov $6,%eax; ret
    (0, 5),
    (5, 1),
    // xor %eax,%eax; add $7,%al; ret
    (0, 2),
    (2, 2),
    (4, 1),
];

/// The instructions the recorder saw in the code page (the only code above
/// the static executable), as (offset, length).
fn code_page_instructions(recorder: &Recorder) -> Vec<(u64, u8)> {
    let code: Vec<(u64, u8)> = recorder
        .events
        .iter()
        .filter_map(|event| match event {
            Event::Instruction(_, addr, len) if *addr >= 0x1000_0000 => Some((*addr, *len)),
            _ => None,
        })
        .collect();
    let page = code.first().map_or(0, |(addr, _)| addr & !0xfff);
    code.iter().map(|&(addr, len)| (addr - page, len)).collect()
}

fn check(name: &str) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), name, 0);
    let native = Process::new(&program).status().expect("the program runs");
    assert_eq!(native.code(), Some(SUM), "{name} natively");

    let mut recorder = Recorder::default();
    let outcome = step::run(
        &Command::new(&program),
        &RunOptions::default(),
        &mut recorder,
    )
    .expect("the run succeeds");
    let cachegrind = valgrind_total(dir.path(), "cachegrind", &program);
    let lengths = code_page_instructions(&recorder);
    eprintln!(
        "{name}: exit native {:?}, cgx {:?}; instructions cgx {}, cachegrind {}; \
         {} instructions at the rewritten address (expected {}), {} decoded \
         instructions dropped",
        native.code(),
        outcome.exit,
        outcome.instructions,
        cachegrind,
        lengths.len(),
        LENGTHS.len(),
        outcome.code_dropped,
    );
    assert_eq!(outcome.exit, Exit::Code(SUM), "{name}");
    assert_eq!(outcome.instructions, cachegrind, "{name}");
    assert_eq!(lengths, LENGTHS, "{name}");
    assert!(outcome.code_dropped > 0, "{name}: {outcome:?}");
}

/// (a) Plain stores (bytes and 8-byte words) rewrite the code.
#[test]
fn stores_drop_rewritten_code() {
    check("smc_store");
}

/// (b) munmap + mmap, mmap with MAP_FIXED over the old mapping, and mremap
/// put other code at the address; the program never stores to it.
#[test]
fn remapping_drops_code() {
    check("smc_remap");
}

/// (c) `rep movsb` copies new code over the old, forwards and backwards.
#[test]
fn rep_stores_drop_rewritten_code() {
    check("smc_rep");
}
