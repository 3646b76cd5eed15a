//! The sandbox image: its recipes, compiled in (`recipe.rs`), building it on the engine in use
//! (`build.rs`: the registry recipe through the engine's build, the Debian recipe `debian.rs`
//! on the host, or a user's root filesystem tarball, loaded as a docker-archive `archive.rs`),
//! and the background build a bridge starts when the image is missing (`provision/`, one at a
//! time per user through `lock.rs`). `status.rs` describes an image for `image status` and
//! `doctor`. The Debian recipe runs on the host only on `image build` or with
//! `MCP_BRIDGE_IMAGE_HOST_BUILD=1`; its cached tarball is loaded only as recorded (`cached.rs`),
//! and files the build writes are made without following links (`checked_dir::new_file`).

mod archive;
pub mod build;
pub mod cached;
pub mod debian;
mod engine;
pub mod lock;
pub mod provision;
pub mod recipe;
pub mod status;

pub use archive::ArchiveError;
pub use build::{build_on, BuildError, BuildSpec, Report, Reporter, Route};
pub use engine::EngineBuild;
pub use provision::{BuildState, ImageBuild, Provisioner, Requested, Waited};
pub use recipe::{Source, RECIPE_VERSION};
