//! The step backend's data-access and branch events against Valgrind: per
//! instruction, the Dr, Dw, Bc and Bi that Callgrind counts (and Bcm, Bim,
//! with Valgrind's predictors fed the reported outcomes and targets), and the
//! access sequence (kind, address, size) that Lackey traces.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use cgx_engine::{
    step, AccessKind, Block, BlockEvent, Command, DataAccess, EventSink, Lifecycle, RunOptions,
    Thread,
};
use cgx_formats::Record;
use common::{build, valgrind, Predictor};

/// Callgrind's per-instruction counts compared here.
const EVENTS: [&str; 7] = ["Ir", "Dr", "Dw", "Bc", "Bcm", "Bi", "Bim"];
const IR: usize = 0;
const DR: usize = 1;
const DW: usize = 2;
const BC: usize = 3;
const BCM: usize = 4;
const BI: usize = 5;
const BIM: usize = 6;

type Counts = [u64; EVENTS.len()];

/// Valgrind's branch predictors (DESIGN.md, "Facts"), per process.
struct Predictors {
    conditional: Predictor,
    targets: Vec<u64>,
}

impl Default for Predictors {
    fn default() -> Predictors {
        Predictors {
            conditional: Predictor::default(),
            targets: vec![0; 512],
        }
    }
}

impl Predictors {
    /// Whether the conditional branch at `addr` was mispredicted.
    fn conditional(&mut self, addr: u64, taken: bool) -> bool {
        self.conditional.mispredicted(addr, taken)
    }

    /// Whether the indirect branch at `addr` to `target` was mispredicted.
    fn indirect(&mut self, addr: u64, target: u64) -> bool {
        let slot = &mut self.targets[(addr & 0x1ff) as usize];
        let miss = *slot != target;
        *slot = target;
        miss
    }
}

/// One traced access: `L`, `S` or `M` (Lackey's letters), address, size.
type Traced = (char, u64, u32);

/// Counts per instruction as Callgrind charges them (a block's costs when
/// the thread's next block starts, so never the last block of a thread or
/// of a signal handler),
/// and the trace of every instruction's accesses.
#[derive(Default)]
struct Tally {
    predictors: HashMap<i32, Predictors>,
    charged: BTreeMap<u64, Counts>,
    pending: HashMap<Thread, Vec<(u64, Counts)>>,
    trace: Vec<(u64, Vec<Traced>)>,
    single_threaded: bool,
}

impl Tally {
    fn current(&mut self, thread: Thread) -> &mut Counts {
        let block = self.pending.entry(thread).or_default();
        &mut block
            .last_mut()
            .expect("an instruction before its events")
            .1
    }
}

impl EventSink for Tally {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, thread: Thread, _block: Block) {
        for (addr, counts) in self.pending.remove(&thread).unwrap_or_default() {
            let charged = self.charged.entry(addr).or_default();
            for (sum, count) in charged.iter_mut().zip(counts) {
                *sum += count;
            }
        }
    }

    fn instruction(&mut self, thread: Thread, addr: u64, _len: u8) {
        let mut counts = Counts::default();
        counts[IR] = 1;
        self.pending.entry(thread).or_default().push((addr, counts));
        self.trace.push((addr, Vec::new()));
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        match event {
            BlockEvent::Access(access) => self.data_access(thread, access),
            BlockEvent::Conditional(taken) => self.conditional_branch(thread, addr, taken),
            BlockEvent::Indirect(target) => self.indirect_branch(thread, addr, target),
            BlockEvent::Bus => {}
        }
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        if let Lifecycle::SignalReturned = event {
            self.signal_handler_returned(thread);
        }
    }
}

impl Tally {
    fn data_access(&mut self, thread: Thread, access: DataAccess) {
        // Callgrind counts a modify as a write (Cachegrind as a read).
        let (event, letter) = match access.kind {
            AccessKind::Read => (DR, 'L'),
            AccessKind::Write => (DW, 'S'),
            AccessKind::Modify => (DW, 'M'),
        };
        self.current(thread)[event] += 1;
        if let Some((_, accesses)) = self.trace.last_mut() {
            accesses.push((letter, access.addr, access.size));
        }
    }

    fn conditional_branch(&mut self, thread: Thread, addr: u64, taken: bool) {
        let miss = self
            .predictors
            .entry(thread.pid)
            .or_default()
            .conditional(addr, taken);
        let counts = self.current(thread);
        counts[BC] += 1;
        counts[BCM] += u64::from(miss);
    }

    fn signal_handler_returned(&mut self, thread: Thread) {
        // Callgrind leaves the signal frame without charging the handler's
        // last block (the one that calls rt_sigreturn).
        self.pending.remove(&thread);
    }

    fn indirect_branch(&mut self, thread: Thread, addr: u64, target: u64) {
        let miss = self
            .predictors
            .entry(thread.pid)
            .or_default()
            .indirect(addr, target);
        let counts = self.current(thread);
        counts[BI] += 1;
        counts[BIM] += u64::from(miss);
    }
}

/// Callgrind's counts per instruction address (all parts, functions and
/// contexts summed).
fn callgrind_counts(dir: &Path, program: &Path) -> BTreeMap<u64, Counts> {
    let out = dir.join("callgrind.out");
    valgrind(
        "callgrind",
        &[
            format!("--callgrind-out-file={}", out.display()),
            "--cache-sim=yes".into(),
            "--branch-sim=yes".into(),
            "--dump-instr=yes".into(),
        ],
        program,
    );
    let profile = cgx_formats::read_path(&out).expect("cgx-formats reads Callgrind's file");
    let mut counts: BTreeMap<u64, Counts> = BTreeMap::new();
    for part in &profile.parts {
        let columns: Vec<Option<usize>> = EVENTS
            .iter()
            .map(|name| part.events.index_of(name))
            .collect();
        for (_, records) in part.functions() {
            records.for_each(part.events.len(), |record| {
                if let Record::Cost { at, costs, .. } = record {
                    let sums = counts.entry(at.instr).or_default();
                    for (sum, column) in sums.iter_mut().zip(&columns) {
                        *sum += column.and_then(|c| costs.get(c)).copied().unwrap_or(0);
                    }
                }
            });
        }
    }
    counts
}

/// Lackey's access trace (`--trace-mem=yes`, run as Callgrind runs VEX).
fn lackey_trace(dir: &Path, program: &Path) -> Vec<(u64, Vec<Traced>)> {
    let log = dir.join("lackey.log");
    valgrind(
        "lackey",
        &[
            "--trace-mem=yes".into(),
            "--vex-guest-chase=no".into(),
            "--vex-iropt-unroll-thresh=0".into(),
            format!("--log-file={}", log.display()),
        ],
        program,
    );
    let text = std::fs::read_to_string(&log).expect("lackey's log");
    let mut trace: Vec<(u64, Vec<Traced>)> = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with("==")) {
        let mut fields = line.split_whitespace();
        let (Some(kind), Some(place)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((addr, size)) = place.split_once(',') else {
            continue;
        };
        let addr = u64::from_str_radix(addr, 16).expect("a hex address");
        let size: u32 = size.parse().expect("a size");
        match kind {
            "I" => trace.push((addr, Vec::new())),
            "L" | "S" | "M" => {
                let letter = kind.chars().next().unwrap_or('?');
                if let Some((_, accesses)) = trace.last_mut() {
                    accesses.push((letter, addr, size));
                }
            }
            _ => {}
        }
    }
    trace
}

/// Stack addresses differ between Valgrind and a native run: those above the
/// static program (above 256 MiB) become offsets from the trace's first one,
/// or all the same when `stack_offsets` is false (a signal frame's size is
/// the kernel's natively and Valgrind's own under Valgrind).
fn normalized(trace: &[(u64, Vec<Traced>)], stack_offsets: bool) -> Vec<(u64, Vec<Traced>)> {
    const STATIC_END: u64 = 0x1000_0000;
    let base = trace
        .iter()
        .flat_map(|(_, accesses)| accesses)
        .map(|&(_, addr, _)| addr)
        .find(|&addr| addr >= STATIC_END)
        .unwrap_or(0);
    trace
        .iter()
        .map(|(at, accesses)| {
            let accesses = accesses
                .iter()
                .map(|&(kind, addr, size)| {
                    let addr = if addr >= STATIC_END && !stack_offsets {
                        u64::MAX
                    } else if addr >= STATIC_END {
                        addr.wrapping_sub(base) ^ (1 << 63)
                    } else {
                        addr
                    };
                    (kind, addr, size)
                })
                .collect();
            (*at, accesses)
        })
        .collect()
}

/// Runs `name` under the step backend and Valgrind; compares every
/// instruction's counts with Callgrind's, and (single-threaded) the access
/// trace with Lackey's. Returns the number of instructions compared.
fn compare(name: &str) -> usize {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), name, 0);
    let mut tally = Tally {
        single_threaded: name != "threads",
        ..Tally::default()
    };
    let started = Instant::now();
    let outcome = step::run(&Command::new(&program), &RunOptions::default(), &mut tally)
        .expect("the run succeeds");
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{name}: {} instructions in {seconds:.2} s ({:.0}/s), exit {:?}",
        outcome.instructions,
        outcome.instructions as f64 / seconds,
        outcome.exit
    );
    let valgrind_counts = callgrind_counts(dir.path(), &program);
    let compared: Vec<usize> = if tally.single_threaded {
        (0..EVENTS.len()).collect()
    } else {
        // The predictors' state depends on how threads interleave.
        vec![IR, DR, DW, BC, BI]
    };
    let mut addresses: Vec<u64> = valgrind_counts
        .keys()
        .chain(tally.charged.keys())
        .copied()
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    let names: Vec<&str> = compared.iter().map(|&e| EVENTS[e]).collect();
    eprintln!("{name}: per instruction, cgx / callgrind, {names:?}");
    let mut differences = Vec::new();
    for addr in &addresses {
        let ours = tally.charged.get(addr).copied().unwrap_or_default();
        let theirs = valgrind_counts.get(addr).copied().unwrap_or_default();
        let pick = |counts: &Counts| compared.iter().map(|&e| counts[e]).collect::<Vec<_>>();
        let (ours, theirs) = (pick(&ours), pick(&theirs));
        let mark = if ours == theirs { "" } else { "  <-- differs" };
        eprintln!("  {addr:#x} {ours:?} / {theirs:?}{mark}");
        if ours != theirs {
            differences.push(*addr);
        }
    }
    let totals = |counts: &BTreeMap<u64, Counts>| {
        let mut sum = Counts::default();
        for c in counts.values() {
            for (s, v) in sum.iter_mut().zip(c) {
                *s += v;
            }
        }
        sum
    };
    eprintln!(
        "{name}: totals {EVENTS:?} cgx {:?} callgrind {:?}",
        totals(&tally.charged),
        totals(&valgrind_counts)
    );
    assert!(
        differences.is_empty(),
        "{name}: {} instructions differ: {differences:x?}",
        differences.len()
    );
    if tally.single_threaded {
        let stack_offsets = name != "handler";
        let ours = normalized(&tally.trace, stack_offsets);
        let theirs = normalized(&lackey_trace(dir.path(), &program), stack_offsets);
        let accesses: usize = theirs.iter().map(|(_, a)| a.len()).sum();
        eprintln!(
            "{name}: lackey traced {} instructions with {accesses} accesses",
            theirs.len()
        );
        assert_eq!(ours.len(), theirs.len(), "{name}: instructions traced");
        for (index, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(ours, theirs, "{name}: instruction {index} of the trace");
        }
    }
    addresses.len()
}

#[test]
fn accesses_and_branches_equal_valgrinds() {
    let compared = compare("accesses");
    assert!(compared > 150, "{compared}");
}

#[test]
fn tiny_equals_valgrind() {
    compare("tiny");
}

#[test]
fn handler_equals_valgrind() {
    compare("handler");
}

#[test]
fn threads_equal_valgrind() {
    compare("threads");
}
