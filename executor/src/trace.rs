//! The runtime's trace ([`RuntimeBuilder::trace`](crate::RuntimeBuilder::trace)):
//! what each executor records while it runs, and the Chrome trace-event
//! JSON file (what Perfetto and `chrome://tracing` open) the runtime writes
//! from it at shutdown.
//!
//! Each executor records into a [`Recorder`] of its own, a field of its
//! `Local`; the executor's hooks (`executor/recording.rs`) call it from the
//! places where a coroutine runs, is spawned, parks and is woken, and hand
//! its buffer to the runtime's [`TraceSink`] as the executor leaves its
//! loop. This module depends on nothing else in the crate.
//!
//! # Invariants
//!
//! * A buffer is written only by its executor thread: wakes from other
//!   threads are recorded when the inbox that carries them is drained.
//!   Nothing on the recording path locks.
//! * With tracing off, each hook is one test of `Local::trace` (`None`);
//!   nothing is formatted or allocated until the file is written.
//! * A buffer holds at most its capacity of events; past it events are
//!   counted, not kept, and the count is written into the file.
//! * Events carry an executor-local coroutine index; the coroutine's id and
//!   name are kept once per spawn or launch and turned into text only when
//!   the file is written.
//! * While tracing, an executor makes no direct hand-offs (a coroutine
//!   parking runs the one it woke on top of its own stack,
//!   `Local::park_running`): every run starts and ends in the executor
//!   loop, so runs on a track never overlap, and the hand-off path needs
//!   no hook. The order in which coroutines run is the same; a hand-off
//!   only saves the pass through the loop.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// How many events each executor keeps by default before it starts
/// counting them as dropped (24 bytes each).
pub(crate) const DEFAULT_TRACE_CAPACITY: usize = 1 << 20;

/// Index of a coroutine in its executor's [`TraceBuf::coroutines`]; `NONE`
/// for a slot not named (a full buffer records nothing anyway).
type Who = u32;
const NONE: Who = Who::MAX;

/// What an [`Event`] records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Kind {
    /// A run of a coroutine, from its resumption to its suspension or end.
    Run,
    /// A new coroutine's job reached this executor.
    Spawn,
    /// The coroutine parked (blocked on a channel, a join or a sleep).
    Park,
    /// Woken by a coroutine of its own executor.
    WakeLocal,
    /// Woken from another thread, seen when the inbox was drained.
    WakeRemote,
    /// Woken by its deadline.
    WakeTimer,
}

/// One recorded event: times in nanoseconds since the trace began.
#[derive(Clone, Copy, Debug)]
struct Event {
    ts: u64,
    /// Runs only; 0 for instants.
    dur: u64,
    who: Who,
    kind: Kind,
}

// The size the docs give (`RuntimeBuilder::trace`), and what a full buffer
// of the default capacity holds.
const _: () = assert!(std::mem::size_of::<Event>() == 24);

/// A coroutine as the file names it.
struct Named {
    id: u64,
    name: Option<Box<str>>,
}

/// The run in progress on an executor.
#[derive(Clone, Copy)]
struct Open {
    who: Who,
    start: u64,
}

/// One executor's recording. Only its executor thread touches it.
pub(crate) struct TraceBuf {
    executor: usize,
    base: Instant,
    capacity: usize,
    events: Vec<Event>,
    /// Events not kept because the buffer was full.
    dropped: u64,
    /// When the first event was dropped.
    first_drop: u64,
    coroutines: Vec<Named>,
    /// The coroutine in each task slot, by its index in `coroutines`.
    by_slot: Vec<Who>,
    /// The run in progress, if a coroutine is resumed.
    open: Option<Open>,
}

impl TraceBuf {
    fn new(executor: usize, base: Instant, capacity: usize) -> Self {
        TraceBuf {
            executor,
            base,
            capacity,
            events: Vec::new(),
            dropped: 0,
            first_drop: 0,
            coroutines: Vec::new(),
            by_slot: Vec::new(),
            open: None,
        }
    }

    /// Nanoseconds since the trace began.
    #[inline]
    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn full(&self) -> bool {
        self.events.len() >= self.capacity
    }

    fn push(&mut self, kind: Kind, who: Who, ts: u64, dur: u64) {
        if self.full() {
            if self.dropped == 0 {
                self.first_drop = ts;
            }
            self.dropped += 1;
            return;
        }
        if self.events.len() == self.events.capacity() {
            // Grow by doubling, but never past the capacity: a full buffer
            // holds no slack.
            let more = self
                .events
                .len()
                .max(1024)
                .min(self.capacity - self.events.len());
            self.events.reserve_exact(more);
        }
        self.events.push(Event { ts, dur, who, kind });
    }

    /// Keeps `id` and `name` for the file; its index, or [`NONE`] once the
    /// buffer is full (nothing about it would be recorded).
    fn name(&mut self, id: u64, name: Option<&str>) -> Who {
        if self.full() {
            return NONE;
        }
        let who = Who::try_from(self.coroutines.len()).unwrap_or(NONE);
        self.coroutines.push(Named {
            id,
            name: name.map(Box::from),
        });
        who
    }

    fn who_in(&self, slot: usize) -> Who {
        self.by_slot.get(slot).copied().unwrap_or(NONE)
    }

    /// A run of the coroutine in `slot` begins.
    fn begin(&mut self, slot: usize) {
        let now = self.now();
        self.open = Some(Open {
            who: self.who_in(slot),
            start: now,
        });
    }

    /// The run begun last ends (`parked`: the coroutine parked).
    fn end(&mut self, parked: bool) {
        let now = self.now();
        if let Some(open) = self.open.take() {
            self.push(Kind::Run, open.who, open.start, now - open.start);
            if parked {
                self.push(Kind::Park, open.who, now, 0);
            }
        }
    }

    fn wake(&mut self, slot: usize, kind: Kind) {
        let now = self.now();
        self.push(kind, self.who_in(slot), now, 0);
    }
}

/// An executor's recorder: its buffer, borrowed only inside one call.
///
/// Every method is out of line and cold: with tracing off none is called,
/// and the executor's hot paths keep only the test that skips them.
pub(crate) struct Recorder {
    buf: RefCell<TraceBuf>,
}

impl Recorder {
    /// A run of the coroutine in `slot` begins.
    #[cold]
    #[inline(never)]
    pub(crate) fn begin(&self, slot: usize) {
        self.buf.borrow_mut().begin(slot);
    }

    /// The run begun last ends; `parked`: the coroutine parked.
    #[cold]
    #[inline(never)]
    pub(crate) fn end(&self, parked: bool) {
        self.buf.borrow_mut().end(parked);
    }

    /// The job of coroutine `id` (named `name`) arrived here.
    #[cold]
    #[inline(never)]
    pub(crate) fn spawn(&self, id: u64, name: Option<&str>) {
        let mut buf = self.buf.borrow_mut();
        let now = buf.now();
        let who = buf.name(id, name);
        buf.push(Kind::Spawn, who, now, 0);
    }

    /// Coroutine `id` (named `name`) starts in `slot`: the events of that
    /// slot are its own from now on.
    #[cold]
    #[inline(never)]
    pub(crate) fn launch(&self, slot: usize, id: u64, name: Option<&str>) {
        let mut buf = self.buf.borrow_mut();
        let who = buf.name(id, name);
        if buf.by_slot.len() <= slot {
            buf.by_slot.resize(slot + 1, NONE);
        }
        buf.by_slot[slot] = who;
    }

    /// The coroutine in `slot` was woken.
    #[cold]
    #[inline(never)]
    pub(crate) fn wake(&self, slot: usize, from: WakeFrom) {
        let kind = match from {
            WakeFrom::Local => Kind::WakeLocal,
            WakeFrom::Timer => Kind::WakeTimer,
        };
        self.buf.borrow_mut().wake(slot, kind);
    }

    /// The coroutines in `slots` were woken from other threads.
    #[cold]
    #[inline(never)]
    pub(crate) fn remote_wakes(&self, slots: &[usize]) {
        let mut buf = self.buf.borrow_mut();
        for &slot in slots {
            buf.wake(slot, Kind::WakeRemote);
        }
    }

    /// Everything recorded so far, leaving an empty buffer that records
    /// nothing more.
    pub(crate) fn take(&self) -> TraceBuf {
        let mut buf = self.buf.borrow_mut();
        let empty = TraceBuf::new(buf.executor, buf.base, 0);
        std::mem::replace(&mut *buf, empty)
    }
}

/// How a wake on the home thread came about (wakes from other threads are
/// [`Recorder::remote_wakes`]).
#[derive(Clone, Copy)]
pub(crate) enum WakeFrom {
    /// A coroutine of the same executor.
    Local,
    /// The coroutine's deadline.
    Timer,
}

/// The runtime's side of the trace: the file, opened when the runtime was
/// built, and the buffers the executors hand in as they leave their loops.
pub(crate) struct TraceSink {
    path: PathBuf,
    /// Taken by the one write.
    file: Mutex<Option<File>>,
    base: Instant,
    capacity: usize,
    executors: usize,
    handed_in: Mutex<Vec<TraceBuf>>,
}

impl TraceSink {
    /// Creates (or truncates) the file at `path` now, so that a path that
    /// cannot be written is an error at build time rather than at shutdown.
    pub(crate) fn create(path: PathBuf, capacity: usize, executors: usize) -> io::Result<Self> {
        let file = File::create(&path)?;
        Ok(TraceSink {
            path,
            file: Mutex::new(Some(file)),
            base: Instant::now(),
            capacity,
            executors,
            handed_in: Mutex::new(Vec::new()),
        })
    }

    /// A recorder for executor `index`.
    pub(crate) fn recorder(&self, index: usize) -> Box<Recorder> {
        Box::new(Recorder {
            buf: RefCell::new(TraceBuf::new(index, self.base, self.capacity)),
        })
    }

    /// Takes an executor's recording, as its thread leaves its loop.
    pub(crate) fn hand_in(&self, buf: TraceBuf) {
        self.handed_in
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(buf);
    }

    /// Writes the file from the buffers handed in, once (later calls do
    /// nothing). A failure is reported on stderr: shutdown carries on.
    pub(crate) fn write(&self) {
        let file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(file) = file else {
            return;
        };
        let mut bufs = std::mem::take(
            &mut *self
                .handed_in
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        bufs.sort_by_key(|b| b.executor);
        let mut out = BufWriter::new(file);
        if let Err(e) = write_json(&mut out, self.executors, self.capacity, &mut bufs)
            .and_then(|()| out.flush())
        {
            eprintln!(
                "swco: cannot write the trace to {}: {e}",
                self.path.display()
            );
        }
    }
}

/// Writes `s` as a JSON string, quotes included. The characters to escape
/// are all ASCII, so the string is scanned byte by byte; everything else,
/// multi-byte characters included, is copied as it is.
fn write_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut copied = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if c != b'"' && c != b'\\' && c >= b' ' {
            continue;
        }
        out.write_all(&bytes[copied..i])?;
        copied = i + 1;
        match c {
            b'"' => out.write_all(b"\\\"")?,
            b'\\' => out.write_all(b"\\\\")?,
            b'\n' => out.write_all(b"\\n")?,
            b'\r' => out.write_all(b"\\r")?,
            b'\t' => out.write_all(b"\\t")?,
            _ => write!(out, "\\u{c:04x}")?,
        }
    }
    out.write_all(&bytes[copied..])?;
    out.write_all(b"\"")
}

/// Nanoseconds as the microseconds the format counts in, exactly.
struct Micros(u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// The whole file: metadata naming the process and one thread per
/// executor, every executor's events (in time order), a "trace buffer
/// full" instant where an executor began dropping, and the dropped counts
/// in `otherData`.
fn write_json(
    out: &mut impl Write,
    executors: usize,
    capacity: usize,
    bufs: &mut [TraceBuf],
) -> io::Result<()> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    out.write_all(
        b"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"swco\"}}",
    )?;
    for i in 0..executors {
        write!(
            out,
            ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":{i},\
             \"args\":{{\"name\":\"swco-cpe-{i}\"}}}}\
             ,\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":{i},\
             \"args\":{{\"sort_index\":{i}}}}}"
        )?;
    }
    let mut dropped = 0;
    for buf in bufs.iter_mut() {
        dropped += buf.dropped;
        buf.events.sort_by_key(|e| e.ts);
        let tid = buf.executor;
        for e in &buf.events {
            let named = buf.coroutines.get(e.who as usize);
            let id = named.map(|n| n.id);
            if e.kind == Kind::Run {
                out.write_all(b",\n{\"name\":")?;
                match (named.and_then(|n| n.name.as_deref()), id) {
                    (Some(name), _) => write_str(out, name)?,
                    (None, Some(id)) => write!(out, "\"#{id}\"")?,
                    (None, None) => out.write_all(b"\"?\"")?,
                }
                write!(
                    out,
                    ",\"cat\":\"run\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":0,\"tid\":{tid}",
                    Micros(e.ts),
                    Micros(e.dur)
                )?;
                out.write_all(b",\"args\":{")?;
            } else {
                let (name, from) = match e.kind {
                    Kind::Spawn => ("spawn", None),
                    Kind::Park => ("park", None),
                    Kind::WakeLocal => ("wake", Some("local")),
                    Kind::WakeRemote => ("wake", Some("remote")),
                    Kind::WakeTimer => ("wake", Some("timer")),
                    Kind::Run => unreachable!("runs are complete events"),
                };
                write!(
                    out,
                    ",\n{{\"name\":\"{name}\",\"cat\":\"{name}\",\"ph\":\"i\",\"s\":\"t\",\
                     \"ts\":{},\"pid\":0,\"tid\":{tid}",
                    Micros(e.ts)
                )?;
                out.write_all(b",\"args\":{")?;
                if let Some(from) = from {
                    write!(out, "\"from\":\"{from}\",")?;
                }
            }
            match named {
                Some(named) => {
                    write!(out, "\"id\":{}", named.id)?;
                    if let Some(name) = &named.name {
                        out.write_all(b",\"coroutine\":")?;
                        write_str(out, name)?;
                    }
                }
                None => out.write_all(b"\"id\":null")?,
            }
            out.write_all(b"}}")?;
        }
        if buf.dropped > 0 {
            write!(
                out,
                ",\n{{\"name\":\"trace buffer full\",\"cat\":\"trace\",\"ph\":\"i\",\"s\":\"t\",\
                 \"ts\":{},\"pid\":0,\"tid\":{tid},\"args\":{{\"dropped\":{}}}}}",
                Micros(buf.first_drop),
                buf.dropped
            )?;
        }
    }
    // `otherData` values are strings in the format.
    write!(
        out,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\"swco_trace_capacity\":\"{capacity}\",\
         \"swco_dropped_events\":\"{dropped}\",\"swco_dropped_per_executor\":\""
    )?;
    let mut per = vec![0u64; executors];
    for buf in bufs.iter() {
        if let Some(n) = per.get_mut(buf.executor) {
            *n = buf.dropped;
        }
    }
    for (i, n) in per.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        write!(out, "{sep}{n}")?;
    }
    out.write_all(b"\"}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_str(s: &str) -> String {
        let mut v = Vec::new();
        write_str(&mut v, s).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(json_str("plain"), "\"plain\"");
        assert_eq!(json_str("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(json_str("l1\nl2\t\u{1}"), "\"l1\\nl2\\t\\u0001\"");
        assert_eq!(json_str("é✓"), "\"é✓\"");
    }

    #[test]
    fn microseconds_are_exact() {
        assert_eq!(Micros(0).to_string(), "0.000");
        assert_eq!(Micros(1_234_567).to_string(), "1234.567");
        assert_eq!(Micros(5).to_string(), "0.005");
    }

    #[test]
    fn a_full_buffer_counts_what_it_drops() {
        let mut buf = TraceBuf::new(0, Instant::now(), 2);
        for ts in 0..5 {
            buf.push(Kind::Spawn, NONE, ts, 0);
        }
        assert_eq!(buf.events.len(), 2);
        assert_eq!(buf.events.capacity(), 2, "no slack past the capacity");
        assert_eq!(buf.dropped, 3);
        assert_eq!(buf.first_drop, 2);
        assert_eq!(buf.name(1, Some("x")), NONE, "nothing is named once full");
    }
}
