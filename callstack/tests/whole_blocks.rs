//! `EventSink::block_executed` (a backend reporting whole blocks) gives the
//! same profile as the block and instruction events one by one.

use cgx_callstack::{Collector, Options};
use cgx_engine::{Arrival, Block, EventSink, Exit, Lifecycle, Thread};

/// A process id no process has: its symbols are unknown, which the
/// comparison does not mind.
const PID: i32 = i32::MAX - 7;

/// Blocks of a made-up run: `main` at 0x1000 calls `f` at 0x2000 twice; `f`
/// has two blocks and returns.
fn run() -> Vec<(Block, Vec<(u64, u8)>)> {
    let block = |addr, sp, arrival| Block { addr, sp, arrival };
    let main = vec![(0x1000, 4), (0x1004, 5)];
    let f_first = vec![(0x2000, 2), (0x2002, 3), (0x2005, 2)];
    let f_second = vec![(0x2010, 1)];
    let main_again = vec![(0x1009, 4), (0x100d, 5)];
    let main_end = vec![(0x1012, 2), (0x1014, 2)];
    vec![
        (block(0x1000, 0x8000, Arrival::Start), main),
        (block(0x2000, 0x7ff8, Arrival::Call), f_first.clone()),
        (
            block(0x2010, 0x7ff8, Arrival::Jump { conditional: true }),
            f_second.clone(),
        ),
        (block(0x1009, 0x8000, Arrival::Return), main_again),
        (block(0x2000, 0x7ff8, Arrival::Call), f_first),
        (
            block(0x2010, 0x7ff8, Arrival::Jump { conditional: true }),
            f_second,
        ),
        (block(0x1012, 0x8000, Arrival::Return), main_end),
    ]
}

/// What happens in a made-up run: blocks, and client requests between them.
enum Step {
    Block(Block, Vec<(u64, u8)>),
    /// `CALLGRIND_ZERO_STATS`.
    Zero,
}

/// The blocks of [`run`] as steps.
fn blocks() -> Vec<Step> {
    run()
        .into_iter()
        .map(|(block, instructions)| Step::Block(block, instructions))
        .collect()
}

/// A run whose blocks change: `main` loops over a block at 0x3000 that runs
/// whole, is left half-way, changes its code (other instructions at the
/// same address), and runs whole again; the costs are zeroed while a whole
/// run is pending; the last block is never charged.
fn changing_blocks() -> Vec<Step> {
    let block = |addr, arrival| Block {
        addr,
        sp: 0x8000,
        arrival,
    };
    let jump = Arrival::Jump { conditional: true };
    let loop_body = vec![(0x3000, 2), (0x3002, 3), (0x3005, 2)];
    let half = vec![(0x3000, 2)];
    let changed = vec![(0x3000, 4), (0x3004, 1), (0x3005, 2), (0x3007, 2)];
    let back = vec![(0x3100, 2), (0x3102, 2)];
    let mut steps = vec![Step::Block(block(0x3100, Arrival::Start), back.clone())];
    for (round, body) in [
        &loop_body, &loop_body, &half, &loop_body, &changed, &changed, &loop_body,
    ]
    .into_iter()
    .enumerate()
    {
        steps.push(Step::Block(block(0x3000, jump), body.clone()));
        if round == 1 {
            // A whole run of a known block is pending.
            steps.push(Step::Zero);
        }
        steps.push(Step::Block(
            block(0x3100, Arrival::FallThrough),
            back.clone(),
        ));
    }
    steps.push(Step::Block(block(0x3000, jump), loop_body));
    steps
}

fn profile(steps: &[Step], whole: bool, options: Options) -> cgx_formats::CanonicalProfile {
    let Ok(mut collector) = Collector::new(options) else {
        panic!("default caches can be simulated");
    };
    let thread = Thread { pid: PID, tid: PID };
    for step in steps {
        match step {
            Step::Block(block, instructions) if whole => {
                collector.block_executed(thread, *block, instructions);
            }
            Step::Block(block, instructions) => {
                collector.block(thread, *block);
                for &(addr, len) in instructions {
                    collector.instruction(thread, addr, len);
                }
            }
            Step::Zero => {
                collector.client_request(thread, [0x4354_0001, 0, 0, 0, 0, 0], 0);
            }
        }
    }
    collector.lifecycle(thread, Lifecycle::ThreadExited);
    let process = Thread::of_process(PID);
    collector.lifecycle(process, Lifecycle::ProcessExited(Exit::Code(0)));
    let dumps = collector.finish().expect("a profile");
    assert_eq!(dumps.len(), 1);
    cgx_formats::canonical(&dumps[0].profile)
}

/// The option sets compared.
fn option_sets() -> Vec<Options> {
    vec![
        Options::default(),
        Options {
            dump_instr: true,
            collect_jumps: true,
            ..Options::default()
        },
        Options {
            cachegrind: true,
            ..Options::default()
        },
        Options {
            cachegrind: true,
            dump_instr: true,
            ..Options::default()
        },
    ]
}

#[test]
fn whole_blocks_give_the_same_profile_as_single_events() {
    for options in option_sets() {
        let one_by_one = profile(&blocks(), false, options.clone());
        let whole = profile(&blocks(), true, options);
        assert_eq!(whole, one_by_one);
        let totals = one_by_one.parts[0].totals.clone().unwrap_or_default();
        assert!(totals.first().is_some_and(|&ir| ir > 0), "{totals:?}");
    }
}

#[test]
fn changing_blocks_give_the_same_profile_as_single_events() {
    for options in option_sets() {
        let one_by_one = profile(&changing_blocks(), false, options.clone());
        let whole = profile(&changing_blocks(), true, options);
        assert_eq!(whole, one_by_one);
        let totals = one_by_one.parts[0].totals.clone().unwrap_or_default();
        assert!(totals.first().is_some_and(|&ir| ir > 0), "{totals:?}");
    }
}
