//! Where the tracee's threads run. A ptrace stop costs several times more
//! when the stopped thread and the tracer are on different processors:
//! the wake-ups cross processors (on a 2-vCPU VM about 75 µs a stop,
//! against 5 µs on one processor). So the thread the tracer last resumed
//! to wait for it runs on the tracer's processor ([`Place::WithTracer`],
//! one thread at most: [`Pinned`]); a thread that runs while the tracer
//! replays its full buffer half (a hand-off), and every other thread,
//! runs on the processors it has of its own ([`Place::Own`]: what the
//! program set, or inherited, as without cgx): threads that compute at
//! once keep their own sets, all but the one the tracer waits for.
//!
//! The program sees its own sets only: `sched_getaffinity` and
//! `sched_setaffinity` trap before the call (`invalidate`) and the thread
//! gets its own set for it ([`Placement::own`]; no other thread is with
//! the tracer while one is stopped). A thread's own set is read again
//! each time it goes to the tracer's processor, so what the program set
//! meanwhile (for itself or another thread) is its own. A thread or
//! process a pinned thread creates starts with the pin and its creator's
//! own set; a process detached gets its own set first.

use std::mem::size_of;

/// A set of processors (`cpu_set_t`).
#[derive(Clone, Copy)]
pub(super) struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set with the processors `cpus`.
    pub fn of(cpus: &[usize]) -> CpuSet {
        // SAFETY: cpu_set_t is plain data, all zeroes an empty set.
        let mut set = CpuSet(unsafe { std::mem::zeroed() });
        for &cpu in cpus {
            if cpu < libc::CPU_SETSIZE as usize {
                // SAFETY: `cpu` is within the set.
                unsafe { libc::CPU_SET(cpu, &mut set.0) };
            }
        }
        set
    }

    /// Whether processor `cpu` is in the set.
    pub fn has(&self, cpu: usize) -> bool {
        // SAFETY: `cpu` is within the set.
        cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }

    /// The processors thread `tid` may run on, if it can be read.
    fn of_thread(tid: i32) -> Option<CpuSet> {
        let mut set = CpuSet::of(&[]);
        // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes
        // into the set.
        let read =
            unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set.0) };
        (read == 0).then_some(set)
    }

    /// Lets thread `tid` run on the processors of the set; whether it
    /// took.
    fn give(&self, tid: i32) -> bool {
        // SAFETY: the kernel reads `size_of::<cpu_set_t>()` bytes of the set.
        unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &self.0) == 0 }
    }
}

impl PartialEq for CpuSet {
    fn eq(&self, other: &CpuSet) -> bool {
        // SAFETY: both are whole sets.
        unsafe { libc::CPU_EQUAL(&self.0, &other.0) }
    }
}

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus = (0..libc::CPU_SETSIZE as usize).filter(|&cpu| self.has(cpu));
        f.debug_set().entries(cpus).finish()
    }
}

/// Where a thread is to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// On the tracer's processor.
    WithTracer,
    /// On its own set.
    Own,
}

impl Place {
    /// The processors of a thread whose own set is `own` at this place,
    /// the tracer on `tracer` (if known): the tracer's alone when the own
    /// set has it, else the own set.
    pub fn set(self, own: &CpuSet, tracer: Option<usize>) -> CpuSet {
        match (self, tracer) {
            (Place::WithTracer, Some(cpu)) if own.has(cpu) => CpuSet::of(&[cpu]),
            _ => *own,
        }
    }
}

/// The thread on the tracer's processor, if any.
#[derive(Debug, Default)]
pub(super) struct Pinned(Option<i32>);

impl Pinned {
    /// Thread `tid` is resumed to run with the tracer: the thread that
    /// did, if another, which is to go back to its own set.
    pub fn resume(&mut self, tid: i32) -> Option<i32> {
        self.0.replace(tid).filter(|&before| before != tid)
    }

    /// Thread `tid` stopped: the thread running with the tracer, if
    /// another, which is to go back to its own set.
    pub fn stop(&mut self, tid: i32) -> Option<i32> {
        self.0.take_if(|&mut pinned| pinned != tid)
    }
}

/// The processors of one thread: its own set and the set it has now.
#[derive(Clone, Debug)]
pub(super) struct Placement {
    /// Its own set; `None` when it cannot be read (the thread is then
    /// left where it is).
    own: Option<CpuSet>,
    /// The set it has now, when it differs from its own.
    now: Option<CpuSet>,
}

impl Placement {
    /// The placement of thread `tid`, on its own set now.
    pub fn of(tid: i32) -> Placement {
        Placement {
            own: CpuSet::of_thread(tid),
            now: None,
        }
    }

    /// Puts thread `tid` at `place` (the tracer on `tracer`), when it is
    /// not there already.
    pub fn put(&mut self, tid: i32, place: Place, tracer: Option<usize>) {
        if self.now.is_none() {
            if place == Place::Own {
                return;
            }
            // On its own set: the program may have changed it.
            self.own = CpuSet::of_thread(tid);
        }
        let Some(own) = self.own else {
            return;
        };
        let wanted = place.set(&own, tracer);
        let now = self.now.unwrap_or(own);
        if wanted != now && wanted.give(tid) {
            self.now = (wanted != own).then_some(wanted);
        }
    }

    /// Puts thread `tid` on its own set.
    pub fn own(&mut self, tid: i32) {
        self.put(tid, Place::Own, None);
    }
}

/// Whether the `sched_getaffinity` or `sched_setaffinity` call of thread
/// `tid` (its registers before it) names that thread (pid 0 or its id).
pub(super) fn names_itself(call: &crate::ptrace::Regs, tid: i32) -> bool {
    call.rdi as i32 == 0 || call.rdi as i32 == tid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_affinity_call_names_its_thread_by_0_or_its_id() {
        // SAFETY: the registers are plain data, all zeroes valid.
        let mut call: crate::ptrace::Regs = unsafe { std::mem::zeroed() };
        assert!(names_itself(&call, 42));
        call.rdi = 42;
        assert!(names_itself(&call, 42));
        call.rdi = 43;
        assert!(!names_itself(&call, 42));
        // A pid_t is the register's low 32 bits.
        call.rdi = 0xffff_ffff_0000_002a;
        assert!(names_itself(&call, 42));
    }

    #[test]
    fn one_thread_at_most_runs_with_the_tracer() {
        let mut pinned = Pinned::default();
        assert_eq!(pinned.resume(7), None);
        // Resumed again, or stopped: it stays.
        assert_eq!(pinned.resume(7), None);
        assert_eq!(pinned.stop(7), None);
        // Another thread resumed: the first goes back to its own set.
        assert_eq!(pinned.resume(8), Some(7));
        // Another thread stopped: the pinned one goes back at once (the
        // stopped one may read its set), and only once.
        assert_eq!(pinned.stop(9), Some(8));
        assert_eq!(pinned.stop(9), None);
        assert_eq!(pinned.resume(9), None);
    }

    #[test]
    fn with_the_tracer_is_its_processor_alone_when_the_own_set_has_it() {
        let eight = CpuSet::of(&[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(Place::WithTracer.set(&eight, Some(5)), CpuSet::of(&[5]));
        // A program that keeps off the tracer's processor stays off it.
        let two = CpuSet::of(&[2, 3]);
        assert_eq!(Place::WithTracer.set(&two, Some(0)), two);
        // The tracer's processor unknown: the own set.
        assert_eq!(Place::WithTracer.set(&eight, None), eight);
        assert_eq!(Place::Own.set(&eight, Some(5)), eight);
    }

    #[test]
    fn sets_compare_by_their_processors() {
        assert_eq!(CpuSet::of(&[1, 3]), CpuSet::of(&[3, 1]));
        assert_ne!(CpuSet::of(&[1]), CpuSet::of(&[1, 2]));
        assert!(CpuSet::of(&[7]).has(7));
        assert!(!CpuSet::of(&[7]).has(6));
        assert!(!CpuSet::of(&[]).has(usize::MAX));
        assert_eq!(format!("{:?}", CpuSet::of(&[0, 2])), "{0, 2}");
    }

    /// A thread of this process, pinned and given back its own set, ends
    /// on its own set; its placement says where it is without asking the
    /// kernel each time, and takes a set the program gave it meanwhile
    /// for its own.
    #[test]
    fn a_thread_is_pinned_and_given_back_its_own_set() {
        let (ready, reached) = std::sync::mpsc::channel();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: a plain system call.
            ready.send(unsafe { libc::gettid() }).unwrap();
            finish.recv().unwrap();
        });
        let tid = reached.recv().unwrap();
        let own = CpuSet::of_thread(tid).unwrap();
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&cpu| own.has(cpu))
            .unwrap();
        let mut placement = Placement::of(tid);
        placement.put(tid, Place::WithTracer, Some(cpu));
        assert_eq!(CpuSet::of_thread(tid), Some(CpuSet::of(&[cpu])));
        assert_eq!(
            placement.now,
            (own != CpuSet::of(&[cpu])).then_some(CpuSet::of(&[cpu]))
        );
        placement.own(tid);
        assert_eq!(CpuSet::of_thread(tid), Some(own));
        assert_eq!(placement.now, None);
        // The program sets another set meanwhile: that is its own, kept
        // with a tracer on a processor it does not have, given back after.
        assert!(CpuSet::of(&[cpu]).give(tid));
        let elsewhere = libc::CPU_SETSIZE as usize - 1;
        placement.put(tid, Place::WithTracer, Some(elsewhere));
        placement.own(tid);
        assert_eq!(CpuSet::of_thread(tid), Some(CpuSet::of(&[cpu])));
        assert_eq!(placement.own, Some(CpuSet::of(&[cpu])));
        done.send(()).unwrap();
        thread.join().unwrap();
    }
}
