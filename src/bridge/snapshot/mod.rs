//! Keeping the user's namespace across sandboxes (ARCHITECTURE.md, "State that outlives the
//! sandbox"): `store.rs` owns the snapshot file, `notice.rs` words what a fresh sandbox's first
//! result says about it. The sandbox actor (`sandbox/keep.rs`) saves and restores; the session
//! (`session/keeping.rs`) carries the frames.

mod notice;
mod store;

pub use notice::{fresh_sandbox, RestoreOutcome};
pub use store::SnapshotStore;
