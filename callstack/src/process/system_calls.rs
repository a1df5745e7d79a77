//! The system calls of a process's threads (`--collect-systime`): where
//! each one's count and times go (see `crate::system_time`).

use cgx_engine::SystemCall;

use super::Process;
use crate::system_time::ends_thread;

impl Process {
    /// Thread `tid` made the system call `call` with the instruction it
    /// executed last: one `sysCount` and its times where that
    /// instruction's costs go, or in the thread's running cost alone (the
    /// `summary:` line) for a call that ends the thread and for any call
    /// while the thread does not collect, as Callgrind counts them
    /// (counted only with `--collect-systime`).
    pub fn system_call(&mut self, tid: i32, call: &SystemCall) {
        let Some(columns) = self.events.system.filter(|_| self.instrumenting) else {
            return;
        };
        let unit = self.options.collect_systime;
        let mut charges = vec![(columns.count, 1), (columns.time, unit.elapsed(call))];
        if let Some(cpu) = columns.cpu {
            charges.push((cpu, unit.cpu(call)));
        }
        let ends = ends_thread(call.number);
        self.with_thread_state(tid, |thread, shared| {
            if ends || !thread.collecting() {
                thread.add_to_running(&charges);
            } else if let Some(cost) = thread.last_cost(shared.costs) {
                for &(column, value) in &charges {
                    if let Some(total) = cost.get_mut(column) {
                        *total += value;
                    }
                }
            }
        });
    }
}
