//! End-to-end check of the public API on a small hand-made trace, with the expected
//! Cachegrind counts derived by hand (Valgrind's default x86-64 caches: I1 = D1 =
//! 64 KiB, 2-way, 64 B lines, 512 sets; LL = 256 KiB, 8-way, 64 B lines, 512 sets).

use cgx_sim::{CachesConfig, CondPredictor, Hierarchy, IndirectPredictor, Outcome};

#[derive(Default, Debug, PartialEq)]
struct Counts {
    ir: u64,
    i1mr: u64,
    ilmr: u64,
    dr: u64,
    d1mr: u64,
    dlmr: u64,
    dw: u64,
    d1mw: u64,
    dlmw: u64,
    bc: u64,
    bcm: u64,
}

fn add(o: Outcome, n: &mut u64, l1: &mut u64, ll: &mut u64) {
    *n += 1;
    *l1 += u64::from(o.l1_miss());
    *ll += u64::from(o.ll_miss());
}

#[test]
fn small_loop_trace() {
    let mut h = Hierarchy::new(&CachesConfig::DEFAULT).unwrap();
    let mut bp = CondPredictor::new();
    let mut c = Counts::default();
    // A 3-instruction loop at 0x401000, run 4 times: load 0x601000, store to
    // 0x601040 + 8i, conditional back edge at 0x401008 (taken 3 times).
    for i in 0..4u64 {
        for pc in [0x401000, 0x401004, 0x401008] {
            let o = h.fetch(pc, 4);
            add(o, &mut c.ir, &mut c.i1mr, &mut c.ilmr);
            match pc {
                0x401000 => add(h.read(0x601000, 8), &mut c.dr, &mut c.d1mr, &mut c.dlmr),
                0x401004 => add(
                    h.write(0x601040 + 8 * i, 8),
                    &mut c.dw,
                    &mut c.d1mw,
                    &mut c.dlmw,
                ),
                _ => {
                    c.bc += 1;
                    c.bcm += u64::from(bp.predict(pc, i < 3));
                }
            }
        }
    }
    // Two lines 32 KiB apart share 0x601000's D1 set and evict it (2 ways); LL
    // (8 ways) keeps it.
    for addr in [0x601000 + 0x8000, 0x601000 + 0x10000, 0x601000] {
        add(h.read(addr, 8), &mut c.dr, &mut c.d1mr, &mut c.dlmr);
    }
    // Straddles 0x601040 (hit) and 0x601080 (miss): one access, one miss.
    add(h.read(0x60107c, 8), &mut c.dr, &mut c.d1mr, &mut c.dlmr);
    // An fxsave-sized write is clamped to 64 bytes: only line 0x602000 is loaded.
    add(h.write(0x602000, 512), &mut c.dw, &mut c.d1mw, &mut c.dlmw);
    add(h.read(0x602040, 1), &mut c.dr, &mut c.d1mr, &mut c.dlmr);

    assert_eq!(
        c,
        Counts {
            ir: 12,
            i1mr: 1,
            ilmr: 1,
            dr: 9,
            d1mr: 6,
            dlmr: 5,
            dw: 5,
            d1mw: 2,
            dlmw: 2,
            bc: 4,
            // History 0, 1, 3 meet fresh counters (predicted not taken) while the
            // branch is taken; the final not-taken is predicted right.
            bcm: 3,
        }
    );
}

#[test]
fn indirect_calls_alternating_targets() {
    let mut p = IndirectPredictor::new();
    let misses: u64 = [0x5000u64, 0x5000, 0x6000, 0x5000, 0x5000]
        .iter()
        .map(|&t| u64::from(p.predict(0x401234, t)))
        .sum();
    // Miss (stored 0), hit, miss, miss, hit.
    assert_eq!(misses, 3);
}
