//! Callgrind's `--collect-systime`: the events a timed system call adds
//! (`sysCount sysTime`, and `sysCpuTime` with `nsec`), their long names,
//! and the unit of its time.
//!
//! Valgrind reads the wall clock at both ends of the call in the unit
//! asked for (its millisecond timer, microseconds, nanoseconds), so a
//! call's `sysTime` is the difference of two readings truncated to the
//! unit: [`SystemTime::elapsed`]. `yes` is `msec`. `sysCpuTime`
//! (`nsec` only) is the thread's CPU time during the call, in
//! nanoseconds.
//!
//! Where a call is charged: one `sysCount` and its times go to the
//! cost of the `syscall` instruction in its context (Callgrind's current
//! BBCC's `skipped` cost, written at the block's last instruction) and
//! with it to the thread's running cost, so every call on the stack has it
//! inclusively. A call that ends its thread (`exit`, `exit_group`) is
//! counted in the running cost alone: Valgrind charges it after the
//! thread's last block, so it appears in the `summary:` line but in no
//! cost line ([`ends_thread`]).

use cgx_engine::{SystemCall, SystemCallClocks};

/// `exit`'s number.
const SYS_EXIT: u64 = 60;
/// `exit_group`'s number.
const SYS_EXIT_GROUP: u64 = 231;

/// `--collect-systime=no|yes|msec|usec|nsec`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SystemTime {
    /// `no`: system calls are not counted.
    #[default]
    No,
    /// `msec` (and `yes`): `sysCount sysTime`, the time in milliseconds.
    Msec,
    /// `usec`: `sysCount sysTime`, the time in microseconds.
    Usec,
    /// `nsec`: `sysCount sysTime sysCpuTime`, both times in nanoseconds.
    Nsec,
}

impl SystemTime {
    /// Whether system calls are counted.
    pub fn on(self) -> bool {
        self != SystemTime::No
    }

    /// The clocks the engine reads around each call.
    pub fn clocks(self) -> SystemCallClocks {
        match self {
            SystemTime::No => SystemCallClocks::Off,
            SystemTime::Msec | SystemTime::Usec => SystemCallClocks::Wall,
            SystemTime::Nsec => SystemCallClocks::WallAndCpu,
        }
    }

    /// Nanoseconds per unit of `sysTime` (1 when off).
    fn unit_ns(self) -> u64 {
        match self {
            SystemTime::Msec => 1_000_000,
            SystemTime::Usec => 1_000,
            SystemTime::No | SystemTime::Nsec => 1,
        }
    }

    /// The events it adds, in Callgrind's order.
    pub(crate) fn events(self) -> &'static [&'static str] {
        match self {
            SystemTime::No => &[],
            SystemTime::Msec | SystemTime::Usec => &["sysCount", "sysTime"],
            SystemTime::Nsec => &["sysCount", "sysTime", "sysCpuTime"],
        }
    }

    /// The `event:` lines Callgrind writes for them: (name, long name).
    pub(crate) fn long_names(self) -> &'static [(&'static str, &'static str)] {
        match self {
            SystemTime::No => &[],
            SystemTime::Msec => &[("sysTime", "sysTime (elapsed ms)")],
            SystemTime::Usec => &[("sysTime", "sysTime (elapsed us)")],
            SystemTime::Nsec => &[
                ("sysTime", "sysTime (elapsed ns)"),
                ("sysCpuTime", "sysCpuTime (system cpu ns)"),
            ],
        }
    }

    /// `sysTime` of `call`: the difference of its end and start read in
    /// the unit (each truncated), as Valgrind reads its clock at both ends.
    pub fn elapsed(self, call: &SystemCall) -> u64 {
        let unit = self.unit_ns();
        (call.wall_end_ns / unit).saturating_sub(call.wall_start_ns / unit)
    }

    /// `sysCpuTime` of `call` (nanoseconds; with `nsec` only).
    pub fn cpu(self, call: &SystemCall) -> u64 {
        match self {
            SystemTime::Nsec => call.cpu_ns,
            _ => 0,
        }
    }
}

/// Whether system call `number` ends its thread (or all threads): it is
/// counted in the thread's running cost only (see the module's comment).
pub(crate) fn ends_thread(number: u64) -> bool {
    matches!(number, SYS_EXIT | SYS_EXIT_GROUP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: u64, end: u64, cpu: u64) -> SystemCall {
        SystemCall {
            number: 35,
            wall_start_ns: start,
            wall_end_ns: end,
            cpu_ns: cpu,
        }
    }

    #[test]
    fn time_is_the_difference_of_truncated_readings() {
        // 1.9999 ms to 2.0001 ms: 0.2 µs, but the millisecond changed.
        let short = call(1_999_900, 2_000_100, 7);
        assert_eq!(SystemTime::Msec.elapsed(&short), 1);
        assert_eq!(SystemTime::Usec.elapsed(&short), 1);
        assert_eq!(SystemTime::Nsec.elapsed(&short), 200);
        // 20.5 ms within the same readings' units.
        let sleep = call(3_000_000_000, 3_020_500_000, 40_000);
        assert_eq!(SystemTime::Msec.elapsed(&sleep), 20);
        assert_eq!(SystemTime::Usec.elapsed(&sleep), 20_500);
        assert_eq!(SystemTime::Nsec.elapsed(&sleep), 20_500_000);
        // An untimed call.
        assert_eq!(SystemTime::Nsec.elapsed(&call(0, 0, 0)), 0);
    }

    #[test]
    fn cpu_time_only_with_nsec() {
        let sleep = call(0, 20_000_000, 40_000);
        assert_eq!(SystemTime::Nsec.cpu(&sleep), 40_000);
        assert_eq!(SystemTime::Msec.cpu(&sleep), 0);
        assert_eq!(SystemTime::Usec.cpu(&sleep), 0);
    }

    #[test]
    fn events_and_long_names_are_callgrinds() {
        assert!(SystemTime::No.events().is_empty());
        assert_eq!(SystemTime::Msec.events(), ["sysCount", "sysTime"]);
        assert_eq!(
            SystemTime::Nsec.events(),
            ["sysCount", "sysTime", "sysCpuTime"]
        );
        assert_eq!(
            SystemTime::Usec.long_names(),
            [("sysTime", "sysTime (elapsed us)")]
        );
        assert_eq!(SystemTime::Nsec.long_names().len(), 2);
        assert_eq!(SystemTime::Nsec.clocks(), SystemCallClocks::WallAndCpu);
        assert_eq!(SystemTime::Msec.clocks(), SystemCallClocks::Wall);
        assert!(!SystemTime::No.clocks().on());
    }

    #[test]
    fn exit_and_exit_group_end_the_thread() {
        assert!(ends_thread(60) && ends_thread(231));
        assert!(!ends_thread(39));
    }
}
