//! `cgx run --dump-instr=yes` writes instruction addresses as Callgrind
//! does: an address in an object's code less the object's load bias (the
//! address the object's file gives it, which KCachegrind hands to objdump),
//! for calls' and jumps' targets too. A position-independent program (every
//! program gcc builds here by default) loads away from its file's
//! addresses; its own functions' costs, calls and jumps are compared with
//! Valgrind's, instruction by instruction. And every instruction both run
//! of `/bin/true` (the dynamic linker's and libc's start-up) has
//! Valgrind's source file and line, as Valgrind's reader takes the line
//! tables (a range of the line of the range before it joins that range,
//! file and all).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use cgx_formats::{Profile, Record};
use cgx_tests::compare::assert_same_rows;
use cgx_tests::run::{read, run, Profiler};
use cgx_tests::successful_output_of;

/// A loop calling a function, and a branch in it.
const SOURCE: &str = "__attribute__((noinline)) int step(int x) {
    return (x & 3) ? x * 3 : x / 2;
}
int main(void) {
    int s = 0;
    for (int i = 0; i < 1000; i++) s += step(i);
    return s == 7;
}
";

/// The program's functions.
const OWN: [&str; 2] = ["main", "step"];

/// One figure of an instruction of the program's functions: its kind,
/// the instruction's address and a target's (0 for costs), the figure.
type Figures = BTreeMap<String, u64>;

/// The figures of `OWN`'s records in `profile`.
fn own_figures(profile: &Profile) -> Figures {
    let mut figures = Figures::new();
    for part in &profile.parts {
        let ir = part.events.index_of("Ir").expect("an Ir column");
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name);
            if !OWN.contains(&name) {
                continue;
            }
            records.for_each(part.events.len(), |record| {
                let (key, value) = match record {
                    Record::Cost { at, costs, .. } => {
                        (format!("{name} Ir {:#x}", at.instr), costs[ir])
                    }
                    Record::Call {
                        at, target, count, ..
                    } => (
                        format!("{name} call {:#x} -> {:#x}", at.instr, target.instr),
                        count,
                    ),
                    Record::Jump {
                        at,
                        target,
                        executed,
                        ..
                    } => (
                        format!("{name} jump {:#x} -> {:#x}", at.instr, target.instr),
                        executed,
                    ),
                };
                *figures.entry(key).or_insert(0) += value;
            });
        }
    }
    figures
}

#[test]
fn instruction_addresses_are_the_objects_own() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let source = dir.path().join("step.c");
    fs::write(&source, SOURCE).expect("the source");
    let program = dir.path().join("step");
    successful_output_of(
        Command::new("gcc")
            .args(["-O1", "-g", "-fpie", "-pie"])
            .arg(&source)
            .arg("-o")
            .arg(&program),
    );
    let options = ["--dump-instr=yes", "--collect-jumps=yes"];
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    let expected = own_figures(&read(&valgrind.files[0]));
    let actual = own_figures(&read(&cgx.files[0]));
    assert!(
        expected.keys().any(|key| key.contains(" call ")) && expected.len() > 10,
        "the test's premise: Valgrind's profile has the program's costs and calls: {expected:?}"
    );
    // The file's own addresses: below the first page a position-independent
    // program is loaded at.
    let addresses_in_file = |figures: &Figures| {
        figures
            .keys()
            .filter_map(|key| key.rsplit(' ').next())
            .all(|addr| {
                u64::from_str_radix(addr.trim_start_matches("0x"), 16).is_ok_and(|a| a < 0x10_0000)
            })
    };
    assert!(
        addresses_in_file(&expected),
        "the test's premise: {expected:?}"
    );
    assert_same_rows(&expected, &actual, "costs, calls and jumps by instruction");
    assert!(Path::new(&program).exists());
}

/// The source file and line of each instruction of `profile`, by object
/// and address.
fn sources(profile: &Profile) -> BTreeMap<(String, u64), (String, u64)> {
    let mut table = BTreeMap::new();
    for part in &profile.parts {
        for (function, records) in part.functions() {
            let object = profile.names.get(function.object).to_string();
            records.for_each(part.events.len(), |record| {
                if let Record::Cost { file, at, .. } = record {
                    let file = profile.names.get(file).to_string();
                    table.insert((object.clone(), at.instr), (file, at.line));
                }
            });
        }
    }
    table
}

#[test]
fn every_instruction_has_valgrinds_file_and_line() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = ["--dump-instr=yes", "--dump-line=yes"];
    let program = Path::new("/bin/true");
    let valgrind = sources(&read(
        &run(Profiler::Valgrind, &options, program, &[], dir.path()).files[0],
    ));
    let cgx = sources(&read(
        &run(Profiler::Cgx, &options, program, &[], dir.path()).files[0],
    ));
    let both: Vec<_> = valgrind
        .keys()
        .filter(|key| cgx.contains_key(*key))
        .collect();
    assert!(
        both.len() > 5_000,
        "the test's premise: {} instructions",
        both.len()
    );
    let differ: Vec<_> = both
        .iter()
        .filter(|key| valgrind[**key] != cgx[**key])
        .map(|key| (key, &valgrind[*key], &cgx[*key]))
        .take(10)
        .collect();
    assert!(differ.is_empty(), "(Valgrind's, cgx's): {differ:?}");
}
