//! [`EngineBuild`]: the real [`ImageBuild`]: a connection of its own to the engine (a podman
//! service the bridge started stays up for the whole build, whatever the sandbox actor does
//! with its connection), then the recipe the settings ask for.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::build::{build_on, BuildError, BuildSpec, Reporter};
use super::provision::ImageBuild;
use super::recipe::Source;
use crate::container::Connector;

/// Builds `spec.image` on the engine `connector` reaches.
pub struct EngineBuild {
    spec: BuildSpec,
    connector: Connector,
}

impl EngineBuild {
    /// A builder for `spec` through `connector`.
    pub fn new(spec: BuildSpec, connector: Connector) -> Arc<Self> {
        Arc::new(EngineBuild { spec, connector })
    }
}

#[async_trait::async_trait]
impl ImageBuild for EngineBuild {
    async fn present(&self) -> Result<bool, BuildError> {
        let conn = (self.connector)().await.map_err(BuildError::Engine)?;
        let present = conn.runtime.image_present(&self.spec.image).await;
        conn.close().await;
        present.map_err(BuildError::Engine)
    }

    async fn build(
        &self,
        report: &Reporter<'_>,
        ct: &CancellationToken,
    ) -> Result<Source, BuildError> {
        let conn = (self.connector)().await.map_err(BuildError::Engine)?;
        let built = build_on(conn.runtime.as_ref(), &self.spec, report, ct).await;
        conn.close().await;
        built
    }
}
