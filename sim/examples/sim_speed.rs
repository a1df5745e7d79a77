//! Speed of the simulators on a synthetic but realistic access mix: prints
//! accesses per second for the plain hierarchy ([`Hierarchy`], Cachegrind and
//! `--cache-sim=yes`), the cache-use hierarchy ([`UseHierarchy`], `--cacheuse=yes`)
//! and the conditional branch predictor.
//!
//! ```sh
//! cargo run --release -p cgx-sim --example sim_speed [-- MILLIONS_OF_INSTRUCTIONS]
//! ```
//!
//! The mix, per instruction: one fetch (lengths 1–8 bytes, straight-line runs of
//! ~12 instructions, 90% of jumps inside a 16 KiB hot region of a 1 MiB text), and
//! 0.45 data accesses (2:1 reads to writes; 85% within 4 KiB of a moving stack
//! pointer, 13% random in a 256 KiB heap, 2% streaming over 64 MiB), sizes 1–16
//! bytes. That gives L1 miss rates of a few per cent, like typical programs.
//! The caches are those auto-detected on this machine. The trace is generated
//! before timing.

use std::time::Instant;

use cgx_sim::{cpuid, CondPredictor, Hierarchy, UseHierarchy};

/// xorshift64*: deterministic and cheap.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy)]
enum Access {
    Fetch(u64, u32),
    Read(u64, u32),
    Write(u64, u32),
}

fn trace(instructions: usize) -> Vec<Access> {
    const TEXT: u64 = 0x40_0000;
    const STACK: u64 = 0x7ffe_0000_0000;
    const HEAP: u64 = 0x5555_0000_0000;
    const STREAM: u64 = 0x7f00_0000_0000;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(instructions * 3 / 2);
    let (mut pc, mut sp, mut stream) = (TEXT, STACK, STREAM);
    let sizes = [1u32, 2, 4, 4, 8, 8, 8, 16];
    for _ in 0..instructions {
        let len = 1 + rng.below(8) as u32;
        out.push(Access::Fetch(pc, len));
        pc += u64::from(len);
        if rng.below(12) == 0 {
            pc = TEXT
                + if rng.below(100) < 98 {
                    rng.below(16 << 10)
                } else {
                    rng.below(1 << 20)
                };
        }
        if rng.below(100) < 45 {
            let size = sizes[rng.below(8) as usize];
            let where_ = rng.below(100);
            let addr = if where_ < 85 {
                if rng.below(200) == 0 {
                    sp = STACK - rng.below(64 << 10) / 8 * 8;
                }
                sp - rng.below(4096)
            } else if where_ < 98 {
                HEAP + rng.below(256 << 10)
            } else {
                stream = STREAM + (stream - STREAM + 8) % (64 << 20);
                stream
            };
            out.push(if rng.below(3) < 2 {
                Access::Read(addr, size)
            } else {
                Access::Write(addr, size)
            });
        }
    }
    out
}

fn report(what: &str, accesses: usize, seconds: f64, misses: u64) {
    println!(
        "{what:<28} {:>7.1} M accesses/s  ({accesses} accesses in {seconds:.3} s, {misses} L1 misses)",
        accesses as f64 / seconds / 1e6
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let millions: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 20,
    };
    let config = cpuid::detect().config;
    for line in config.desc_lines(cgx_sim::DescStyle::Callgrind) {
        println!("{line}");
    }
    let accesses = trace(millions * 1_000_000);
    let n = accesses.len();

    let mut plain = Hierarchy::new(&config).map_err(|(l, e)| format!("{l}: {e}"))?;
    let start = Instant::now();
    let mut misses = 0u64;
    for a in &accesses {
        let outcome = match *a {
            Access::Fetch(addr, len) => plain.fetch(addr, len),
            Access::Read(addr, size) => plain.read(addr, size),
            Access::Write(addr, size) => plain.write(addr, size),
        };
        misses += u64::from(outcome.l1_miss());
    }
    report(
        "hierarchy (--cache-sim)",
        n,
        start.elapsed().as_secs_f64(),
        misses,
    );

    let mut used = UseHierarchy::new(&config)?;
    let start = Instant::now();
    let (mut misses, mut charged, mut owner) = (0u64, 0u64, 0u64);
    for a in &accesses {
        let outcome = match *a {
            Access::Fetch(addr, len) => {
                owner = addr;
                used.fetch(addr, len, owner)
            }
            Access::Read(addr, size) | Access::Write(addr, size) => used.data(addr, size, owner),
        };
        misses += u64::from(outcome.l1_miss());
        if used.pending_charges().len() >= 4096 {
            charged += used.drain_charges().map(|c| c.amount).sum::<u64>();
        }
    }
    used.flush();
    charged += used.drain_charges().map(|c| c.amount).sum::<u64>();
    report(
        "cache-use (--cacheuse)",
        n,
        start.elapsed().as_secs_f64(),
        misses,
    );
    println!("{:<28} (sum of all charges: {charged})", "");

    let mut cond = CondPredictor::new();
    let mut rng = Rng(7);
    let branches: Vec<(u64, bool)> = (0..n)
        .map(|_| (0x40_0000 + rng.below(4096), rng.below(4) != 0))
        .collect();
    let start = Instant::now();
    let mut mispredicts = 0u64;
    for &(addr, taken) in &branches {
        mispredicts += u64::from(cond.predict(addr, taken));
    }
    println!(
        "{:<28} {:>7.1} M branches/s  ({mispredicts} mispredicts)",
        "conditional predictor",
        n as f64 / start.elapsed().as_secs_f64() / 1e6
    );
    Ok(())
}
