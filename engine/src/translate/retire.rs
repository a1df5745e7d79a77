//! Dead translations waiting for the threads that may be in them to
//! leave, before their space is written again (`Cache::retire`).
//!
//! A translation dropped while other threads run may still be executed by
//! a thread that entered it before: its space is reused only once each
//! such thread has been seen stopped (or blocked in a system call)
//! elsewhere, with no signal handler returning into it. A thread that has
//! ended is elsewhere.

use std::ops::Range;

/// Dead translations and the threads each waits for.
#[derive(Clone, Debug, Default)]
pub(super) struct Retiring {
    waiting: Vec<(u32, Range<u64>, Vec<i32>)>,
}

impl Retiring {
    /// Whether no translation waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Translation `id`, taking `space`, waits for `threads` (not empty).
    pub fn wait(&mut self, id: u32, space: Range<u64>, threads: Vec<i32>) {
        self.waiting.push((id, space, threads));
    }

    /// The threads some translation waits for, each once.
    pub fn threads(&self) -> Vec<i32> {
        let mut threads: Vec<i32> = self
            .waiting
            .iter()
            .flat_map(|(_, _, threads)| threads.iter().copied())
            .collect();
        threads.sort_unstable();
        threads.dedup();
        threads
    }

    /// Thread `tid` was seen with its code at the addresses `at` (where it
    /// is and where its signal handlers return; none once it has ended):
    /// it has left every waiting translation that holds none of them.
    /// Returns the translations no thread holds any more.
    pub fn seen(&mut self, tid: i32, at: impl Iterator<Item = u64> + Clone) -> Vec<u32> {
        let mut left = Vec::new();
        self.waiting.retain_mut(|(id, space, threads)| {
            if !at.clone().any(|addr| space.contains(&addr)) {
                threads.retain(|&thread| thread != tid);
            }
            if threads.is_empty() {
                left.push(*id);
                return false;
            }
            true
        });
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_translation_is_left_once_every_thread_was_seen_elsewhere() {
        let mut retiring = Retiring::default();
        retiring.wait(7, 0x1000..0x1100, vec![11, 12]);
        retiring.wait(8, 0x2000..0x2100, vec![12]);
        assert_eq!(retiring.threads(), vec![11, 12]);
        // 11 is still inside 7.
        assert_eq!(retiring.seen(11, [0x1050].into_iter()), Vec::<u32>::new());
        // 12 is in 7, its handler returns into 8: it left neither.
        assert_eq!(
            retiring.seen(12, [0x1000, 0x20ff].into_iter()),
            Vec::<u32>::new()
        );
        // 12 elsewhere: 8 is free, 7 still waits for 11.
        assert_eq!(retiring.seen(12, [0x1100].into_iter()), vec![8]);
        assert!(!retiring.is_empty());
        // 11 has ended.
        assert_eq!(retiring.seen(11, std::iter::empty()), vec![7]);
        assert!(retiring.is_empty());
    }
}
