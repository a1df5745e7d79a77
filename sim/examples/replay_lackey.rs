//! Replays a memory trace written by Valgrind's Lackey through the simulators and
//! prints the totals, to compare with Cachegrind or Callgrind run on the same
//! program:
//!
//! ```sh
//! valgrind --tool=lackey --trace-mem=yes --log-file=trace.txt PROGRAM
//! cargo run --release -p cgx-sim --example replay_lackey -- trace.txt
//! cargo run --release -p cgx-sim --example replay_lackey -- trace.txt --cacheuse
//! ```
//!
//! Lackey lines: `I  addr,size` (instruction), ` L`/` S`/` M addr,size` (load,
//! store, modify). A modify is one data access, counted as `Dr` (Cachegrind's
//! rule; Callgrind counts it as `Dw`). The caches are auto-detected like Valgrind.
//! With `--cacheuse`, the owner of each access is its instruction's address and
//! the totals of the four cache-use events are printed as well.

use std::io::{BufRead, BufReader};

use cgx_sim::{cpuid, Hierarchy, Outcome, UseEvent, UseHierarchy};

#[derive(Default)]
struct Totals {
    ir: u64,
    i1mr: u64,
    ilmr: u64,
    dr: u64,
    d1mr: u64,
    dlmr: u64,
    dw: u64,
    d1mw: u64,
    dlmw: u64,
    modify: u64,
}

fn count(outcome: Outcome, l1: &mut u64, ll: &mut u64) {
    *l1 += u64::from(outcome.l1_miss());
    *ll += u64::from(outcome.ll_miss());
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: replay_lackey TRACE [--cacheuse]")?;
    let cacheuse = args.iter().any(|a| a == "--cacheuse");
    let detection = cpuid::detect();
    let config = detection.config;
    for line in config.desc_lines(cgx_sim::DescStyle::Callgrind) {
        println!("{line}");
    }
    let mut plain = Hierarchy::new(&config).map_err(|(l, e)| format!("{l}: {e}"))?;
    let mut used = UseHierarchy::new(&config)?;
    let mut use_totals = [0u64; 4];
    let mut t = Totals::default();
    let mut current_instr = 0u64;
    let reader = BufReader::new(std::fs::File::open(path)?);
    for line in reader.lines() {
        let line = line?;
        let (kind, rest) = match line.get(..3) {
            Some("I  ") => ('I', &line[3..]),
            Some(" L ") => ('L', &line[3..]),
            Some(" S ") => ('S', &line[3..]),
            Some(" M ") => ('M', &line[3..]),
            _ => continue,
        };
        let Some((addr, size)) = rest.split_once(',') else {
            continue;
        };
        let addr = u64::from_str_radix(addr.trim(), 16)?;
        let size: u32 = size.trim().parse()?;
        let outcome = match (kind, cacheuse) {
            ('I', false) => plain.fetch(addr, size),
            ('I', true) => {
                current_instr = addr;
                used.fetch(addr, size, addr)
            }
            (_, false) => plain.read(addr, size),
            (_, true) => used.data(addr, size, current_instr),
        };
        match kind {
            'I' => {
                t.ir += 1;
                count(outcome, &mut t.i1mr, &mut t.ilmr);
            }
            'S' => {
                t.dw += 1;
                count(outcome, &mut t.d1mw, &mut t.dlmw);
            }
            _ => {
                t.dr += 1;
                t.modify += u64::from(kind == 'M');
                count(outcome, &mut t.d1mr, &mut t.dlmr);
            }
        }
        for c in used.drain_charges() {
            use_totals[c.event as usize] += c.amount;
        }
    }
    used.flush();
    for c in used.drain_charges() {
        use_totals[c.event as usize] += c.amount;
    }
    println!("events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw");
    println!(
        "totals: {} {} {} {} {} {} {} {} {}",
        t.ir, t.i1mr, t.ilmr, t.dr, t.d1mr, t.dlmr, t.dw, t.d1mw, t.dlmw
    );
    println!("(of Dr, {} were modify accesses)", t.modify);
    if cacheuse {
        let names = [
            UseEvent::AcCost1,
            UseEvent::SpLoss1,
            UseEvent::AcCost2,
            UseEvent::SpLoss2,
        ]
        .map(UseEvent::name);
        println!("events: {}", names.join(" "));
        println!(
            "totals: {} {} {} {}",
            use_totals[0], use_totals[1], use_totals[2], use_totals[3]
        );
    }
    Ok(())
}
