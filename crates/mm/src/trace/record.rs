//! One trace line's context (task, CPU, irq/preempt column, timestamp) around an event, and the
//! `trace` file's header.

use std::fmt::Write as _;

use super::TraceEvent;

/// The five-character irq/preempt column (`trace_print_lat_fmt`), e.g. `.....`, `d..3.`, `b.s1.`.
///
/// Contexts seen on the live S2 machine: mm_page_alloc/mm_page_free from a task `.....` (or
/// `...1.`/`...2.` with preemption disabled, `..s..` in softirq, `b.s1.` with BHs off);
/// mm_page_alloc_zone_locked and mm_page_pcpu_drain under `zone->lock` taken from the PCP path
/// `d..3.`, from `rmqueue_buddy` (no PCP) `d..1.`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LatFlags {
    /// `d` irqs off, `b` BHs off, `D` both, `.` neither.
    pub irqs_off: char,
    /// `.`, `n`, `N`, `p`, `l`, `L`, `b`, `B` (TIF_NEED_RESCHED / _LAZY / PREEMPT_NEED_RESCHED).
    pub need_resched: char,
    /// `h` hardirq, `s` softirq, `H` both, `z` NMI, `Z` NMI in hardirq, `.` task context.
    pub hardsoft_irq: char,
    /// Preemption depth, 0..=15, printed as one hex digit (`.` for 0).
    pub preempt_depth: u8,
    /// Migrate-disable depth, 0..=15, printed as one hex digit (`.` for 0).
    pub migrate_disable: u8,
}

impl LatFlags {
    /// `.....`: task context, nothing disabled.
    pub const NONE: LatFlags = LatFlags {
        irqs_off: '.',
        need_resched: '.',
        hardsoft_irq: '.',
        preempt_depth: 0,
        migrate_disable: 0,
    };

    /// `d..N.`: interrupts off at preemption depth `preempt_depth` (e.g. 3 under `zone->lock`
    /// taken from a PCP refill or drain).
    pub const fn irqs_disabled(preempt_depth: u8) -> LatFlags {
        LatFlags {
            irqs_off: 'd',
            preempt_depth,
            ..LatFlags::NONE
        }
    }

    /// Appends the five characters.
    pub fn render(&self, out: &mut String) {
        fn depth(d: u8) -> char {
            if d & 0xf == 0 {
                '.'
            } else {
                char::from_digit(u32::from(d & 0xf), 16).unwrap_or('.')
            }
        }
        out.push(self.irqs_off);
        out.push(self.need_resched);
        out.push(self.hardsoft_irq);
        out.push(depth(self.preempt_depth));
        out.push(depth(self.migrate_disable));
    }

    /// Parses exactly five characters in the kernel's alphabet.
    pub fn parse(s: &str) -> Option<LatFlags> {
        let c: Vec<char> = s.chars().collect();
        if c.len() != 5 || !".dbD".contains(c[0]) || !".nNplLbB".contains(c[1]) || !".hsHzZ".contains(c[2]) {
            return None;
        }
        let depth = |ch: char| -> Option<u8> {
            if ch == '.' {
                Some(0)
            } else if ch.is_ascii_hexdigit() && !ch.is_ascii_uppercase() {
                ch.to_digit(16).map(|d| d as u8).filter(|&d| d != 0)
            } else {
                None
            }
        };
        Some(LatFlags {
            irqs_off: c[0],
            need_resched: c[1],
            hardsoft_irq: c[2],
            preempt_depth: depth(c[3])?,
            migrate_disable: depth(c[4])?,
        })
    }
}

impl Default for LatFlags {
    fn default() -> Self {
        LatFlags::NONE
    }
}

/// An event with its context: when, on which CPU, in which task.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Trace clock in ns (printed rounded to the microsecond).
    pub ts_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    /// Task name as the trace shows it (`comm`, at most 15 bytes in the kernel). The kernel shows
    /// `<idle>` for pid 0 and `<...>` for a pid whose name it did not save.
    pub comm: String,
    /// The irq/preempt column.
    pub flags: LatFlags,
    pub event: TraceEvent,
}

impl TraceRecord {
    /// A record with the comm the kernel shows for an unknown task (`<idle>` for pid 0, `<...>`
    /// otherwise) and [`LatFlags::NONE`].
    pub fn new(ts_ns: u64, cpu: u32, pid: u32, event: TraceEvent) -> TraceRecord {
        let comm = if pid == 0 { "<idle>" } else { "<...>" };
        TraceRecord {
            ts_ns,
            cpu,
            pid,
            comm: comm.to_string(),
            flags: LatFlags::NONE,
            event,
        }
    }

    pub fn with_comm(mut self, comm: impl Into<String>) -> TraceRecord {
        self.comm = comm.into();
        self
    }

    pub fn with_flags(mut self, flags: LatFlags) -> TraceRecord {
        self.flags = flags;
        self
    }

    /// Appends this record as one line of the `trace` file, newline included.
    pub fn render(&self, out: &mut String) {
        // "%16s-%-7d " pads by bytes, as the kernel does.
        for _ in self.comm.len()..16 {
            out.push(' ');
        }
        let _ = write!(out, "{}-{:<7} [{:03}] ", self.comm, self.pid, self.cpu);
        self.flags.render(out);
        let usecs = self.ts_ns / 1000 + u64::from(self.ts_ns % 1000 >= 500);
        let _ = write!(
            out,
            " {:>5}.{:06}: {}: ",
            usecs / 1_000_000,
            usecs % 1_000_000,
            self.event.name()
        );
        self.event.render_fields(out);
        out.push('\n');
    }
}

/// The event lines of `/sys/kernel/tracing/trace` (or `trace_pipe`) for `records`, in order.
pub fn render_trace(records: &[TraceRecord]) -> String {
    let mut out = String::with_capacity(records.len() * 160);
    for r in records {
        r.render(&mut out);
    }
    out
}

/// The comment header the `trace` file starts with (nop tracer, default options): of
/// `entries_written` events, `entries_in_buffer` are still in the buffer; `nr_cpus` CPUs online.
pub fn render_trace_header(entries_in_buffer: u64, entries_written: u64, nr_cpus: u32) -> String {
    format!(
        "# tracer: nop\n\
         #\n\
         # entries-in-buffer/entries-written: {entries_in_buffer}/{entries_written}   #P:{nr_cpus}\n\
         #\n\
         #                                _-----=> irqs-off/BH-disabled\n\
         #                               / _----=> need-resched\n\
         #                              | / _---=> hardirq/softirq\n\
         #                              || / _--=> preempt-depth\n\
         #                              ||| / _-=> migrate-disable\n\
         #                              |||| /     delay\n\
         #           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n\
         #              | |         |   |||||     |         |\n"
    )
}
