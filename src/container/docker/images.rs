//! Images through bollard: inspect, build from a Containerfile context, load a docker-archive,
//! remove. Podman 4.3's compatible API serves all four (`/build`, `/images/load`); its
//! `/images/create?fromSrc=-` import is not used: it ignores `tag` and reads newline-joined
//! `changes` (as bollard sends them) as one `ENV` value, where a docker-archive's own config
//! carries env, labels and command the same way on both engines.

use std::collections::HashMap;

use bollard::errors::Error as BollardError;
use bollard::query_parameters::{
    BuildImageOptions, BuilderVersion, ImportImageOptions, RemoveImageOptions,
};
use bytes::Bytes;
use futures::StreamExt;

use super::DockerRuntime;
use crate::container::error::RuntimeError;
use crate::container::runtime::{ArchiveStream, ImageInfo, LineSink};

/// The file name the build context carries the recipe under.
pub const CONTAINERFILE: &str = "Containerfile";

impl DockerRuntime {
    /// What the engine knows of `image`; `None` when it is absent.
    pub(super) async fn inspect(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(i) => Ok(Some(ImageInfo {
                id: i.id.unwrap_or_default(),
                size: i.size.unwrap_or_default().max(0) as u64,
                created: i.created.map(|c| c.to_string()).unwrap_or_default(),
                labels: i.config.and_then(|c| c.labels).unwrap_or_default(),
            })),
            Err(BollardError::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(self.err("inspect the sandbox image", e)),
        }
    }

    /// Builds `tag` from `context` (a tar with a [`CONTAINERFILE`]), classic builder.
    pub(super) async fn build(
        &self,
        context: Bytes,
        tag: &str,
        args: &[(String, String)],
        on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        let options = BuildImageOptions {
            dockerfile: CONTAINERFILE.into(),
            t: Some(tag.into()),
            rm: true,
            forcerm: true,
            buildargs: Some(args.iter().cloned().collect::<HashMap<_, _>>()),
            version: BuilderVersion::BuilderV1,
            ..Default::default()
        };
        let mut stream = self
            .docker
            .build_image(options, None, Some(bollard::body_full(context)));
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    for text in [info.stream, info.status].into_iter().flatten() {
                        text.lines().for_each(on_line);
                    }
                }
                Err(e) => return Err(self.stream_err("build the sandbox image", e)),
            }
        }
        Ok(())
    }

    /// Loads a docker-archive.
    pub(super) async fn load(
        &self,
        archive: ArchiveStream,
        on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        let options = ImportImageOptions {
            quiet: false,
            ..Default::default()
        };
        let mut stream = self.docker.import_image_stream(options, archive, None);
        let mut loaded = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    for text in [info.stream, info.status].into_iter().flatten() {
                        loaded |= text.contains("Loaded image");
                        text.lines().for_each(on_line);
                    }
                }
                Err(e) => return Err(self.stream_err("load the sandbox image", e)),
            }
        }
        if loaded {
            Ok(())
        } else {
            Err(RuntimeError::Stream {
                engine: self.engine.clone(),
                action: "load the sandbox image",
                message: "the engine did not report a loaded image".into(),
            })
        }
    }

    /// Removes the tag `image`; `Ok(false)` when there was none.
    pub(super) async fn remove_tag(&self, image: &str) -> Result<bool, RuntimeError> {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            ..Default::default()
        };
        match self.docker.remove_image(image, Some(options), None).await {
            Ok(_) => Ok(true),
            Err(BollardError::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(self.err("remove the sandbox image", e)),
        }
    }

    fn stream_err(&self, action: &'static str, e: BollardError) -> RuntimeError {
        match e {
            BollardError::DockerStreamError { error } => RuntimeError::Stream {
                engine: self.engine.clone(),
                action,
                message: error.trim().to_string(),
            },
            other => self.err(action, other),
        }
    }
}
