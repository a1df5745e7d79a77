//! The hardware prefetcher of Callgrind's `--simulate-hwpref=yes`: sequential
//! streams of LL lines, one per 4 KiB page slot, detected on the accesses
//! that reach LL.
//!
//! Rules (Valgrind 3.19): the stream of an address is `(addr >> 12) mod 8`;
//! its block is `addr >> log2(LL line)`, kept in 32 bits. Each stream keeps
//! its last block and a signed run length. An access to the stream's last
//! block changes nothing. Otherwise, with no run, the next block up starts
//! an upward run (1) and the next block down a downward one (−1); in a run,
//! the next block in its direction lengthens it, anything else ends it (0).
//! Once a run is 2 or longer, each access that lengthens it prefetches the
//! line 5 lines ahead of the address in its direction. The last block is
//! then the accessed one.

/// How many streams are tracked.
const STREAMS: usize = 8;

/// log2 of the page size that picks a stream.
const PAGE_BITS: u32 = 12;

/// How many lines ahead a prefetch reaches.
const DISTANCE: u64 = 5;

/// The prefetcher's state: per stream, the last block and the run length.
#[derive(Clone, Debug)]
pub struct Prefetcher {
    line_bits: u32,
    line_size: u64,
    last_block: [u32; STREAMS],
    run: [i32; STREAMS],
    /// Prefetches made upward and downward.
    counts: (u64, u64),
}

impl Prefetcher {
    /// A cleared prefetcher for LL lines of `line_size` bytes (a power of
    /// two).
    pub fn new(line_size: u32) -> Prefetcher {
        Prefetcher {
            line_bits: line_size.trailing_zeros(),
            line_size: u64::from(line_size),
            last_block: [0; STREAMS],
            run: [0; STREAMS],
            counts: (0, 0),
        }
    }

    /// Forgets every stream (the counts stay).
    pub fn clear(&mut self) {
        self.last_block = [0; STREAMS];
        self.run = [0; STREAMS];
    }

    /// An access at `addr` reaching LL: the address of the line to
    /// prefetch into LL, if any.
    pub fn observe(&mut self, addr: u64) -> Option<u64> {
        let stream = ((addr >> PAGE_BITS) % STREAMS as u64) as usize;
        // Valgrind keeps blocks in 32 bits.
        let block = (addr >> self.line_bits) as u32;
        let (last, run) = (self.last_block[stream], self.run[stream]);
        if block == last {
            return None;
        }
        self.last_block[stream] = block;
        let up = last.wrapping_add(1) == block;
        let down = last.wrapping_sub(1) == block;
        let ahead = DISTANCE * self.line_size;
        let (run, prefetch) = match run {
            0 if up => (1, None),
            0 if down => (-1, None),
            0 => (0, None),
            1.. if up => (run + 1, (run + 1 >= 2).then(|| addr.wrapping_add(ahead))),
            ..=-1 if down => (run - 1, (run - 1 <= -2).then(|| addr.wrapping_sub(ahead))),
            _ => (0, None),
        };
        self.run[stream] = run;
        match prefetch {
            Some(target) if target > addr => self.counts.0 += 1,
            Some(_) => self.counts.1 += 1,
            None => {}
        }
        prefetch
    }

    /// How many prefetches were made upward and downward (Valgrind's
    /// `Prefetch Up:` and `Prefetch Down:`).
    pub fn counts(&self) -> (u64, u64) {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upward_stream_prefetches_from_its_third_block() {
        let mut p = Prefetcher::new(64);
        let base = 0x10_0000;
        assert_eq!(p.observe(base), None); // from block 0: no run
        assert_eq!(p.observe(base + 64), None); // run 1
                                                // Run 2: five lines ahead of the address.
        assert_eq!(p.observe(base + 128 + 8), Some(base + 128 + 8 + 5 * 64));
        // The same block again changes nothing.
        assert_eq!(p.observe(base + 128), None);
        assert_eq!(p.observe(base + 192), Some(base + 192 + 320));
        assert_eq!(p.counts(), (2, 0));
    }

    #[test]
    fn a_downward_stream_prefetches_below() {
        let mut p = Prefetcher::new(64);
        let base = 0x10_0f00;
        p.observe(base);
        assert_eq!(p.observe(base - 64), None); // run -1
        assert_eq!(p.observe(base - 128), Some(base - 128 - 320)); // run -2
        assert_eq!(p.counts(), (0, 1));
    }

    #[test]
    fn a_break_in_the_sequence_ends_the_run() {
        let mut p = Prefetcher::new(64);
        let base = 0x10_0000;
        p.observe(base);
        p.observe(base + 64);
        assert!(p.observe(base + 128).is_some());
        // A jump ends the run; the next block up only starts a new one.
        assert_eq!(p.observe(base + 1024), None);
        assert_eq!(p.observe(base + 1088), None);
        assert!(p.observe(base + 1152).is_some());
        // Going down in an upward run ends it too, without starting one.
        assert_eq!(p.observe(base + 1088), None);
        assert_eq!(p.observe(base + 1024), None); // run -1 from 0
        assert!(p.observe(base + 960).is_some()); // run -2
    }

    #[test]
    fn streams_are_per_page_slot() {
        let mut p = Prefetcher::new(64);
        // Pages 0x100 and 0x101 are streams 0 and 1: interleaved runs do
        // not disturb each other.
        let (a, b) = (0x10_0000, 0x10_1000);
        for i in 0..2 {
            assert_eq!(p.observe(a + i * 64), None);
            assert_eq!(p.observe(b + i * 64), None);
        }
        assert!(p.observe(a + 128).is_some());
        assert!(p.observe(b + 128).is_some());
        // Page 0x108 is stream 0 again: it breaks a's run.
        assert_eq!(p.observe(0x10_8000), None);
        assert_eq!(p.observe(a + 192), None);
    }

    #[test]
    fn blocks_are_kept_in_32_bits_and_clear_forgets_streams() {
        let mut p = Prefetcher::new(64);
        // Block 0 is every stream's last block at the start: block 1 (in
        // page 0, stream 0) starts a run.
        assert_eq!(p.observe(64), None);
        assert!(p.observe(128).is_some());
        p.clear();
        assert_eq!(p.observe(64), None);
        assert!(p.observe(128).is_some());
        // Blocks 2^32 apart are the same block: no change.
        let far = 128 + (1u64 << 38);
        assert_eq!(p.observe(far), None);
        assert!(p.observe(192).is_some());
    }
}
