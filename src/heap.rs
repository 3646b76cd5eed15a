//! The allocator's share of the bridge's memory: glibc malloc's settings at startup
//! ([`tune`]) and handing freed memory back to the system after large messages ([`note_large`]).
//!
//! A 1 MiB tool result passes through the bridge as a few transient buffers of its size (the
//! line read from the server, its parsed value, the frame written to the sandbox). Freed, glibc
//! keeps them: in the arena of whichever thread allocated them (a tokio worker, a blocking
//! thread), and, once a freed block was larger than its mmap threshold, every later block up to
//! that size comes from the heap too (the threshold rises to 32 MiB by itself). So a bridge that
//! once moved a few 1 MiB payloads stayed ~6 MiB above one that never did, while idle
//! (benches/RESULTS.md, "Memory budget"). Two measures, both bounded:
//! - at startup, at most [`ARENAS`] malloc arenas (not 8 per core): fewer heaps to hold free
//!   memory, for a process whose threads are two tokio workers and short blocking tasks;
//! - a message of [`LARGE`] bytes or more (a server's line, a sandbox frame) marks the heap:
//!   [`QUIET`] after the last such message, one `malloc_trim(0)` returns the free pages of every
//!   arena (at most one trim per [`QUIET`], on a blocking thread, never on a request's path).
//!
//! A leaf: knows nothing of the bridge. Elsewhere than Linux with glibc, both are no-ops.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// Messages of this many bytes or more mark the heap for a trim.
pub const LARGE: usize = 64 << 10;

/// The trim runs this long after the last large message (so a burst of them costs one).
pub const QUIET: Duration = Duration::from_millis(250);

/// The most malloc arenas the process uses (glibc's default is 8 per core).
pub const ARENAS: i32 = 2;

/// The process's trimmer.
static TRIMMER: Trimmer = Trimmer::new();

/// Large messages noted so far in this process.
static NOTED: AtomicU64 = AtomicU64::new(0);

/// When to trim: the last large message, and whether a trim is already scheduled.
struct Trimmer {
    /// When the last large message was noted, in milliseconds since [`epoch`].
    last_large_ms: AtomicU64,
    /// A trim is scheduled (one at a time).
    scheduled: AtomicBool,
    /// Trims done so far.
    done: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Sets the allocator up for a long-lived, mostly idle process: at most [`ARENAS`] arenas.
/// Call once, first thing in `main`, before any thread starts.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Notes a message of `bytes` bytes: at [`LARGE`] or more, the heap is trimmed [`QUIET`] after
/// the last one (inside a tokio runtime; outside one, nothing is scheduled).
pub fn note_large(bytes: usize) {
    if bytes >= LARGE {
        NOTED.fetch_add(1, Ordering::Relaxed);
        TRIMMER.note(bytes, trim);
    }
}

/// How many large messages [`note_large`] was told of so far in this process.
pub fn noted() -> u64 {
    NOTED.load(Ordering::Relaxed)
}

/// Hands the free memory of every arena back to the system now (`malloc_trim(0)`).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it locks each arena while it walks it.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many trims [`note_large`] ran so far in this process.
pub fn trims() -> u64 {
    TRIMMER.done.load(Ordering::Relaxed)
}

impl Trimmer {
    const fn new() -> Trimmer {
        Trimmer {
            last_large_ms: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
            done: AtomicU64::new(0),
        }
    }

    /// [`note_large`] with `trim` as the trim.
    fn note(&'static self, bytes: usize, trim: fn()) {
        if bytes < LARGE {
            return;
        }
        self.last_large_ms.store(now_ms(), Ordering::Relaxed);
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.scheduled.store(false, Ordering::Release);
            return;
        };
        rt.spawn(async move {
            loop {
                let due = self
                    .last_large_ms
                    .load(Ordering::Relaxed)
                    .saturating_add(QUIET.as_millis() as u64);
                let now = now_ms();
                if now >= due {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(due - now)).await;
            }
            // A message noted from here on schedules the next trim.
            self.scheduled.store(false, Ordering::Release);
            let _ = tokio::task::spawn_blocking(trim).await;
            self.done.fetch_add(1, Ordering::Relaxed);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn wait(quiets: u32) {
        for _ in 0..quiets {
            tokio::time::sleep(QUIET).await;
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_large_messages_is_trimmed_once_after_it_and_small_ones_never() {
        let t: &'static Trimmer = Box::leak(Box::new(Trimmer::new()));
        let done = || t.done.load(Ordering::Relaxed);
        t.note(LARGE - 1, || ());
        wait(4).await;
        assert_eq!(done(), 0, "a small message trims nothing");
        for _ in 0..10 {
            t.note(LARGE, || ());
            tokio::time::sleep(QUIET / 10).await;
        }
        assert_eq!(done(), 0, "not while large messages keep coming");
        wait(8).await;
        assert_eq!(done(), 1, "one trim after the burst");
        t.note(1 << 20, || ());
        wait(8).await;
        assert_eq!(done(), 2, "and one after the next");
    }

    #[test]
    fn outside_a_runtime_nothing_is_scheduled() {
        let t: &'static Trimmer = Box::leak(Box::new(Trimmer::new()));
        t.note(LARGE, || ());
        assert!(!t.scheduled.load(Ordering::Relaxed));
    }
}
