//! What JSON text from the sandbox costs once parsed into `serde_json::Value`, found by one pass
//! over its bytes before it is parsed (ARCHITECTURE.md, "Memory ceiling").
//!
//! A `Value` takes many times its text: `[0,0,...]` spends 2 bytes of text per item and 80 bytes
//! of `Value` (with `preserve_order`, which the build has) in a vector that grows by doubling, and
//! `[{"a":0},...]` makes a map (a vector of entries and a hash index) of 8 bytes of text. So a
//! frame's parameters are charged [`JsonCost::held`] against the frame limit and the request
//! budget, not their length. The pass skips string contents with `memchr` and looks at every
//! other byte once; it does not check the text (the parser does that next).

use std::mem::size_of;

use serde_json::Value;

/// Bytes of one `Value` (80 with `preserve_order`, 32 without).
const VALUE: usize = size_of::<Value>();
/// An array item: its `Value` in a vector that may have twice the room it uses, and the
/// vector's old block while it grows.
pub const ELEMENT: usize = 3 * VALUE;
/// An object entry: the entry (hash, key `String`, `Value`) in a vector that grows like an
/// array's, and its slots in the hash index (a B-tree's entry is smaller without
/// `preserve_order`).
pub const ENTRY: usize = 3 * (VALUE + 32) + 48;
/// A non-empty array's first block (room for 4 items) and the allocator's overhead.
pub const ARRAY: usize = 4 * VALUE + 32;
/// A non-empty object's first blocks: room for 3 entries and a hash index of 4 slots with
/// `preserve_order` (a `Value` of more than 32 bytes), else a B-tree leaf of 11 entries.
pub const OBJECT: usize = if VALUE > 32 { 448 } else { 704 };
/// A string's (or key's) block beyond its characters: the allocator's overhead and rounding.
pub const STRING: usize = 32;

/// Counts of what a JSON text holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonCost {
    /// Bytes of text.
    pub text: usize,
    /// Items of arrays.
    pub elements: usize,
    /// Entries of objects.
    pub entries: usize,
    /// Arrays with at least one item.
    pub arrays: usize,
    /// Objects with at least one entry.
    pub objects: usize,
    /// Strings, keys included.
    pub strings: usize,
    /// Bytes of text of the longest string with an escape (the parser unescapes such strings
    /// in a scratch buffer of its own, which grows by doubling).
    pub escaped: usize,
}

impl JsonCost {
    /// Bytes the text can take parsed into a `Value`, at most: string contents (never longer
    /// than their text), every item, entry, container and string at its cost above, and the
    /// parser's scratch buffer.
    pub fn parsed(&self) -> usize {
        self.text
            .saturating_add(self.elements.saturating_mul(ELEMENT))
            .saturating_add(self.entries.saturating_mul(ENTRY))
            .saturating_add(self.arrays.saturating_mul(ARRAY))
            .saturating_add(self.objects.saturating_mul(OBJECT))
            .saturating_add(self.strings.saturating_mul(STRING))
            .saturating_add(self.escaped.saturating_mul(2))
    }

    /// What a request holds while it is handled: the parsed value and one serialized copy (the
    /// line sent to a server, or the reply), which is never longer than the text plus 24
    /// bytes per value (a number written out again: `1e9` becomes `1000000000.0`).
    pub fn held(&self) -> usize {
        let values = self.elements.saturating_add(self.entries).saturating_add(1);
        self.parsed()
            .saturating_add(self.text)
            .saturating_add(values.saturating_mul(24))
    }
}

/// Containers deeper than this are counted as objects (the costlier kind); serde_json refuses
/// nesting past 128 anyway.
const TRACKED_DEPTH: usize = 128;

/// Counts what `text` holds, in one pass (see the module docs). Text that is not JSON gets
/// some count; it fails to parse afterwards.
pub fn scan(text: &[u8]) -> JsonCost {
    let mut cost = JsonCost {
        text: text.len(),
        ..JsonCost::default()
    };
    // Bit i set: the container at depth i is an array.
    let mut arrays: u128 = 0;
    let mut depth = 0usize;
    // A container was just opened: the next byte that is not white space tells whether it is
    // empty.
    let mut opened = false;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        i += 1;
        if opened && !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            opened = false;
            if !matches!(b, b']' | b'}') {
                match is_array(arrays, depth) {
                    true => cost.arrays += 1,
                    false => cost.objects += 1,
                }
                add_item(&mut cost, arrays, depth);
            }
        }
        match b {
            b'"' => {
                cost.strings += 1;
                let (end, escaped) = string_end(text, i);
                if escaped {
                    cost.escaped = cost.escaped.max(end - i);
                }
                i = end;
            }
            b'[' | b'{' => {
                depth += 1;
                let array = b == b'[';
                if depth <= TRACKED_DEPTH {
                    let bit = 1u128 << (depth - 1);
                    arrays = if array { arrays | bit } else { arrays & !bit };
                }
                opened = true;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' => add_item(&mut cost, arrays, depth),
            _ => {}
        }
    }
    cost
}

/// Whether the container at `depth` is an array (a container past [`TRACKED_DEPTH`] is
/// taken for an object).
fn is_array(arrays: u128, depth: usize) -> bool {
    (1..=TRACKED_DEPTH).contains(&depth) && arrays & (1u128 << (depth - 1)) != 0
}

/// One more item of the container at `depth` (none at the top level).
fn add_item(cost: &mut JsonCost, arrays: u128, depth: usize) {
    if depth == 0 {
        return;
    }
    match is_array(arrays, depth) {
        true => cost.elements += 1,
        false => cost.entries += 1,
    }
}

/// The index just past the string that starts before `from` (its closing quote, or the end of
/// the text), and whether it has an escape.
fn string_end(text: &[u8], mut from: usize) -> (usize, bool) {
    let mut escaped = false;
    loop {
        match memchr::memchr2(b'"', b'\\', &text[from..]) {
            None => return (text.len(), escaped),
            Some(k) if text[from + k] == b'"' => return (from + k + 1, escaped),
            // A backslash escapes the next byte, whatever it is.
            Some(k) => from += k + 2,
        }
        escaped = true;
        if from >= text.len() {
            return (text.len(), escaped);
        }
    }
}
