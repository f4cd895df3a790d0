//! 64 idle executors on a small machine must park, not spin. Measures the
//! process's CPU time (user + system, from `/proc/self/stat`) over ~0.5 s of
//! idleness and checks it is a small fraction of that interval. This checks
//! parking, not speed: the bound is loose.

use std::time::{Duration, Instant};

/// User + system CPU time of this process, in clock ticks.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall, i.e. the 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

const TICKS_PER_SECOND: f64 = 100.0; // USER_HZ on Linux

#[test]
fn sixty_four_idle_executors_burn_next_to_no_cpu() {
    let rt = swco_executor::Runtime::builder()
        .executors(64)
        .build()
        .unwrap();
    // Give every executor something to do once, so all have started and
    // gone back to sleep.
    let hs: Vec<_> = (0..64).map(|i| rt.spawn_on(i, || ()).unwrap()).collect();
    for h in hs {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));

    let Some(before) = cpu_ticks() else {
        eprintln!("no /proc/self/stat: skipping the CPU measurement");
        return;
    };
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let elapsed = start.elapsed().as_secs_f64();
    let used = (cpu_ticks().unwrap() - before) as f64 / TICKS_PER_SECOND;
    // Spinning executors would use up to 2 cores (~1 s of CPU per 0.5 s).
    assert!(
        used < 0.1 * elapsed,
        "64 idle executors used {used:.3} s of CPU in {elapsed:.3} s"
    );
    rt.shutdown();
    // Each executor parked (at least once per time it ran out of work).
    assert!(rt.stats().executors.iter().all(|e| e.parks >= 1));
}
