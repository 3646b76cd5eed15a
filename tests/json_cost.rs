//! `bridge::json_cost` against the allocator: parsing JSON into `serde_json::Value` never takes
//! more than `JsonCost::parsed` (counted as glibc's chunks: 16-byte steps, 8 bytes of header, at
//! least 32), for the shapes that cost the most per byte of text and for random documents.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use mcp_code_bridge::sandbox::json_cost::scan;
use serde_json::Value;

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// One test at a time (tests run on threads of one process, and all allocate).
static ONE: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

thread_local! {
    /// Whether this thread's allocations are counted (the test harness allocates on threads
    /// of its own meanwhile).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            let now = NOW.fetch_add(chunk(layout.size()), Relaxed) + chunk(layout.size());
            PEAK.fetch_max(now, Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            NOW.fetch_sub(chunk(layout.size()), Relaxed);
        }
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Peak bytes allocated while `text` is parsed and held, beyond what was allocated before.
fn parse_peak(text: &str) -> usize {
    let base = NOW.load(Relaxed);
    PEAK.store(base, Relaxed);
    COUNTED.with(|c| c.set(true));
    let v: Value = serde_json::from_str(text).expect("valid json");
    COUNTED.with(|c| c.set(false));
    let peak = PEAK.load(Relaxed) - base;
    drop(v);
    peak
}

fn repeated(open: &str, item: &str, n: usize, close: &str) -> String {
    let mut s = String::with_capacity(n * (item.len() + 1) + 2);
    s.push_str(open);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(item);
    }
    s.push_str(close);
    s
}

fn keys(n: usize, value: &str) -> String {
    let items: Vec<String> = (0..n).map(|i| format!("\"{i:x}\":{value}")).collect();
    format!("{{{}}}", items.join(","))
}

fn nested(depth: usize, leaf: &str) -> String {
    format!("{}{leaf}{}", "[".repeat(depth), "]".repeat(depth))
}

fn check(label: &str, text: &str) -> f64 {
    let counted = scan(text.as_bytes());
    let cost = counted.parsed();
    let peak = parse_peak(text);
    // `held` adds one serialized copy.
    let again =
        serde_json::to_vec(&serde_json::from_str::<Value>(text).expect("json")).expect("ser");
    assert!(
        again.len() <= counted.held() - cost,
        "{label}: written again it takes {} bytes",
        again.len()
    );
    assert!(
        peak <= cost,
        "{label}: parsing {} bytes took {peak} bytes, over the charged {cost}",
        text.len()
    );
    peak as f64 / text.len() as f64
}

#[test]
fn the_costliest_shapes_stay_within_their_charge() {
    let _one = serial();
    for n in [1, 2, 3, 4, 5, 7, 8, 9, 100, 1000, 100_000] {
        for item in [
            "0",
            "[]",
            "{}",
            "[0]",
            "[[]]",
            "\"\"",
            "\"a\"",
            "{\"\":0}",
            "{\"a\":[0]}",
            "[0,0,0,0,0]",
            "[{}]",
            "null",
            "1e9",
            "1E2",
            "-0.1e-7",
            "\"\\u0001\"",
        ] {
            check(&format!("{n} x {item}"), &repeated("[", item, n, "]"));
        }
        for value in ["0", "[]", "{}", "[0]", "{\"\":0}", "\"\""] {
            check(&format!("{n} keys of {value}"), &keys(n, value));
        }
    }
    for depth in [1, 2, 50, 127] {
        check(&format!("depth {depth}"), &nested(depth, "0"));
        check(
            &format!("depth {depth} of objects"),
            &format!("{}0{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
        );
    }
}

#[test]
fn random_documents_stay_within_their_charge() {
    let _one = serial();
    // A small deterministic generator: documents of every shape, up to a few thousand values.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    fn gen(next: &mut dyn FnMut(u64) -> u64, depth: u32, out: &mut String) {
        let pick = if depth > 6 { next(4) } else { next(7) };
        match pick {
            0 => out.push('0'),
            1 => out.push_str("\"ab\\n\\u00e9\""),
            2 => out.push_str("-1.5e3"),
            3 => out.push_str("true"),
            4 | 5 => {
                out.push('[');
                for i in 0..next(12) {
                    if i > 0 {
                        out.push_str(" , ");
                    }
                    gen(next, depth + 1, out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                for i in 0..next(12) {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!("\"k{i}\" : "));
                    gen(next, depth + 1, out);
                }
                out.push('}');
            }
        }
    }
    for _ in 0..400 {
        let mut text = String::new();
        gen(&mut next, 0, &mut text);
        check("random", &text);
    }
}

/// Prints bytes of `Value` per byte of text for the worst shapes (run with `--nocapture`).
#[test]
fn worst_ratios() {
    let _one = serial();
    for item in ["0", "[0]", "{\"\":0}", "\"a\"", "[]"] {
        let text = repeated("[", item, 200_000, "]");
        let cost = scan(text.as_bytes());
        println!(
            "[{item},...]: {:.0} bytes parsed per byte of text, {:.0} charged (held {:.0})",
            check(item, &text),
            cost.parsed() as f64 / text.len() as f64,
            cost.held() as f64 / text.len() as f64
        );
    }
}

/// The scan next to the parse it guards, for a 1 KB call frame (`--ignored --nocapture`; prints
/// only, machines are noisy).
#[test]
#[ignore]
fn scan_time_next_to_parse_time() {
    let _one = serial();
    let params = serde_json::json!({"server": "fs", "tool": "write_file", "arguments": {
        "path": "/workspace/src/main.py", "text": "x".repeat(820), "lines": (0..20).collect::<Vec<_>>(),
        "opts": {"a": true, "b": null, "c": 1.5, "d": ["u", "v", "w"]}}});
    let line = format!(r#"{{"t":"call","id":12,"exec":3,"method":"call_tool","params":{params}}}"#);
    let n = 20_000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(scan(std::hint::black_box(line.as_bytes())));
    }
    let scan_ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    let t = std::time::Instant::now();
    for _ in 0..n {
        let _ = std::hint::black_box(mcp_code_bridge::sandbox::parse_inbound(line.as_bytes()));
    }
    let parse_ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!(
        "{} bytes: scan {scan_ns:.0} ns, parse {parse_ns:.0} ns",
        line.len()
    );
}
