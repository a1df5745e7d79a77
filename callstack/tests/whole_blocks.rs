//! `EventSink::block_executed` (a backend reporting whole blocks) gives the
//! same profile as the block and instruction events one by one.

use cgx_callstack::{Collector, Options};
use cgx_engine::{Arrival, Block, EventSink, Exit, Thread};

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

fn profile(whole: bool, options: Options) -> cgx_formats::CanonicalProfile {
    let Ok(mut collector) = Collector::new(options) else {
        panic!("default caches can be simulated");
    };
    let thread = Thread { pid: PID, tid: PID };
    for (block, instructions) in run() {
        if whole {
            collector.block_executed(thread, block, &instructions);
        } else {
            collector.block(thread, block);
            for (addr, len) in instructions {
                collector.instruction(thread, addr, len);
            }
        }
    }
    collector.thread_exited(thread);
    collector.process_exited(PID, Exit::Code(0));
    let dumps = collector.finish().expect("a profile");
    assert_eq!(dumps.len(), 1);
    cgx_formats::canonical(&dumps[0].profile)
}

#[test]
fn whole_blocks_give_the_same_profile_as_single_events() {
    for options in [
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
    ] {
        let one_by_one = profile(false, options.clone());
        let whole = profile(true, options);
        assert_eq!(whole, one_by_one);
        let totals = one_by_one.parts[0].totals.clone().unwrap_or_default();
        assert!(totals.first().is_some_and(|&ir| ir > 0), "{totals:?}");
    }
}
