//! Keeping the user's namespace across sandboxes (ARCHITECTURE.md, "State that outlives the
//! sandbox"): `keeper.rs` ([`Snapshots`]) is the one owner of the feature (taking, keeping,
//! restoring, dropping on `reset`, reporting); `store.rs` owns the snapshot file, `notice.rs`
//! words what a fresh sandbox's first result says about it. The sandbox actor calls
//! [`Snapshots`]; the session (`session/keeping.rs`) carries the frames.

mod keeper;
mod notice;
mod store;

pub use keeper::{AfterRestore, Snapshots};
