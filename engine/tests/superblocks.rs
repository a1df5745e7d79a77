//! `RunOptions::superblocks`: the conditional branches the step backend
//! reports equal Cachegrind's with the option (VEX chasing one direct `jmp`
//! or `call` per superblock, so constant REP counts set before it fold the
//! first count check away; Cachegrind's inversion of exits to the next
//! instruction) and Callgrind's without it. Compared per source line: Bc,
//! and Bcm with Valgrind's predictor fed the reported outcomes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use cgx_engine::symbols::{Mapping, Symbols};
use cgx_engine::{step, Block, BlockEvent, Command, EventSink, RunOptions, Thread};
use cgx_formats::Record;
use common::{valgrind, Predictor};
use object::read::elf::{FileHeader, ProgramHeader};

/// Bc and Bcm.
type Counts = [u64; 2];

/// Bc and Bcm per instruction address (single process).
struct Branches {
    predictor: Predictor,
    counts: BTreeMap<u64, Counts>,
}

impl EventSink for Branches {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}

    fn instruction(&mut self, _thread: Thread, _addr: u64, _len: u8) {}

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        if let BlockEvent::Conditional(taken) = event {
            self.conditional_branch(thread, addr, taken);
        }
    }
}

impl Branches {
    fn conditional_branch(&mut self, _thread: Thread, addr: u64, taken: bool) {
        let miss = self.predictor.mispredicted(addr, taken);
        let counts = self.counts.entry(addr).or_default();
        counts[0] += 1;
        counts[1] += u64::from(miss);
    }
}

/// Compiles `source` (`-static -nostdlib`, with `flags`) into `dir`.
fn gcc(dir: &Path, source: &Path, flags: &[&str]) -> PathBuf {
    let executable = dir.join(source.file_stem().expect("a file name"));
    let output = Process::new("gcc")
        .args(["-g", "-static", "-nostdlib", "-fno-stack-protector"])
        .args(flags)
        .arg("-o")
        .arg(&executable)
        .arg(source)
        .output()
        .expect("gcc runs");
    assert!(
        output.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    executable
}

/// The executable mappings of the static, non-PIE `program`.
fn mappings(program: &Path) -> Vec<Mapping> {
    let data = std::fs::read(program).expect("the program");
    let header =
        object::elf::FileHeader64::<object::Endianness>::parse(&*data).expect("an ELF file");
    let endian = header.endian().expect("its byte order");
    header
        .program_headers(endian, &*data)
        .expect("program headers")
        .iter()
        .filter(|segment| {
            segment.p_type(endian) == object::elf::PT_LOAD
                && segment.p_flags(endian) & object::elf::PF_X != 0
        })
        .map(|segment| Mapping {
            start: segment.p_vaddr(endian) & !0xfff,
            end: (segment.p_vaddr(endian) + segment.p_memsz(endian) + 0xfff) & !0xfff,
            perms: "r-xp".into(),
            offset: segment.p_offset(endian) & !0xfff,
            dev: (0, 0),
            inode: 1,
            path: program.to_str().expect("a UTF-8 path").to_owned(),
        })
        .collect()
}

/// A source position: file name (without folders) and line.
type Line = (String, u64);

fn base_name(file: &str) -> String {
    file.rsplit('/').next().unwrap_or(file).to_owned()
}

/// The step backend's Bc and Bcm per source line of `program`.
fn ours(program: &Path, superblocks: bool) -> BTreeMap<Line, Counts> {
    let mut sink = Branches {
        predictor: Predictor::default(),
        counts: BTreeMap::new(),
    };
    let options = RunOptions {
        superblocks,
        ..RunOptions::default()
    };
    step::run(&Command::new(program), &options, &mut sink).expect("the run succeeds");
    let mut symbols = Symbols::new();
    let problems = symbols.set_mappings(&mappings(program));
    assert!(problems.is_empty(), "{problems:?}");
    let mut lines: BTreeMap<Line, Counts> = BTreeMap::new();
    for (addr, counts) in sink.counts {
        let location = symbols.lookup(addr);
        let line = (base_name(location.file_name()), u64::from(location.line));
        let sums = lines.entry(line).or_default();
        sums[0] += counts[0];
        sums[1] += counts[1];
    }
    lines
}

/// Valgrind's (`cachegrind` or `callgrind`) Bc and Bcm per source line.
fn theirs(dir: &Path, tool: &str, program: &Path) -> BTreeMap<Line, Counts> {
    let out = dir.join(format!("{tool}.out"));
    valgrind(
        tool,
        &[
            format!("--{tool}-out-file={}", out.display()),
            "--cache-sim=no".into(),
            "--branch-sim=yes".into(),
        ],
        program,
    );
    let profile = cgx_formats::read_path(&out).expect("cgx-formats reads Valgrind's file");
    let mut lines: BTreeMap<Line, Counts> = BTreeMap::new();
    for part in &profile.parts {
        let columns = [
            part.events.index_of("Bc").expect("Bc"),
            part.events.index_of("Bcm").expect("Bcm"),
        ];
        for (_, records) in part.functions() {
            records.for_each(part.events.len(), |record| {
                if let Record::Cost { file, at, costs } = record {
                    let line = (base_name(profile.names.get(file)), at.line);
                    let sums = lines.entry(line).or_default();
                    for (sum, &column) in sums.iter_mut().zip(&columns) {
                        *sum += costs.get(column).copied().unwrap_or(0);
                    }
                }
            });
        }
    }
    lines.retain(|_, counts| *counts != [0, 0]);
    lines
}

/// Compares per line; returns the lines whose Bc differ between Cachegrind
/// and Callgrind.
fn compare(program: &Path) -> Vec<Line> {
    let dir = program.parent().expect("a folder");
    let mut cachegrind_lines = BTreeMap::new();
    for (superblocks, tool) in [(true, "cachegrind"), (false, "callgrind")] {
        let ours = ours(program, superblocks);
        let theirs = theirs(dir, tool, program);
        let mut differences = Vec::new();
        for line in ours.keys().chain(theirs.keys()) {
            let (a, b) = (ours.get(line), theirs.get(line));
            if a != b {
                differences.push(format!("{}:{} cgx {a:?} {tool} {b:?}", line.0, line.1));
            }
        }
        differences.dedup();
        assert!(
            differences.is_empty(),
            "superblocks = {superblocks}: Bc, Bcm per line differ from {tool}'s:\n{}",
            differences.join("\n")
        );
        let total: u64 = theirs.values().map(|counts| counts[0]).sum();
        eprintln!(
            "{}: superblocks = {superblocks}: {} lines, Bc {total} as {tool}",
            program.display(),
            theirs.len()
        );
        if superblocks {
            cachegrind_lines = theirs;
        } else {
            return theirs
                .into_iter()
                .filter(|(line, counts)| {
                    cachegrind_lines.get(line).map(|c| c[0]) != Some(counts[0])
                })
                .map(|(line, _)| line)
                .collect();
        }
    }
    unreachable!()
}

#[test]
fn chased_calls_and_jumps() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/chase.S");
    let program = gcc(dir.path(), &source, &[]);
    let differ = compare(&program);
    // The count checks folded for Cachegrind only: through a jmp, through
    // a call (twice), and after a 57-instruction block.
    let lines: Vec<u64> = differ.iter().map(|(_, line)| *line).collect();
    assert_eq!(lines, [15, 38, 71, 76], "{differ:?}");
}

#[test]
fn exact_program() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/programs/run");
    let include = format!("-I{}", root.display());
    let program = gcc(
        dir.path(),
        &root.join("exact.c"),
        &[
            "-O2",
            "-fno-builtin",
            "-fno-tree-loop-distribute-patterns",
            &include,
        ],
    );
    let differ = compare(&program);
    // fill, fill_words, find, compare, copy: counts set in `strings`.
    assert_eq!(differ.len(), 5, "{differ:?}");
}

#[test]
fn accesses_program() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = common::build(dir.path(), "accesses", 0);
    // Its REP counts are not constants: the tools agree.
    assert_eq!(compare(&program), []);
}
